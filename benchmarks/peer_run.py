"""Run one peer against a URL, pinned to core 0, sampling its process tree's CPU (used by peers.py).

Each runner writes the peer's input files into a scratch directory, starts the peer's own
command in its own venv and session (so a run that overstays is killed as a group), samples the
user + system CPU time of every process in its tree every 0.25 s, and parses the peer's output
file with ``peer_formats``. Start-up and report writing are in the samples too; ``peers.py``
reads only the steady window between them.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil
from ingest import pin
from peer_formats import ITL_PER_GAP, ITL_PER_REQUEST, PeerRequest, parse_aiperf, parse_guidellm, parse_vllm
from peer_install import PeerError, minilm_tokenizer_dir, venv_bin, venv_python, vllm_request_module

PROMPT = "Briefly explain quantum annealing."       # the prompt of benchmarks/ingest.py
MODEL = "m"
SAMPLE_S = 0.25
DRIVER = Path(__file__).resolve().parent / "peer_vllm_driver.py"


@dataclass
class PeerRun:
    requests: list[PeerRequest]
    cpu_samples: list[tuple[float, float]]          # (wall time, CPU seconds of the whole tree)
    itl_basis: str = ITL_PER_GAP
    log_tail: list[str] = field(default_factory=list)


def tree_cpu_s(root: psutil.Process, last_seen: dict[int, float]) -> float:
    """User + system seconds of the root and all its descendants; a process that has exited keeps
    its last reading (children's times are not added again when they are reaped)."""
    try:
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        procs = []
    for proc in procs:
        try:
            times = proc.cpu_times()
            last_seen[proc.pid] = max(last_seen.get(proc.pid, 0.0), times.user + times.system)
        except psutil.Error:
            pass
    return sum(last_seen.values())


def run_measured(command: list[str], cwd: Path, env: dict[str, str],
                 timeout_s: float) -> tuple[int, list, list]:
    """Run ``command`` pinned to core 0; returns (exit code, CPU samples, last log lines)."""
    log_path = cwd / "peer.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([*pin(0), *command], cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    root, seen, samples = psutil.Process(proc.pid), {}, []
    deadline = time.monotonic() + timeout_s
    while proc.poll() is None:
        samples.append((time.time(), tree_cpu_s(root, seen)))
        if time.monotonic() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise PeerError(f"still running after {timeout_s:.0f} s: killed")
        time.sleep(SAMPLE_S)
    tail = log_path.read_text(errors="replace").strip().splitlines()[-5:]
    return proc.returncode, samples, tail


def peer_env(name: str, peers_dir: Path, offline: bool = True) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}
    env["PATH"] = f"{venv_bin(name, peers_dir, '')}{os.pathsep}{env.get('PATH', '')}"
    env.update(HF_HUB_DISABLE_TELEMETRY="1", DO_NOT_TRACK="1", TOKENIZERS_PARALLELISM="false")
    if offline:
        env["HF_HUB_OFFLINE"] = "1"
    return env


def request_s(itl_ms: float, max_tokens: int) -> float:
    return (50.0 + (max_tokens - 1) * itl_ms) / 1000


def _finish(rc: int, tail: list[str], output: Path) -> None:
    if rc != 0 or not output.exists():
        why = f"exit {rc}" if rc != 0 else f"no {output.name}"
        raise PeerError(f"{why}: {' | '.join(tail[-3:])}")


def run_vllm(peers_dir: Path, url: str, streams: int, itl_ms: float, duration_s: float, max_tokens: int,
             tmp: Path) -> PeerRun:
    out = tmp / "vllm.json"
    command = [str(venv_python("vllm", peers_dir)), str(DRIVER),
               "--module", str(vllm_request_module(peers_dir)),
               "--url", url, "--streams", str(streams), "--duration", f"{duration_s:g}",
               "--max-tokens", str(max_tokens), "--out", str(out)]
    rc, samples, tail = run_measured(command, tmp, peer_env("vllm", peers_dir), duration_s + 120)
    _finish(rc, tail, out)
    return PeerRun(parse_vllm(json.loads(out.read_text())), samples, ITL_PER_GAP, tail)


def run_guidellm(peers_dir: Path, url: str, streams: int, itl_ms: float, duration_s: float, max_tokens: int,
                 tmp: Path) -> PeerRun:
    rows = streams * (int(duration_s / request_s(itl_ms, max_tokens)) + 3) * 2   # never run out of prompts
    (tmp / "prompts.jsonl").write_text((json.dumps({"prompt": PROMPT}) + "\n") * rows)
    out = tmp / "benchmarks.json"
    spec = {
        "backend": {"kind": "openai_http", "target": url, "model": MODEL, "max_tokens": max_tokens,
                    "extras": {"body": {"ignore_eos": True}}},
        "profile": {"kind": "concurrent", "streams": [streams]},
        "constraints": [{"kind": "max_duration", "seconds": duration_s}],
        "data": [{"kind": "json_file", "path": str(tmp / "prompts.jsonl")}],
        "outputs": [{"kind": "json", "path": str(out)}],
    }
    (tmp / "scenario.json").write_text(json.dumps({"spec": spec}))
    command = [str(venv_bin("guidellm", peers_dir, "guidellm")), "run", "-c", str(tmp / "scenario.json"),
               "--disable-console-interactive"]
    rc, samples, tail = run_measured(command, tmp, peer_env("guidellm", peers_dir), duration_s + 240)
    _finish(rc, tail, out)
    return PeerRun(parse_guidellm(json.loads(out.read_text())), samples, ITL_PER_REQUEST, tail)


def run_aiperf(peers_dir: Path, url: str, streams: int, itl_ms: float, duration_s: float, max_tokens: int,
               tmp: Path) -> PeerRun:
    (tmp / "prompts.jsonl").write_text((json.dumps({"text": PROMPT}) + "\n") * 10)
    artifacts = tmp / "artifacts"
    grace_s = request_s(itl_ms, max_tokens) + 10     # in-flight requests end normally, none cancelled
    command = [str(venv_bin("aiperf", peers_dir, "aiperf")), "profile", "-m", MODEL, "--url", url,
               "--endpoint-type", "chat", "--streaming", "--concurrency", str(streams),
               "--benchmark-duration", f"{duration_s:g}", "--benchmark-grace-period", f"{grace_s:g}",
               "--input-file", str(tmp / "prompts.jsonl"), "--custom-dataset-type", "single_turn",
               "--dataset-sampling-strategy", "sequential",
               "--extra-inputs", f"max_tokens:{max_tokens}", "--extra-inputs", "ignore_eos:true",
               "--tokenizer", str(minilm_tokenizer_dir()), "--use-server-token-count",
               "--artifact-dir", str(artifacts), "--ui-type", "none"]
    # not offline: AIPerf's offline mode accepts only hub-cache names, not a tokenizer directory
    rc, samples, tail = run_measured(command, tmp, peer_env("aiperf", peers_dir, offline=False),
                                     duration_s + 240)
    out = artifacts / "profile_export.jsonl"
    _finish(rc, tail, out)
    return PeerRun(parse_aiperf(out.read_text()), samples, ITL_PER_GAP, tail)


RUNNERS = {"vllm": run_vllm, "guidellm": run_guidellm, "aiperf": run_aiperf}


def run_peer(name: str, peers_dir: Path, url: str, streams: int, itl_ms: float, duration_s: float,
             max_tokens: int, tmp: Path) -> PeerRun:
    return RUNNERS[name](peers_dir, url, streams, itl_ms, duration_s, max_tokens, tmp)

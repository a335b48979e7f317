"""Start the reference RAG service as a subprocess on a free port (like :mod:`targets.launch`).

    with start_simulator(extra_args=["--prompts", str(DEFAULT_QUESTIONS)]) as sim, \\
            start_rag_service(sim.url, rerank="lexical") as rag:
        httpx.post(rag.url + "/v1/rag", json={"question": "Who founded Velora Systems?"})

The child is ``python -m targets.rag --port 0 ...``; its one listening line on stdout gives the
URL. ``stop()`` sends SIGTERM, waits, and kills the child if it does not exit in time.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from targets import REPO_ROOT
from targets.rag.cli import LISTENING_PREFIX

__all__ = ["RagProcess", "RagServiceStartError", "rag_command", "start_rag_service"]

START_TIMEOUT_S = 20.0
DENSE_START_TIMEOUT_S = 180.0     # torch import + model load + corpus embedding on a cold cache


class RagServiceStartError(RuntimeError):
    """The service did not print its listening line in time (the message includes its stderr)."""


@dataclass
class RagProcess:
    process: subprocess.Popen
    url: str
    config: dict[str, Any]
    _stderr_lines: list[str] = field(default_factory=list, repr=False)

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    @property
    def stderr_text(self) -> str:
        return "".join(self._stderr_lines)

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self, timeout_s: float = 5.0) -> int | None:
        """SIGTERM, wait up to ``timeout_s``, then SIGKILL; returns the exit status."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout_s)
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()
        return self.process.returncode

    def __enter__(self) -> RagProcess:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def rag_command(upstream: str, retriever: str, rerank: str, top_k: int, extra_args: Sequence[str], python: str,
                host: str) -> list[str]:
    return [python, "-m", "targets.rag", "--upstream", upstream, "--retriever", retriever, "--rerank", rerank,
            "--top-k", str(top_k), "--host", host, "--port", "0", *extra_args]


def start_rag_service(
    upstream: str,
    retriever: str = "bm25",
    rerank: str = "none",
    top_k: int = 3,
    extra_args: Sequence[str] = (),
    python: str = sys.executable,
    host: str = "127.0.0.1",
    timeout_s: float | None = None,
    cwd: str | Path = REPO_ROOT,
) -> RagProcess:
    """Run the service on a free port and return once it listens (see module docstring)."""
    if timeout_s is None:
        timeout_s = DENSE_START_TIMEOUT_S if "dense" in (retriever, rerank) else START_TIMEOUT_S
    command = rag_command(upstream, retriever, rerank, top_k, extra_args, python, host)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    env.setdefault("PYTHONUNBUFFERED", "1")
    process = subprocess.Popen(command, cwd=str(cwd), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, encoding="utf-8", errors="replace")
    stderr_lines: list[str] = []
    stderr_reader = threading.Thread(target=_drain, args=(process.stderr, stderr_lines), daemon=True)
    stderr_reader.start()
    line_box: list[str] = []
    reader = threading.Thread(target=lambda: line_box.append(process.stdout.readline()), daemon=True)  # type: ignore[union-attr]
    reader.start()
    reader.join(timeout_s)
    line = line_box[0].strip() if line_box else ""
    if not line.startswith(LISTENING_PREFIX):
        if process.poll() is None:
            process.kill()
        try:
            process.wait(5)
        except subprocess.TimeoutExpired:
            pass
        stderr_reader.join(2.0)
        reason = (f"no listening line within {timeout_s:.0f} s" if not line_box
                  else "it exited before listening" if not line else f"unexpected output {line!r}")
        raise RagServiceStartError(
            f"the RAG service did not start ({reason}; exit status {process.returncode}).\n"
            f"command: {' '.join(command)}\nstderr:\n{''.join(stderr_lines).strip() or '(empty)'}")
    threading.Thread(target=_drain, args=(process.stdout, []), daemon=True).start()
    config = {"retriever": retriever, "rerank": rerank, "top_k": top_k, "upstream": upstream}
    return RagProcess(process, line[len(LISTENING_PREFIX):], config, stderr_lines)


def _drain(stream: Any, sink: list[str], keep: int = 200) -> None:
    """Read a child's pipe to its end so it never blocks; keep the last ``keep`` lines."""
    try:
        for line in stream:
            sink.append(line)
            if len(sink) > keep:
                del sink[: len(sink) - keep]
    except (ValueError, OSError):
        pass

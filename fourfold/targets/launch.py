"""Start the simulator as a subprocess on a free port (what locustfiles use without ``--host``).

    with start_simulator("candidate", seed=1) as sim:
        httpx.post(sim.url + "/v1/chat/completions", json=...)

The child is ``python -m fourfold.targets.sim --port 0 ...``; its one "listening" line on stdout gives the
URL. ``stop()`` sends SIGTERM, waits, and kills the child if it does not exit in time. A child
also ends by itself when this process dies, even by ``kill -9`` (:mod:`fourfold.targets.lifeline`).
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
from typing import Self

from fourfold.errors import SimulatorStartError
from fourfold.targets import IMPORT_ROOT
from fourfold.targets.lifeline import child_env

LISTENING_PREFIX = "fourfold-sim listening on "   # the line targets.sim.cli prints
START_TIMEOUT_S = 20.0


@dataclass
class ChildProcess:
    """A server child process that announced its URL on one stdout line."""

    process: subprocess.Popen
    url: str
    _stderr_lines: list[str] = field(default_factory=list, repr=False, kw_only=True)

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

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


@dataclass
class SimProcess(ChildProcess):
    """A running simulator child process."""

    profile: str = "baseline"
    seed: int = 0


def spawn_listening(command: list[str], prefix: str, what: str, timeout_s: float, error: type[Exception],
                    cwd: str | Path | None = None) -> tuple[subprocess.Popen, str, list[str]]:
    """Run ``command`` with the repository on PYTHONPATH and wait for its ``prefix URL`` line.

    Returns (process, url, the child's recent stderr lines, kept up to date). Raises ``error`` with
    the child's stderr when no such line arrives within ``timeout_s``."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(IMPORT_ROOT), env.get("PYTHONPATH", "")) if p)
    env.setdefault("PYTHONUNBUFFERED", "1")
    env.update(child_env())               # the child ends when this process does (kill -9 included)
    process = subprocess.Popen(command, cwd=None if cwd is None else str(cwd), env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, encoding="utf-8", errors="replace")
    stderr_lines: list[str] = []
    stderr_reader = threading.Thread(target=_drain, args=(process.stderr, stderr_lines), daemon=True)
    stderr_reader.start()
    line_box: list[str] = []
    reader = threading.Thread(
        target=lambda: line_box.append(process.stdout.readline()), daemon=True)  # type: ignore[union-attr]
    reader.start()
    reader.join(timeout_s)
    line = line_box[0].strip() if line_box else ""
    if not line.startswith(prefix):
        if process.poll() is None:
            process.kill()
        try:
            process.wait(5)
        except subprocess.TimeoutExpired:
            pass
        stderr_reader.join(2.0)
        if not line_box:
            reason = f"no listening line within {timeout_s:.0f} s"
        elif not line:
            reason = "it exited before listening"
        else:
            reason = f"unexpected output {line!r}"
        stderr = "".join(stderr_lines).strip() or "(empty)"
        raise error(f"the {what} did not start ({reason}; exit status {process.returncode}).\n"
                    f"command: {' '.join(command)}\nstderr:\n{stderr}")
    threading.Thread(target=_drain, args=(process.stdout, []), daemon=True).start()
    return process, line[len(prefix):], stderr_lines


def simulator_command(profile: str, seed: int, extra_args: Sequence[str], python: str,
                      host: str) -> list[str]:
    return [python, "-m", "fourfold.targets.sim", "--profile", profile, "--seed", str(seed),
            "--host", host, "--port", "0", *extra_args]


def start_simulator(
    profile: str = "baseline",
    seed: int = 0,
    extra_args: Sequence[str] = (),
    python: str = sys.executable,
    host: str = "127.0.0.1",
    timeout_s: float = START_TIMEOUT_S,
    cwd: str | Path | None = None,
    prefix: Sequence[str] = (),
) -> SimProcess:
    """Run the simulator on a free port and return once it listens (see module docstring).

    ``prefix`` is prepended to the command (e.g. ``["taskset", "-c", "1"]``).
    """
    command = [*prefix, *simulator_command(profile, seed, extra_args, python, host)]
    process, url, stderr_lines = spawn_listening(command, LISTENING_PREFIX, "simulator", timeout_s,
                                                 SimulatorStartError, cwd)
    return SimProcess(process, url, profile=profile, seed=seed, _stderr_lines=stderr_lines)


def _drain(stream, sink: list[str], keep: int = 200) -> None:
    """Read a child's pipe to its end so it never blocks; keep the last ``keep`` lines."""
    try:
        for line in stream:
            sink.append(line)
            if len(sink) > keep:
                del sink[: len(sink) - keep]
    except (ValueError, OSError):
        pass

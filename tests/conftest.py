"""Shared test helpers: free loopback ports, real locust processes, run directories."""

from __future__ import annotations

# Locust patches the standard library with gevent when it is imported; do it first, once, so every
# test runs under the same (patched) socket and threading modules whatever the import order.
from gevent import monkey

monkey.patch_all()

import json  # noqa: E402
import os  # noqa: E402
import socket  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import gevent  # noqa: E402
import pytest  # noqa: E402

from tests import forkserver  # noqa: E402

REPO = Path(__file__).resolve().parents[1]

@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist, make the worker's queue of tests safe beside gevent's patches.

    xdist's worker waits for its next tests on an ``Event`` that execnet's receiving thread (a real
    OS thread, started before this file patched ``threading``) sets; patched, that Event is
    gevent's, whose waiter is never woken from another thread (gevent's ``LoopExit``). The queue
    gets a real lock and an event that the waiting greenlet polls, so the hub (and the servers a
    module keeps on it) runs while the worker waits."""
    if not hasattr(config, "workerinput"):
        return
    for plugin in config.pluginmanager.get_plugins():
        queue = getattr(plugin, "torun", None)
        if queue is not None and hasattr(queue, "_has_items_event"):
            # _thread's C RLock: threading.RLock, even the original function, builds a Python RLock on
            # the patched (gevent) lock, and a greenlet waiting on it while execnet's thread held it
            # ended a CI worker in LoopExit
            queue._lock = monkey.get_original("_thread", "RLock")()
            queue._has_items_event = _PolledEvent()


# The files that took longest on .ci/tests' workers (seconds, summed over their tests, at bb2625c's
# parent), longest first; the sweeps lead the timing step
LONGEST_FILES = (
    "integration/test_sweep.py", "integration/test_verdicts_real.py", "hostile/test_wire.py",
    "packaging/test_wheel.py", "integration/test_history.py", "integration/test_summary_vs_report.py",
    "calibration/test_calibration.py", "integration/test_sweep_live.py", "real/test_tools.py",
    "real/test_levels.py", "calibration/test_history_calibration.py", "integration/test_l2_saturation.py",
    "integration/test_bad_dataset_runs.py", "integration/test_l3_locust.py", "hostile/test_streams.py",
    "integration/test_generator_health_runs.py", "integration/test_synthetic_prefill.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The longest files first (:data:`LONGEST_FILES`), then the other files with a ``slow`` or
    ``real`` test, then the rest; each file keeps its order and stays together. .ci/tests hands
    files to its workers in this order (``--no-loadscope-reorder``: pytest-xdist's own order, by
    number of tests, started the long files of few tests last, to run alone at the end)."""
    rank = {Path(__file__).parent / name: i for i, name in enumerate(LONGEST_FILES)}
    heavy = {item.path for item in items
             if item.get_closest_marker("slow") or item.get_closest_marker("real")}
    items.sort(key=lambda item: (rank.get(item.path, len(rank)), item.path not in heavy))    # stable


class _PolledEvent:
    """``set`` from any thread (a plain attribute: atomic under the GIL), ``wait`` on the gevent hub."""

    def __init__(self) -> None:
        self._flag = False

    def set(self) -> None:
        self._flag = True

    def clear(self) -> None:
        self._flag = False

    def is_set(self) -> bool:
        return self._flag

    def wait(self, timeout: float | None = None) -> bool:
        waited = 0.0
        while not self._flag and (timeout is None or waited < timeout):
            gevent.sleep(0.005)
            waited += 0.005
        return self._flag

LOCUST = [sys.executable, "-m", "locust"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def locust_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    env.pop("LOCUST_HOST", None)
    return env


def run_locust(args: list[str], cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run ``locust`` to completion in ``cwd`` (a tmp dir: run directories land there): a child of
    the test worker's fork server (tests/forkserver.py), as ``python -m locust`` would run."""
    return forkserver.run(args, cwd, locust_env(), timeout)


def run_distributed(common: list[str], master_args: list[str], cwd: Path, workers: int = 2,
                    timeout: float = 90) -> str:
    """A headless run on a master and ``workers`` workers on 127.0.0.1 (``common`` given to all of them);
    the master's output. Fails the test when the master does not exit 0; kills what is left."""
    port = free_port()
    master = forkserver.popen([*common, "--master", "--master-bind-host", "127.0.0.1", "--master-bind-port",
                               str(port), "--headless", "--expect-workers", str(workers), *master_args],
                              cwd, locust_env(), merge=True)
    procs = [forkserver.popen([*common, "--worker", "--master-host", "127.0.0.1", "--master-port", str(port)],
                              cwd, locust_env(), merge=True)
             for _ in range(workers)]
    try:
        out, _ = master.communicate(timeout=timeout)
        for proc in procs:
            proc.communicate(timeout=30)
    finally:
        for proc in (master, *procs):
            if proc.poll() is None:
                proc.kill()
    assert master.returncode == 0, out[-3000:]
    return out


def only_run_dir(base: Path) -> Path:
    runs = [p for p in (base / "runs").iterdir() if p.is_dir()]
    assert len(runs) == 1, f"expected one run directory, found {runs}"
    return runs[0]


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def preflight_requests(run_dir: Path) -> int:
    """The requests a run's preflight sent (meta.json ``preflight``; no records): a target's own count
    is the run's records plus these (docs/errors.md#preflight)."""
    meta = json.loads((Path(run_dir) / "meta.json").read_text())
    return sum(int(entry["requests"]) for entry in meta.get("preflight", []))


@pytest.fixture
def locustfile():
    def path(name: str) -> str:
        return str(REPO / "locustfiles" / name)
    return path

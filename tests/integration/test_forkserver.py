"""The tests' fork server (tests/forkserver.py) behaves as ``python -m locust`` / ``python -m fourfold``
would: the child is forked from the server, runs in the given directory and environment, its streams
and exit code come back as subprocess gives them (a signal as a negative code), and what a fork
cannot give falls back to a real process."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

import pytest

from tests import forkserver
from tests.conftest import REPO, free_port, locust_env

pytestmark = pytest.mark.integration


L1 = str(REPO / "locustfiles" / "l1_throughput.py")


@pytest.mark.parametrize("args", [["--version"], ["--no-such-option"],
                                  ["-f", L1, "--headless", "--max-tokens", "-5"]])
def test_exit_code_and_streams_are_those_of_a_fresh_process(tmp_path, args):
    forked = forkserver.run(args, tmp_path, locust_env(), 60)
    fresh = subprocess.run([sys.executable, "-m", "locust", *args], cwd=tmp_path, env=locust_env(),
                           capture_output=True, text=True, timeout=60, check=False)
    def same(text: str) -> str:                      # log lines' times aside
        return re.sub(r"^\[[^]]*\] ", "", text, flags=re.M)

    assert (forked.returncode, forked.stdout, same(forked.stderr)) == \
        (fresh.returncode, fresh.stdout, same(fresh.stderr))
    assert forked.stdout + forked.stderr


def test_the_child_runs_in_its_directory_and_environment(tmp_path):
    """``fourfold history list`` with a relative store and the store named by an environment variable
    only the child has: the file lands in the child's directory."""
    env = {**os.environ, "FOURFOLD_HISTORY": "here.sqlite"}
    done = forkserver.run(["history", "list"], tmp_path, env, 60, module="fourfold")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "here.sqlite holds no run yet" in done.stdout and (tmp_path / "here.sqlite").is_file()
    assert "FOURFOLD_HISTORY" not in os.environ


def test_a_child_is_forked_from_the_server_and_a_signal_is_a_negative_code(tmp_path):
    port = free_port()
    proc = forkserver.popen(["-f", L1, "--web-host", "127.0.0.1", "--web-port", str(port),
                             "--host", "http://127.0.0.1:9"], tmp_path, locust_env(), merge=True)
    assert isinstance(proc, forkserver.Forked)
    with open(f"/proc/{proc.pid}/stat", encoding="utf-8") as fh:
        parent = int(fh.read().rsplit(")", 1)[1].split()[1])
    assert parent == forkserver._servers["locust"].proc.pid
    time.sleep(1.0)
    assert proc.poll() is None
    proc.kill()
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == -9 and err is None


def test_what_a_fork_cannot_give_is_a_real_process(tmp_path):
    env = {**locust_env(), "PYTHONPATH": str(tmp_path)}          # read only when an interpreter starts
    proc = forkserver.popen(["--version"], tmp_path, env)
    assert isinstance(proc, subprocess.Popen) and proc.args[:3] == [sys.executable, "-m", "locust"]
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0 and out.startswith("locust ")

"""Nothing lost: records reach the disk during a run, a stop signal flushes everything, a killed
run keeps every complete line, and a killed worker does not take the master down.

"Requests sent" is what the simulator received (``fourfold_sim_received_total`` on its
/metrics): one record per request it saw, whatever became of the request.
"""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import time
import urllib.request
import warnings
from pathlib import Path

import pytest

from fourfold.rundir.runread import RunLogWarning, read_records
from fourfold.targets.launch import SimProcess, start_simulator
from tests.conftest import LOCUST, free_port, locust_env, preflight_requests, read_jsonl

pytestmark = pytest.mark.integration


def sim_metrics(sim: SimProcess) -> dict[str, float]:
    with urllib.request.urlopen(sim.url + "/metrics", timeout=5) as response:
        text = response.read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            out[re.sub(r"\{.*\}", "", name) if "fault=" not in name else name] = float(value)
    return out


def received(sim: SimProcess) -> int:
    """Generation requests the simulator has received, once the client is gone."""
    return int(sim_metrics(sim)["fourfold_sim_received_total"])


def _default_sigint() -> None:
    # A suite started in the background (`cmd &` in a script, some CI runners) inherits SIGINT
    # *ignored*, and exec keeps it ignored: the Locust under test would never see the Ctrl-C
    # this file sends it.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start_locust(args: list[str], cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([*LOCUST, *args], cwd=cwd, env=locust_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=_default_sigint)


def wait_for_lines(path: Path, n: int, proc: subprocess.Popen[str], timeout_s: float = 60) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, "locust ended early:\n" + proc.communicate()[1][-3000:]
        if path.exists():
            count = path.read_bytes().count(b"\n")
            if count >= n:
                return count
        time.sleep(0.1)
    raise AssertionError(f"{path} did not reach {n} lines in {timeout_s} s")


def run_dir_of(base: Path, timeout_s: float = 60) -> Path:    # start-up on a busy machine
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        runs = [p for p in (base / "runs").glob("*") if p.is_dir()] if (base / "runs").exists() else []
        if runs:
            assert len(runs) == 1, runs
            return runs[0]
        time.sleep(0.1)
    raise AssertionError("no run directory appeared")


@pytest.fixture
def sim():
    with start_simulator("flat") as process:
        yield process


def l1_args(locustfile, sim: SimProcess, users: int = 4) -> list[str]:
    return ["-f", locustfile("l1_throughput.py"), "--headless", "-u", str(users), "-r", str(users),
            "-t", "60s", "--host", sim.url, "--max-tokens", "24", "--ignore-eos", "--metrics-url", "off"]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_records_are_on_disk_during_the_run_and_a_stop_signal_flushes_everything(sim, tmp_path, locustfile,
                                                                                 signum):
    proc = start_locust(l1_args(locustfile, sim), tmp_path)
    try:
        run = run_dir_of(tmp_path)
        records_path = run / "records.jsonl"
        # flushed at least every second: lines are readable while locust is still writing them
        first = wait_for_lines(records_path, 3, proc)
        time.sleep(1.5)
        assert proc.poll() is None
        assert records_path.read_bytes().count(b"\n") > first
        proc.send_signal(signum)
        _, stderr = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert "Traceback" not in stderr, stderr[-3000:]
    summary = json.loads((run / "summary.json").read_text())
    records = read_jsonl(records_path)
    assert len(records) + preflight_requests(run) == received(sim)   # a record per request it saw
    assert summary["records"] == len(records)             # summary written after the last record
    measured = [r for r in records if not r["warmup"] and r["error_class"] != "cancelled"]
    assert summary["total"]["requests"] == len(measured)
    assert all(r["error_class"] in ("ok", "cancelled") for r in records)
    assert sum(r["error_class"] == "cancelled" for r in records) <= 4       # at most one per user


def test_kill_9_keeps_every_complete_line_and_the_reader_skips_a_torn_one(sim, tmp_path, locustfile):
    proc = start_locust(l1_args(locustfile, sim, users=8), tmp_path)
    try:
        run = run_dir_of(tmp_path)
        records_path = run / "records.jsonl"
        wait_for_lines(records_path, 20, proc)
        proc.kill()                                            # SIGKILL: no handler runs
        proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert not (run / "summary.json").exists()
    data = records_path.read_bytes()
    complete = data[:data.rfind(b"\n") + 1].splitlines()
    assert all(json.loads(line)["schema"] == 1 for line in complete)    # every complete line is a record
    assert len(complete) <= received(sim)                   # lost at most what was not flushed yet
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert len(list(read_records(run))) == len(complete)
    assert bool(caught) == (not data.endswith(b"\n"))       # a torn tail is skipped with a warning
    # make the torn line certain: half of a record, as a kill in the middle of a write leaves it
    with open(records_path, "ab") as fh:
        fh.write(complete[-1][: len(complete[-1]) // 2])
    with pytest.warns(RunLogWarning, match="torn last line"):
        assert len(list(read_records(run))) == len(complete)


def test_kill_9_of_a_worker_leaves_the_master_finishing_with_what_was_shipped(sim, tmp_path, locustfile):
    port = free_port()
    common = ["-f", locustfile("l1_throughput.py"), "--max-tokens", "16", "--ignore-eos",
              "--metrics-url", "off"]
    master = subprocess.Popen(
        [*LOCUST, *common, "--master", "--master-bind-host", "127.0.0.1", "--master-bind-port", str(port),
         "--headless", "-u", "4", "-r", "4", "-t", "10s", "--expect-workers", "2", "--host", sim.url],
        cwd=tmp_path, env=locust_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    workers = [subprocess.Popen([*LOCUST, *common, "--worker", "--master-host", "127.0.0.1",
                                 "--master-port", str(port)],
                                cwd=tmp_path, env=locust_env(), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True) for _ in range(2)]
    try:
        records_path = run_dir_of(tmp_path) / "records.jsonl"
        # both workers have shipped at least once: records from all 4 users (each worker runs two; the
        # first 10 lines alone came from one worker in a busy CI run, its peer due a report later)
        wait_for_lines(records_path, 10, master)
        deadline = time.monotonic() + 30
        while len({json.loads(line).get("user_id") for line in records_path.read_bytes().splitlines()
                   if line.endswith(b"}")}) < 4:
            assert time.monotonic() < deadline and master.poll() is None, "a worker never shipped records"
            time.sleep(0.1)
        workers[0].kill()
        t_kill = time.monotonic()
        master_out, _ = master.communicate(timeout=60)
        survivor_out, _ = workers[1].communicate(timeout=30)
        workers[0].communicate(timeout=10)
    finally:
        for proc in (master, *workers):
            if proc.poll() is None:
                proc.kill()
    assert time.monotonic() - t_kill < 30, "the master did not finish on time"
    assert "Traceback" not in master_out, master_out[-3000:]
    run = records_path.parent
    summary = json.loads((run / "summary.json").read_text())
    records = list(read_records(run))
    survivor, survivor_id = re.search(r"fourfold worker: (\d+) records measured.* \(worker (\S+)\)",
                                      survivor_out).groups()
    # every record of the survivor, plus what the dead one shipped
    assert int(survivor) > 0 and len(records) >= int(survivor)
    sent = received(sim)
    # the killed worker's last unshipped records are lost
    assert len(records) <= sent
    assert summary["records"] == len(records)
    # ... and the master says so: which worker, since when, how many of its requests have no record
    workers = summary["workers"]
    assert workers["count"] == 2
    [lost] = workers["stopped_reporting"]
    assert lost["worker"] != survivor_id and lost["silent_s"] >= 3
    assert lost["records_received"] > 0                   # it shipped at least once before the kill
    assert 0 < lost["unaccounted"] == lost["requests_started"] - lost["records_received"]
    assert lost["unaccounted"] <= sent - len(records)     # a lower bound of the records really missing
    assert workers["unaccounted"] == lost["unaccounted"]  # the survivor's every request has its record
    assert f"fourfold: worker {lost['worker']} stopped reporting at {lost['last_heard_at']}" in master_out
    assert f"{lost['unaccounted']} of its {lost['requests_started']} started requests are unaccounted for" \
        in master_out


def _gone(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE      # exited, not reaped yet
    except psutil.NoSuchProcess:
        return True


def _wait_gone(pid: int, timeout_s: float) -> float | None:
    """Seconds until ``pid`` exited, or None if it still runs after ``timeout_s``."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        if _gone(pid):
            return time.monotonic() - t0
        time.sleep(0.05)
    return None


def test_kill_9_of_locust_leaves_no_embedded_simulator_running(tmp_path, locustfile):
    import psutil

    proc = start_locust(["-f", locustfile("l1_throughput.py"), "--headless", "-u", "2", "-r", "2",
                         "-t", "60s", "--max-tokens", "8", "--metrics-url", "off"], tmp_path)
    try:
        wait_for_lines(run_dir_of(tmp_path) / "records.jsonl", 2, proc)   # the simulator answers
        [child] = [c for c in psutil.Process(proc.pid).children()
                   if "fourfold.targets.sim" in " ".join(c.cmdline())]
        proc.kill()
        proc.communicate(timeout=10)
        waited = _wait_gone(child.pid, 5)
    finally:
        if proc.poll() is None:
            proc.kill()
    if waited is None:
        child.kill()
    assert waited is not None, "the simulator outlived the locust process that started it"


def test_a_target_child_ends_with_its_parent_without_pdeathsig_too(tmp_path):
    """The portable half of fourfold.targets.lifeline: with PR_SET_PDEATHSIG off (a launcher on a
    thread other than its main one, or not Linux) the child still sees its parent go (getppid)."""
    import os
    import sys

    child_code = ("from fourfold.targets.lifeline import watch_parent; import time; "
                  "assert watch_parent(poll_s=0.1); print('watching', flush=True); time.sleep(60)")
    parent_code = ("import os, subprocess, sys, time; "
                   f"env = dict(os.environ, FOURFOLD_PARENT_PID=str(os.getpid()), FOURFOLD_PDEATHSIG='0'); "
                   f"child = subprocess.Popen([sys.executable, '-c', {child_code!r}], env=env); "
                   "print(child.pid, flush=True); time.sleep(60)")
    parent = subprocess.Popen([sys.executable, "-c", parent_code], stdout=subprocess.PIPE, text=True)
    child_pid = int(parent.stdout.readline())
    time.sleep(1.0)                      # the child is up and watching
    assert not _gone(child_pid)
    parent.kill()
    parent.communicate(timeout=10)
    waited = _wait_gone(child_pid, 5)
    if waited is None:
        os.kill(child_pid, signal.SIGKILL)
    assert waited is not None and waited < 2, waited


def test_a_request_stopped_before_it_left_is_marked_unsent_and_one_that_left_is_not(monkeypatch):
    """A user stopped while connecting sent nothing: LLMUser drops it instead of recording a
    "cancelled" request the target never received; one stopped while waiting for an answer is kept."""
    import gevent
    import httpx

    from fourfold.client.dialects import RequestOptions, get_dialect
    from fourfold.client.stream import UNSENT, send
    from fourfold.client.transport import RawH1Transport
    from fourfold.measure.record import RequestRecord
    from fourfold.workloads.items import Item

    dialect = get_dialect("openai")
    request = dialect.build(Item(id="q", messages=({"role": "user", "content": "hi"},)), RequestOptions())
    silent = socket.socket()                   # accepts (in the kernel) and never answers
    silent.bind(("127.0.0.1", 0))
    silent.listen(4)
    url = f"http://127.0.0.1:{silent.getsockname()[1]}"
    records = {}
    for case in ("connecting", "waiting"):
        transport = RawH1Transport(read_timeout_s=30)
        if case == "connecting":
            monkeypatch.setattr(transport, "_connect", lambda key, phases: gevent.sleep(30))
        client = httpx.Client(base_url=url, transport=transport)
        records[case] = RequestRecord()
        greenlet = gevent.spawn(send, client, dialect, request, records[case])
        gevent.sleep(0.2)
        greenlet.kill()                            # what Locust does to a user at the end of a run
        assert isinstance(greenlet.exception, gevent.GreenletExit) or greenlet.successful()
        client.close()
    silent.close()
    assert records["connecting"].extra.get(UNSENT) is True
    assert UNSENT not in records["waiting"].extra

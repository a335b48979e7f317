"""Hostile conditions around the run itself: a refused target, a run directory that cannot be
written, a disk that stops taking records, a process out of file descriptors. A real headless L1
run each time: it ends by itself, no traceback, and every record is on disk or counted lost."""

from __future__ import annotations

import json
import resource
import signal

import pytest

from tests.hostile import harness as h

pytestmark = pytest.mark.integration
HANDLERS = "tests.hostile.test_lifecycle"


# ---------------------------------------------------------------- handlers (run in the server process)

async def good(conn: h.Conn, req: h.Request) -> None:
    await conn.send_sse(h.good_stream(3))


# ---------------------------------------------------------------- limits for the locust process

def _file_size_limit(limit_bytes: int):
    def apply() -> None:
        # a write past the limit fails (EFBIG) instead of killing
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))
    return apply


def _descriptor_limit(n: int):
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (n, n))
    return apply


def _lines(run: h.Run) -> list[bytes]:
    assert run.run_dir is not None
    return (run.run_dir / "records.jsonl").read_bytes().splitlines(keepends=True)


# ---------------------------------------------------------------- the tests

@pytest.mark.timing
def test_a_refused_target_gets_few_attempts_per_user_and_the_backoff_is_reported(tmp_path):
    run = h.run_level(h.refused_url(), tmp_path, users=2, seconds=4, kill_after_s=40)
    h.assert_clean(run, max_s=25, rcs=(1,))
    assert run.records and {r["error_class"] for r in run.records} == {"connect_error"}
    per_user = {}
    for record in run.records:
        per_user[record["user_id"]] = per_user.get(record["user_id"], 0) + 1
    # 0.1 s doubling: attempts at ~0, 0.1, 0.3, 0.7, 1.5, 3.1 s of a 4 s run (thousands without a backoff)
    assert len(per_user) == 2 and all(4 <= n <= 8 for n in per_user.values()), per_user
    backoff = run.summary["backoff"]
    assert backoff["connect_errors"] == len(run.records)           # each attempt one record, each counted
    assert backoff["longest_wait_s"] in (1.6, 3.2)  # 3.2 on a quiet machine; a loaded one starts users late
    # two users, each waiting most of the 4 s, until the stop: at most the run's own span (beside two
    # CPU hogs the stop came 0.7 s late, and the two waits summed 9.4 s)
    span_s = run.summary["finished_at"] - run.summary["started_at"]
    assert 4.0 <= backoff["wait_s"] <= 2 * span_s, (backoff["wait_s"], span_s)
    assert f"fourfold: {len(run.records)} connect errors; users backed off" in run.stdout


def test_a_run_directory_that_is_a_file_is_refused_before_any_user_starts(tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file\n")
    with h.HostileServer(f"{HANDLERS}:good") as server:
        run = h.run_level(server.url, tmp_path / "base", extra=["--run-dir", str(blocker / "runs")],
                          kill_after_s=30, csv_html=False)
        requests = server.requests
    h.assert_clean(run, max_s=15, rcs=(2,))
    errors = [line for line in run.stderr.splitlines() if "error" in line.lower()]
    assert errors == [f"fourfold: error: --run-dir {blocker / 'runs'}: {blocker} is a file, not a directory "
                      f"({blocker} is in its path); give a directory to hold the run directories"], run.stderr
    assert requests == 0 and run.run_dir is None and blocker.read_text() == "a file\n"


def test_records_that_cannot_be_written_are_counted_and_the_run_still_stops(tmp_path):
    """records.jsonl may grow to 16 KiB (RLIMIT_FSIZE), like a disk that fills up mid-run: the writes
    past it fail, each lost record is counted, the file keeps whole lines only, the run ends on time
    and summary.json (a file of its own) says how many were lost."""
    with h.HostileServer(f"{HANDLERS}:good") as server:
        run = h.run_level(server.url, tmp_path, users=4, seconds=4, csv_html=False,
                          preexec_fn=_file_size_limit(16 * 1024), kill_after_s=40)
        requests = server.requests
    h.assert_clean(run, max_s=25)
    lines = _lines(run)
    assert all(line.endswith(b"\n") and json.loads(line)["schema"] == 1 for line in lines)
    summary = run.summary
    assert summary is not None and summary["records"] == len(lines)
    assert summary["records_lost"] > 0 and "File too large" in summary["records_lost_reason"]
    # every request the server saw: kept or counted
    assert summary["records"] + summary["records_lost"] == requests
    assert (f"fourfold: {summary['records_lost']} of {requests} records could not be written" in run.stdout)
    assert run.stderr.count("a record could not be written") == 1        # said once, not once per record


def test_out_of_file_descriptors_every_record_is_kept_and_summary_json_is_written(tmp_path):
    """300 users with 256 descriptors: connections fail (connect_error, with backoff), but records.jsonl
    was opened before the users started and summary.json has a spare descriptor."""
    with h.HostileServer(f"{HANDLERS}:good") as server:
        run = h.run_level(server.url, tmp_path, users=300, seconds=4, csv_html=False,
                          preexec_fn=_descriptor_limit(256), kill_after_s=60)
        requests = server.requests
    h.assert_clean(run, max_s=40)
    summary = run.summary
    assert summary is not None, run.stderr[-3000:]
    lines = _lines(run)
    assert summary["records"] == len(lines) and summary["records_lost"] == 0
    reached = [r for r in run.records if r["error_class"] != "connect_error"]
    assert len(reached) == requests > 0  # one record per request the server saw
    refused = len(run.records) - len(reached)
    assert refused > 0 and summary["backoff"]["connect_errors"] == refused


SLOW_START = """\
import time

import gevent
from locust import events

from fourfold import levels

events.init_command_line_parser.add_listener(levels.ThroughputUser.add_arguments)
events.init.add_listener(levels.ThroughputUser.register)

gevent.get_hub()                          # the event loop exists and has not run yet
started = time.perf_counter()
while time.perf_counter() - started < 5:  # a start-up that does not yield: first imports compiling
    pass                                  # .pyc beside three other test workers took this long


class SlowStart(levels.ThroughputUser):
    pass
"""


def test_a_start_up_longer_than_the_run_time_still_runs_for_the_run_time(tmp_path):
    """Locust starts ``-t``'s timer from the event loop's cached time, which stood where the loop was
    made: after a 5 s start-up a 4 s run ended after 20-50 ms with no request (CI, a fresh install
    without .pyc files). fourfold's init refreshes the loop's time."""
    locustfile = tmp_path / "slow_start.py"
    locustfile.write_text(SLOW_START)
    with h.HostileServer(f"{HANDLERS}:good") as server:
        run = h.run_level(server.url, tmp_path / "out", locustfile=str(locustfile), users=2, seconds=4,
                          csv_html=False)
        records = h.assert_one_record_per_request(run, server, "ok")
    h.assert_clean(run, max_s=30)
    assert run.summary is not None and run.summary["finished_at"] - run.summary["started_at"] >= 3.5
    assert len(records) >= 10


SPINS = """\
from locust import events, task

from fourfold import levels

events.init_command_line_parser.add_listener(levels.ThroughputUser.add_arguments)
events.init.add_listener(levels.ThroughputUser.register)


class Spins(levels.ThroughputUser):
    @task
    def generate(self) -> None:
        self.request(self.next_item())
        if self.runtime.records_seen >= 8:
            while True:        # a greenlet that never yields: the hub, and every stop, held for good
                pass
"""


def test_a_hub_held_for_good_ends_the_run_with_its_records_and_an_incomplete_summary(tmp_path):
    """Before the watchdog such a run outlived -t until SIGKILL and lost its queued records."""
    locustfile = tmp_path / "spins.py"
    locustfile.write_text(SPINS)
    with h.HostileServer(f"{HANDLERS}:good") as server:
        run = h.run_level(server.url, tmp_path / "out", locustfile=str(locustfile), users=2, seconds=3,
                          csv_html=False, kill_after_s=60)
    assert run.rc == 4, (run.rc, run.stderr[-2000:])               # not killed (rc None): it ended itself
    assert run.elapsed_s < 20, run.elapsed_s                       # -t 3 s, + 2 s grace, + 2 s stuck
    assert "the run passed its -t by" in run.stderr
    assert "exit code 4 (summary.json marked incomplete)" in run.stderr
    assert "Traceback" not in run.stderr
    assert run.summary["incomplete"] is True and run.summary["exit_code"] == 4
    assert "a greenlet that never yields" in run.summary["reason"]
    # the records queued when the hub stopped turning reached the disk: the ones the server answered
    assert len(run.records) >= 8 and {r["error_class"] for r in run.records} <= {"ok", "cancelled"}
    assert len(run.records) >= server.requests - 2          # at most a request in flight per user unrecorded
    from fourfold.cli import main

    assert main(["check", str(run.run_dir), "--slo", "ttft_p95<=10s"]) == 2     # no figures to gate: says so


def test_a_sigterm_to_a_held_hub_ends_the_run_within_seconds(tmp_path):
    """-t is a minute away: the SIGTERM, noted by its Python handler inside the spinning greenlet,
    is what the watchdog acts on."""
    import subprocess
    import sys
    import time

    locustfile = tmp_path / "spins.py"
    locustfile.write_text(SPINS)
    with h.HostileServer(f"{HANDLERS}:good") as server:
        base = tmp_path / "out"
        base.mkdir()
        argv = [sys.executable, "-m", "locust", "-f", str(locustfile), "--headless", "-u", "2", "-r", "2",
                "-t", "60s", "--host", server.url, "--run-dir", str(base / "runs"), "--warmup-requests", "0",
                "--metrics-url", "off", "--no-preflight"]
        proc = subprocess.Popen(argv, cwd=base, env=h.locust_env(), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and server.requests < 8:
                time.sleep(0.1)
            time.sleep(1.0)                                   # the greenlet now spins
            sent = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            _, stderr = proc.communicate(timeout=20)
            took = time.monotonic() - sent
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 4 and took < 5, (proc.returncode, took, stderr[-2000:])
    assert "a SIGTERM" in stderr and "was not taken" in stderr
    (run,) = (base / "runs").iterdir()
    summary = json.loads((run / "summary.json").read_text())
    assert summary["incomplete"] is True and summary["reason"].startswith("a SIGTERM")

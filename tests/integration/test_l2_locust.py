"""L2 gateway through real locust processes: ladder knee, open loop, connections, HTTP/2, Retry-After.

Every run is headless and short; the embedded simulator (profile ``flat``: first token at 50 ms,
one token every 10 ms, no jitter) makes request times predictable, and its gateway knobs
(``--sim-max-concurrency``, ``--sim-keepalive-timeout-s``) create the knee and the idle closes.
HTTP/2 runs against hypercorn serving ``tests/h2_sse_app.py`` (the simulator speaks HTTP/1.1 only).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fourfold.levels.arrivals import ArrivalProcess, GapStats, arrival_offsets, dispatcher_seed, gaps_of
from fourfold.levels.l2_stats import QUEUE_P99_WARN_MS
from tests.conftest import REPO, free_port, locust_env, only_run_dir, read_jsonl, run_locust

pytestmark = pytest.mark.integration
SECRET = "sk-fourfold-test-9f8e7d6c5b4a"


def _run(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> tuple[str, dict, list[dict], Path]:
    if env is None:
        proc = run_locust(args, cwd, timeout=90)
    else:
        proc = subprocess.run([sys.executable, "-m", "locust", *args], cwd=cwd, env=env, capture_output=True,
                              text=True, timeout=90, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    run = only_run_dir(cwd)
    return out, json.loads((run / "summary.json").read_text()), read_jsonl(run / "records.jsonl"), run


def _measured(records: list[dict]) -> list[dict]:
    return [r for r in records if not r["warmup"] and r["error_class"] != "cancelled"]


def _assert_secret_nowhere(run: Path, out: str) -> None:
    assert SECRET not in out
    for path in run.iterdir():
        assert SECRET not in path.read_text(), f"the API key leaked into {path.name}"


def test_ladder_knee_is_the_simulators_concurrency_limit(tmp_path, locustfile):
    """32 slots (queue above): 8/16/32 users never queue, 64 wait about one request (~500 ms).

    Slow tokens (first at 50 ms, then one every 50 ms, 10 per answer) keep the client's CPU per
    second low, so a busy 2-core machine still measures 32 users' TTFT near 50 ms; the SLO (250 ms)
    sits between that and the ~550 ms of a queued request.
    """
    profile = tmp_path / "gateway.json"
    profile.write_text(json.dumps({"extends": "flat", "itl_ms": 50.0}))
    out, summary, records, run = _run(
        ["-f", locustfile("l2_gateway.py"), "--headless", "--ladder", "8,16,32,64", "--ladder-hold-s", "2.5",
         "--sim-profile", str(profile), "--max-tokens", "10", "--ignore-eos", "--sim-max-concurrency", "32",
         "--sim-over-limit", "queue", "--slo-ttft-p95-ms", "250",
         "--api-key", SECRET, "--api-key-header", "x-api-key"], tmp_path)
    ladder = summary["l2"]["ladder"]["ladder"]
    assert [step["users"] for step in ladder["steps"]] == [8, 16, 32, 64]
    assert [step["meets_slo"] for step in ladder["steps"]] == [True, True, True, False], ladder["steps"]
    assert ladder["knee_users"] == summary["l2"]["knee_users"] == 32
    assert ladder["steps"][3]["ttft_p95_ms"] > 400            # queued behind a whole request
    assert all(step["requests"] >= 12 for step in ladder["steps"])
    assert "knee: 32 users" in out and "MISSES" in out
    # every record is tagged with the step it was sent in; LLMStats keeps the steps apart
    assert {r["scenario"] for r in _measured(records)} == {"ladder@8", "ladder@16", "ladder@32", "ladder@64"}
    assert {g["scenario"] for g in summary["groups"]} == {"ladder@8", "ladder@16", "ladder@32", "ladder@64"}
    # keep-alive: after each user's first (warm-up) request every request reuses its connection
    connections = summary["l2"]["connections"]["ladder"]
    assert connections["conn_reuse"] >= 0.95 and summary["total"]["conn_reuse"] >= 0.95
    assert (connections["conn_reconnects"] == 0
            and connections["http_versions"] == {"HTTP/1.1": connections["requests"]})
    _assert_secret_nowhere(run, out)


@pytest.mark.timing
def test_open_loop_poisson_sends_on_its_schedule(tmp_path, locustfile):
    out, summary, records, _ = _run(
        ["-f", locustfile("l2_open_loop.py"), "--headless", "-t", "7s", "--arrival-rate", "20",
         "--sim-profile", "flat", "--max-tokens", "10", "--ignore-eos"], tmp_path)
    loop = summary["l2"]["open_loop"]
    assert loop["target_kept_up"], loop
    # a generator whose event loop stood still as long as the queueing limit (a stall of a busy
    # machine) rightly says it fell behind; otherwise it kept up, with its queue p99 in bounds
    if summary["generator"]["loop_lag_ms_max"] < QUEUE_P99_WARN_MS:
        assert loop["generator_kept_up"] and loop["warnings"] == [], loop
        assert "ok: the load generator kept up" in out
        assert summary["groups"][0]["queue_ms"]["p99"] < QUEUE_P99_WARN_MS
    else:
        assert loop["generator_kept_up"] == (loop["warnings"] == []), loop
    # the live dispatcher made exactly the pure generator's arrivals (same seed, same window)
    schedule = arrival_offsets(ArrivalProcess("poisson", 20.0), loop["window_s"], dispatcher_seed(0, 0))
    assert abs(loop["arrivals"] - len(schedule)) <= 1
    # Locust's own stop sequence blocks the event loop for a moment (inspect.stack() in Runner.stop),
    # so the last few arrivals can fall due while nothing runs and never start: they count as unsent
    assert loop["arrivals"] - 6 <= loop["sent"] <= loop["arrivals"] and loop["dropped"] == loop["waited"] == 0
    assert loop["sent"] + loop["unstarted_at_stop"] >= loop["arrivals"] - 1
    assert loop["sent_rps"] == pytest.approx(loop["scheduled_rps"], rel=0.05)
    # one record per request the target saw; their send times follow the schedule's gaps
    # (a request the stop caught before it reached the wire gets no record: the target never saw it)
    assert loop["completed"] <= len(records) <= loop["sent"]
    send_times = [r["started_at"] for r in records]
    sent, scheduled = GapStats(), GapStats()
    sent.add_all(gaps_of(send_times))
    scheduled.add_all(gaps_of([0.0, *schedule]))
    assert sent.cv == pytest.approx(scheduled.cv, abs=0.1)
    assert (len(send_times) - 1) / (max(send_times) - min(send_times)) == pytest.approx(
        len(schedule) / schedule[-1], rel=0.05)
    queue = summary["groups"][0]["queue_ms"]
    assert summary["groups"][0]["scenario"] == "open" and queue["count"] == len(_measured(records))
    assert loop["ttft_from_arrival_ms"]["p50"] >= summary["groups"][0]["ttft_ms"]["p50"]


@pytest.mark.timing          # the dispatcher keeps 30/s on time: a starved generator sends late
def test_open_loop_against_a_saturated_target_says_the_target_fell_behind(tmp_path, locustfile):
    """2 slots x ~440 ms serve ~4.5/s; 30/s offered are sent on time and pile up at the target."""
    out, summary, _, _ = _run(
        ["-f", locustfile("l2_open_loop.py"), "--headless", "-t", "4s", "--arrival-rate", "30",
         "--sim-profile", "flat", "--max-tokens", "40", "--ignore-eos",
         "--sim-max-concurrency", "2"], tmp_path)
    loop = summary["l2"]["open_loop"]
    assert not loop["target_kept_up"]
    assert loop["sent_rps"] >= 0.9 * loop["scheduled_rps"] and loop["waited"] == loop["dropped"] == 0
    assert loop["completed_rps"] < 0.5 * loop["sent_rps"]
    assert loop["in_flight_mean_q4"] > 1.5 * loop["in_flight_mean_q2"] + 3      # a growing backlog
    assert "WARNING: the target fell behind" in out


def test_open_loop_capped_in_flight_says_the_generator_fell_behind(tmp_path, locustfile):
    """The same saturated target with at most 6 requests in flight: arrivals wait for a slot."""
    out, summary, _, _ = _run(
        ["-f", locustfile("l2_open_loop.py"), "--headless", "-t", "4s", "--arrival-rate", "30",
         "--max-in-flight", "6", "--sim-profile", "flat", "--max-tokens", "40", "--ignore-eos",
         "--sim-max-concurrency", "2"], tmp_path)
    loop = summary["l2"]["open_loop"]
    assert not loop["generator_kept_up"]
    assert loop["sent_rps"] < 0.5 * loop["scheduled_rps"]
    assert loop["waited"] > 0 and loop["in_flight_max"] == 6
    assert loop["queue_ms"]["p99"] > 1000                 # latency counted from the intended arrival
    assert "WARNING: the load generator could NOT keep up" in out


def test_idle_timeout_makes_every_request_reconnect_and_counts_the_stalls(tmp_path, locustfile):
    """The simulator closes connections idle for 1 s; users think 2 s between requests."""
    out, summary, records, _ = _run(
        ["-f", locustfile("l2_gateway.py"), "--headless", "--ladder", "off", "-u", "4", "-r", "4", "-t", "5s",
         "--think-time-s", "2", "--sim-keepalive-timeout-s", "1", "--sim-profile", "flat",
         "--max-tokens", "8", "--ignore-eos"], tmp_path)
    measured = _measured(records)
    assert len(measured) >= 6
    assert all(r["conn_reused"] is False and r["conn_reconnected"] for r in measured)
    assert all(r["connect_ms"] is not None for r in measured)
    total = summary["total"]
    assert total["conn_reconnects"] == total["requests"] == len(measured) and total["conn_reuse"] == 0.0
    connections = summary["l2"]["connections"]["closed"]
    assert (connections["conn_reconnects"] == len(measured)
            and connections["connect_ms"]["count"] == len(measured))
    assert f"({len(measured)} new, {len(measured)} reconnects after an idle close)" in out


@pytest.fixture
def h2_server():
    """hypercorn serving tests/h2_sse_app.py on 127.0.0.1 (HTTP/1.1 and h2c on one port), key required."""
    port = free_port()
    env = dict(os.environ, H2_APP_API_KEY=SECRET, PYTHONPATH=str(REPO))
    proc = subprocess.Popen([sys.executable, "-m", "hypercorn", "--bind", f"127.0.0.1:{port}",
                             "--graceful-timeout", "0", "tests.h2_sse_app:app"], cwd=REPO, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 15
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"hypercorn did not start: {proc.stderr.read() if proc.stderr else ''}")
            time.sleep(0.1)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_http1_and_http2_side_by_side_against_hypercorn(tmp_path, locustfile, h2_server):
    env = dict(locust_env(), FOURFOLD_API_KEY=SECRET)      # the key from the environment, sent as Bearer
    out, summary, records, run = _run(
        ["-f", locustfile("l2_protocols.py"), "--headless", "-u", "4", "-r", "4", "-t", "4s",
         "--host", h2_server], tmp_path, env)
    groups = {g["scenario"]: g for g in summary["groups"]}
    assert set(groups) == {"h1", "h2"}
    for scenario in ("h1", "h2"):
        assert groups[scenario]["requests"] > 10 and groups[scenario]["failures"] == 0, \
            groups[scenario]["errors"]
        assert groups[scenario]["conn_reuse"] >= 0.95
    connections = summary["l2"]["connections"]
    assert connections["h1"]["http_versions"] == {"HTTP/1.1": groups["h1"]["requests"]}
    assert connections["h2"]["http_versions"] == {"HTTP/2": groups["h2"]["requests"]}
    answered = [r for r in records if r["error_class"] != "cancelled"]     # cut at the stop: no response
    assert {(r["scenario"], r["http_version"]) for r in answered} == {("h1", "HTTP/1.1"), ("h2", "HTTP/2")}
    assert all(r["output_tokens"] == 12 and r["ttft_ms"] >= 19 for r in _measured(records))
    assert "L2 connections h1: HTTP/1.1 100%" in out and "L2 connections h2: HTTP/2 100%" in out
    _assert_secret_nowhere(run, out)


def test_retry_after_is_honoured_and_counted(tmp_path, locustfile):
    """One slot, over-limit 429 with Retry-After: 1; three users: the refused ones wait 1 s."""
    out, summary, records, _ = _run(
        ["-f", locustfile("l2_gateway.py"), "--headless", "--ladder", "off", "-u", "3", "-r", "3", "-t", "4s",
         "--sim-max-concurrency", "1", "--sim-over-limit", "429", "--honour-retry-after",
         "--sim-profile", "flat", "--max-tokens", "10", "--ignore-eos",
         "--exit-code-on-error", "0"], tmp_path)
    limited = [r for r in records if r["status"] == 429]
    assert limited and all(r["extra"]["retry_after_s"] == 1.0 and r["error_class"] == "rate_limited"
                           for r in limited)
    by_user: dict[int, list[dict]] = {}
    for r in sorted(records, key=lambda r: r["started_at"]):
        by_user.setdefault(r["user_id"], []).append(r)
    gaps = [b["started_at"] - (a["started_at"] + a["e2e_ms"] / 1000)
            for user in by_user.values() for a, b in zip(user, user[1:]) if a["status"] == 429]
    assert gaps and min(gaps) >= 0.95, gaps                 # each refused user waited Retry-After
    closed = summary["l2"]["connections"]["closed"]
    measured_limited = len([r for r in limited if not r["warmup"]])
    assert (closed["retry_after_waits"] == measured_limited
            and closed["retry_after_wait_s"] == measured_limited)
    assert summary["l2"]["rate_limited"]["429"] == summary["total"]["statuses"]["429"] == measured_limited
    assert f"L2 rate limits: HTTP 429 x{measured_limited}" in out

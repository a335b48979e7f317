"""``locust -f l2_open_loop.py --sweep`` against the embedded simulator, locally and on a master
with one worker.

The embedded simulator (profile ``flat``: first token at 50 ms, then one every 10 ms, no jitter)
with ``--sim-max-concurrency 2`` generates two answers at once and queues the rest; every answer
is cut to T = 20 tokens, so one takes S = 50 + 19 * 10 = 240 ms and the capacity is 2 / S =
8.33 requests/s: below it nothing waits (TTFT 50 ms), above it the queue and TTFT grow. With a
TTFT p95 SLO of 150 ms and 2.5 s steps, a step at (1 + e) x capacity still passes while the wait
it builds up stays under 100 ms (about e <= 4 %, as tests/integration/test_sweep.py derives), so
the found capacity is within 10 % of 2 / S and the first miss lies above it.
"""

from __future__ import annotations

import json

import pytest

from tests.conftest import only_run_dir, read_jsonl, run_distributed, run_locust

pytestmark = [pytest.mark.integration, pytest.mark.timing]

CAPACITY_RPS = 2 / 0.240
STEP_S = 2.5
COMMON = ["--sweep", "--sweep-step-s", f"{STEP_S:g}", "--arrival-rate", "6", "--arrival-process", "constant",
          "--slo-ttft-p95-ms", "150", "--sim-profile", "flat", "--max-tokens", "20", "--ignore-eos",
          "--sim-max-concurrency", "2", "--warmup-requests", "0", "--only-summary"]


def _measured(run_dir) -> list[dict]:
    return [r for r in read_jsonl(run_dir / "records.jsonl")
            if not r["warmup"] and r["error_class"] != "cancelled"]


def _rows_add_up(summary: dict, records: list[dict]) -> None:
    rows = summary["l2"]["sweep"]["rates"]
    for row in rows:
        assert row["requests"] == sum(1 for r in records if r["scenario"] == row["scenario"]), row
    assert sum(row["requests"] for row in rows) == len(records) == summary["total"]["requests"]


def test_sweep_in_one_run_finds_the_simulators_capacity(tmp_path, locustfile):
    # --slo gates the run by the sweep's per-rate verdicts: exit 0 although the whole run (every rate) misses
    result = run_locust(["-f", locustfile("l2_open_loop.py"), "--headless", "-t", "60s", *COMMON,
                         "--slo", "ttft_p95<=150ms"], tmp_path, timeout=90)
    assert result.returncode == 0, result.stderr[-3000:]
    run_dir = only_run_dir(tmp_path)
    summary = json.loads((run_dir / "summary.json").read_text())
    sweep = summary["l2"]["sweep"]
    low, high = sweep["bracket_rps"]
    table = result.stdout + result.stderr
    assert sweep["finished"] and sweep["converged"] and (high - low) / low <= 0.10, table[-3000:]
    assert abs(sweep["capacity_rps"] - CAPACITY_RPS) / CAPACITY_RPS <= 0.10, table[-3000:]
    assert high > CAPACITY_RPS and sweep["rates"][0]["offered_rps"] == 6.0
    _rows_add_up(summary, _measured(run_dir))
    assert f"capacity: {sweep['capacity_rps']:.2f} requests/s" in table       # the console table
    assert "the SLO was judged per rate" in table and summary["slo"]["exit_code"] == 0
    assert summary["slo"]["whole_run_exit_code"] == 3


def test_sweep_on_a_master_sends_each_rate_to_the_worker(tmp_path, locustfile):
    out = run_distributed(["-f", locustfile("l2_open_loop.py"), *COMMON, "--sweep-max-steps", "3"],
                          ["-u", "1", "-t", "60s"], tmp_path, workers=1, timeout=90)
    run_dir = only_run_dir(tmp_path)
    summary = json.loads((run_dir / "summary.json").read_text())
    sweep = summary["l2"]["sweep"]
    assert [r["offered_rps"] for r in sorted(sweep["rates"], key=lambda r: r["scenario"])] == \
        [6.0, 7.348, 9.0]
    assert sweep["stopped"].startswith("3 runs done") and sweep["dispatchers"] == 1, out[-3000:]
    records = _measured(run_dir)
    _rows_add_up(summary, records)
    for row in sweep["rates"]:        # the worker offered each rate the master chose, on its schedule
        started = sorted(r["started_at"] for r in records if r["scenario"] == row["scenario"])
        assert abs(len(started) - row["offered_rps"] * STEP_S) <= 1, row
        assert (len(started) - 1) / (started[-1] - started[0]) == pytest.approx(row["offered_rps"], rel=0.1)

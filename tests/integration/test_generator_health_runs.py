"""Every run records its load generator's CPU and event-loop lag: summary.json's ``generator`` block,
standalone (closed and open loop) and merged from a worker on the master."""

from __future__ import annotations

import json

import pytest

from fourfold.measure.loadgen import LAG_INTERVAL_S, starved
from tests.conftest import only_run_dir, run_distributed, run_locust
from tests.integration.corewait import core_wait

pytestmark = [pytest.mark.integration, pytest.mark.timing]

RUN_S = 5
SHAPE = {"cpu_pct_mean": float, "cpu_pct_max": float, "loop_lag_ms_p50": float, "loop_lag_ms_p99": float,
         "loop_lag_ms_max": float, "samples": int, "processes": int, "starved": bool, "why": str}


def assert_plausible(block: dict, processes: int, fewest: float = RUN_S / LAG_INTERVAL_S / 2) -> None:
    assert set(block) == set(SHAPE) and all(type(block[key]) is kind for key, kind in SHAPE.items()), block
    assert block["processes"] == processes
    # one wake-up per 100 ms at most, from test_start to test_stopping, per process: the run time and,
    # on a worker, the spawn and stop messages' way (57 wake-ups in a CI run's 5 s, beside the load)
    assert fewest <= block["samples"] <= processes * (RUN_S + 2) / LAG_INTERVAL_S, block
    assert 0.0 < block["cpu_pct_mean"] <= block["cpu_pct_max"] <= 400.0, block
    assert (0.0 <= block["loop_lag_ms_p50"] <= block["loop_lag_ms_p99"] <= block["loop_lag_ms_max"]
            < 2000.0), block
    assert (block["starved"], block["why"]) == starved(block)


@pytest.mark.parametrize(("locustfile_name", "load"), [
    ("l1_throughput.py", ["-u", "4", "-r", "4"]),                      # closed loop
    ("l2_open_loop.py", ["--arrival-rate", "10", "--ignore-eos"]),    # open loop: one dispatcher
])
def test_a_headless_run_records_its_generators_health(tmp_path, locustfile, locustfile_name, load):
    proc = run_locust(["-f", locustfile(locustfile_name), "--headless", *load, "-t", f"{RUN_S}s",
                       "--sim-profile", "flat", "--max-tokens", "16"], tmp_path, timeout=60)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    summary = json.loads((only_run_dir(tmp_path) / "summary.json").read_text())
    assert summary["total"]["requests"] > 0
    assert_plausible(summary["generator"], processes=1)
    assert ("the load generator was starved" in out) == summary["generator"]["starved"]


def test_the_master_merges_its_workers_health_and_adds_none_of_its_own(tmp_path, locustfile):
    run_distributed(["-f", locustfile("l1_throughput.py"), "--sim-profile", "flat", "--max-tokens", "16"],
                    ["-u", "4", "-r", "4", "-t", f"{RUN_S}s"], tmp_path, workers=1, timeout=60)
    summary = json.loads((only_run_dir(tmp_path) / "summary.json").read_text())
    assert summary["total"]["requests"] > 0
    # the master holds what the worker's reports carried (44 wake-ups in 3 runs beside two hogs); once
    # in CI beside the hogs the worker's last report came after the master wrote summary.json, and
    # the block held the first report's alone (one CPU reading)
    assert_plausible(summary["generator"], processes=1, fewest=1)


def test_a_worker_s_loop_does_not_stand_still_when_the_ladder_steps(tmp_path, locustfile):
    """Each ladder step is a spawn message to the workers; Locust's handling of one built its whole
    argument parser once per option (fourfold.adapters.locust.build_default_args_once), and held
    the worker's event loop 209 to 272 ms per step on a quiet machine (most likely also the 524 ms
    of a CI run's ladder), while its users' streams were in flight. Two step changes, with the
    machine's own wake-up delays measured beside them (corewait)."""
    with core_wait() as wait:
        run_distributed(["-f", locustfile("l2_gateway.py"), "--sim-profile", "flat", "--max-tokens", "16",
                         "--ignore-eos"],
                        ["--ladder", "2,4,8", "--ladder-hold-s", "2"], tmp_path, workers=1, timeout=60)
    summary = json.loads((only_run_dir(tmp_path) / "summary.json").read_text())
    assert [s["users"] for s in summary["l2"]["ladder"]["ladder"]["steps"]] == [2, 4, 8]
    block = summary["generator"]
    assert block["processes"] == 1 and block["samples"] >= 30           # 6 s, a wake-up each 100 ms
    assert block["loop_lag_ms_max"] < 100.0 + wait.max_ms, (block, wait.max_ms)

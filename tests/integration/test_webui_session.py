"""One web-UI session, several tests (issue 19): what belongs to the process and what to each test.

Master + 2 workers (L1), driven over HTTP as the browser does (``/swarm``, ``/stop``): a test with
both workers whose SLO misses, one worker quits, a second test whose SLO holds. The second test's
``workers`` block counts only its own worker's reports, and the exit code is the last test's
verdict (docs/webui.md).
"""

from __future__ import annotations

import json

import pytest

from tests.integration.test_webui_levels import _host
from tests.integration.test_webui_tests import _measured, _one_test, _records, _run_dirs
from tests.integration.webui_support import (
    finish,
    locust_row,
    ready_workers,
    start_master_and_workers,
    wait_for,
)

pytestmark = pytest.mark.integration


def test_second_test_counts_its_own_workers_and_its_slo_verdict_is_the_exit_code(tmp_path, locustfile):
    common = ["-f", locustfile("l1_throughput.py"), "--sim-profile", "flat", "--max-tokens", "16"]
    base, master, workers = start_master_and_workers(common, tmp_path)
    try:
        host = _host(base)
        wait_for(lambda: ready_workers(base) == 2, 40, what="two ready workers")
        fields = {"user_count": "4", "spawn_rate": "4", "host": host, "metrics_url": ""}
        first = _one_test(base, {**fields, "slo": "ttft_p95<=0.01ms"}, "l1:saturation", 8)    # misses
        wait_for(lambda: len(_run_dirs(tmp_path)) == 1
                 and (_run_dirs(tmp_path)[0] / "summary.json").is_file(),
                 20, what="the first summary.json")
        finish(workers[1], terminate=True)                      # a worker quits between the tests
        wait_for(lambda: ready_workers(base) == 1, 20, what="one worker left")
        second = _one_test(base, {**fields, "slo": "ttft_p95<=60s"}, "l1:saturation", 8)       # holds
        runs = wait_for(lambda: (d := _run_dirs(tmp_path)) and len(d) == 2 and
                        (d[1] / "summary.json").is_file() and d, 20, what="the second summary.json")
    finally:
        master_out = finish(master, timeout=40, terminate=True)
        for proc in workers:
            finish(proc, timeout=20)
    assert master.returncode == 0, master_out[-3000:]          # the last test met its SLO
    assert "1 of 1 failed" in master_out and "all 1 met" in master_out, master_out[-3000:]
    summaries = [json.loads((run / "summary.json").read_text()) for run in runs]
    assert [s["slo"]["passed"] for s in summaries] == [False, True]
    for summary, run, report in zip(summaries, runs, (first, second), strict=True):
        requests = len(_measured(_records(run)))
        assert summary["total"]["requests"] == requests == locust_row(report, "l1:saturation")["num_requests"]
    one, two = (s["workers"] for s in summaries)
    assert one["count"] == 2 and one["stopped_reporting"] == [] and one["unaccounted"] == 0
    # its own test only
    assert two["count"] == 1 and two["stopped_reporting"] == [] and two["unaccounted"] == 0

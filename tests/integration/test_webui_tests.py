"""Each web-UI test is a test (issue 19): Stop writes that test's summary into its own run directory,
a new start opens another; Locust's columns, its HTML report and the start form tell the truth.

L3 against its embedded targets (the simulator and the reference RAG service), driven over HTTP as
the browser does (``/swarm``, ``/stop``), then master + 2 workers (L1) the same way.
"""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import free_port, only_run_dir, run_locust
from tests.integration.webui_support import (
    finish,
    get_json,
    http_get,
    http_post_form,
    locust_row,
    ready_workers,
    start_locust,
    start_master_and_workers,
    wait_for,
)

pytestmark = pytest.mark.integration
L4_ONLY = {"think_scale", "patience_scale", "sessions_per_user", "ab_split", "ab_host", "ab_profile",
           "ab_seed"}


def _records(run: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run / "records.jsonl").read_text().splitlines() if line.strip()]


def _run_dirs(base: Path) -> list[Path]:
    return sorted(p for p in (base / "runs").iterdir() if p.is_dir())


def _measured(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in records if not r.get("warmup") and r.get("error_class") != "cancelled"]


def _state(base: str) -> str:
    return (get_json(base + "/stats/requests") or {}).get("state", "")


def _one_test(base: str, fields: dict[str, str], name: str, at_least: int) -> dict[str, Any]:
    """Start from the form, wait for ``at_least`` requests in Locust's row, stop, wait for stopped;
    Locust's /stats/requests report once stopped."""
    assert http_post_form(base + "/swarm", fields)["success"] is True
    wait_for(lambda: _state(base) == "running", 20, what="the test to run")   # (Locust's table cleared)
    wait_for(lambda: (r := locust_row(get_json(base + "/stats/requests") or {}, name)) and
             r["num_requests"] >= at_least, 40, what=f"{at_least} requests of {name}")
    assert http_post_form(base + "/stop", {})["success"] is True
    wait_for(lambda: _state(base) == "stopped", 30, what="the test to stop")
    return get_json(base + "/stats/requests") or {}


def test_l3_stop_then_new_writes_two_run_directories(tmp_path, locustfile):
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = start_locust(["-f", locustfile("l3_rag.py"), "--web-host", "127.0.0.1", "--web-port", str(port),
                         "--sim-profile", "flat", "--max-tokens", "16"], tmp_path)
    try:
        _, _, page = wait_for(lambda: (r := http_get(base + "/"))[0] == 200 and r, 40, what="the web UI")
        args = json.loads(re.search(r"window\.templateArgs = (\{.*?\})\s*</script>", page, re.S).group(1))
        extra = args["extra_options"]
        assert "rag_recall_k" in extra and "stall_ms" in extra
        assert not L4_ONLY & set(extra), sorted(L4_ONLY & set(extra))      # the L3 form: no L4-only option
        # the browser sends every field, the empty --metrics-url too (a list option: Locust's /swarm
        # read an empty list's values as ints, a 500, until fourfold read them first)
        fields = {"user_count": "3", "spawn_rate": "3", "host": args["host"], "metrics_url": ""}
        first = _one_test(base, fields, "l3:rag", 12)
        assert not (tmp_path / "runs").exists() or len(_run_dirs(tmp_path)) == 1
        runs = wait_for(lambda: [p for p in _run_dirs(tmp_path) if (p / "summary.json").is_file()], 15,
                        what="summary.json of the first test, written on Stop")
        # Locust's "Average size (bytes)": the mean response bytes of the records
        row = locust_row(first, "l3:rag")
        records = _measured(_records(runs[0]))
        assert row["num_requests"] == len(records)
        mean_bytes = sum(r["response_bytes"] for r in records) / len(records)
        assert mean_bytes > 50 and row["avg_content_length"] == pytest.approx(mean_bytes, rel=1e-6)
        # Locust's HTML report holds the LLM table (and its download too)
        status, _, report = http_get(base + "/stats/report")
        assert status == 200 and 'id="fourfold-llm"' in report and "TTFT p95 ms" in report
        assert re.search(r"<td[^>]*>l3:rag</td><td[^>]*>" + str(len(records)) + "<", report.replace("\n", ""))
        status, _, download = http_get(base + "/stats/report?download=1")
        assert status == 200 and 'id="fourfold-llm"' in download

        _one_test(base, fields, "l3:rag", 8)
        runs = wait_for(lambda: (d := _run_dirs(tmp_path)) and len(d) == 2 and
                        all((p / "summary.json").is_file() for p in d) and d, 15, what="two run directories")
        charts = get_json(base + "/fourfold/charts.json")
        assert charts["t0_s"] is not None and charts["ttft_window"]["t_s"][0] >= charts["t0_s"] - 0.01
        assert charts["series"]["t_s"][0] >= int(charts["t0_s"])
    finally:
        out = finish(proc, terminate=True)
    assert proc.returncode == 0, out[-3000:]
    assert len(_run_dirs(tmp_path)) == 2, out[-3000:]          # quitting after a Stop writes nothing new
    total = 0
    for run in runs:
        summary = json.loads((run / "summary.json").read_text())
        records = _measured(_records(run))
        assert summary["records"] == len(_records(run)) and summary["records_lost"] == 0
        assert summary["total"]["requests"] == len(records) > 0
        assert summary["rag"]["requests"] == len([r for r in records if r["level"] == "l3"])
        tokens = sum(r["output_tokens"] or 0 for r in records)
        span = (max(r["started_at"] + r["e2e_ms"] / 1000 for r in records)
                - min(r["started_at"] for r in records))
        assert summary["total"]["output_tps"] == pytest.approx(tokens / span, rel=0.02)   # no idle time in it
        total += summary["total"]["requests"]
    assert out.count("fourfold: run directory") == 2 and out.count("recall@") >= 2, out[-3000:]
    assert total > 20


def test_master_stop_then_new_merges_both_workers_into_each_run_directory(tmp_path, locustfile):
    common = ["-f", locustfile("l3_rag.py"), "--sim-profile", "flat", "--max-tokens", "16"]
    base, master, workers = start_master_and_workers(common, tmp_path)
    shown: list[int] = []
    try:
        _, _, page = wait_for(lambda: (r := http_get(base + "/"))[0] == 200 and r, 40, what="the web UI")
        host = json.loads(re.search(r"window\.templateArgs = (\{.*?\})\s*</script>", page,
                                    re.S).group(1))["host"]
        for at_least in (12, 8):
            wait_for(lambda: ready_workers(base) == 2, 40, what="two ready workers")
            report = _one_test(base, {"user_count": "4", "spawn_rate": "4", "host": host}, "l3:rag", at_least)
            shown.append(locust_row(report, "l3:rag")["num_requests"])
            wait_for(lambda: len([p for p in _run_dirs(tmp_path) if (p / "summary.json").is_file()])
                     == len(shown), 20, what="summary.json written on Stop")
            # Locust's merged row is final at Stop: the workers sent their last records before "stopped"
            assert locust_row(get_json(base + "/stats/requests") or {}, "l3:rag")["num_requests"] == shown[-1]
    finally:
        master_out = finish(master, timeout=40, terminate=True)
        for proc in workers:
            finish(proc, timeout=20)
    assert master.returncode == 0, master_out[-3000:]
    runs = _run_dirs(tmp_path)
    assert len(runs) == 2, master_out[-3000:]
    for run, locust_count in zip(runs, shown, strict=True):
        summary = json.loads((run / "summary.json").read_text())
        records = _measured(_records(run))
        assert summary["records"] == len(_records(run)) and summary["records_lost"] == 0
        assert summary["total"]["requests"] == len(records) == locust_count
        assert summary["rag"]["requests"] == len(records)
        assert summary["total"]["output_tokens_total"] == sum(r["output_tokens"] or 0 for r in records)
        assert summary["workers"]["count"] == 2 and summary["workers"]["stopped_reporting"] == []
        # both workers, each test
        assert summary["generator"]["processes"] == 2 and summary["generator"]["samples"] > 0


def test_headless_html_report_and_csv_hold_the_llm_metrics(tmp_path, locustfile):
    done = run_locust(["-f", locustfile("l1_throughput.py"), "--headless", "-u", "2", "-r", "2", "-t", "3s",
                       "--sim-profile", "flat", "--max-tokens", "16", "--slo", "ttft_p95<=5s",
                       "--html", "report.html", "--csv", "out"], tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    summary = json.loads((only_run_dir(tmp_path) / "summary.json").read_text())   # one run directory, as ever
    page = (tmp_path / "report.html").read_text()
    # Locust's report, extended
    assert page.count('id="fourfold-llm"') == 1 and "window.templateArgs" in page
    flat = page.replace("\n", "")
    assert re.search(r"<td[^>]*>Aggregated</td><td[^>]*>" + str(summary["total"]["requests"]) + "<", flat)
    assert "ttft_p95 &lt;= 5000 ms" in page and ">pass<" in flat  # the SLO verdict
    assert (tmp_path / "out_stats.csv").is_file()                 # Locust's own, beside ours
    rows = list(csv.DictReader(io.StringIO((tmp_path / "out_llm.csv").read_text())))
    assert [r["name"] for r in rows] == ["l1:saturation", "Aggregated"]
    assert int(rows[-1]["requests"]) == summary["total"]["requests"]
    assert float(rows[-1]["ttft_p95_ms"]) == pytest.approx(summary["total"]["ttft_ms"]["p95"])

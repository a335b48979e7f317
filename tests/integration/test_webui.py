"""The LLM tab in Locust's web UI: a local run started from the form, and master + 2 workers."""

from __future__ import annotations

import csv
import io
import json
import re
import time

import pytest

from tests.conftest import free_port, only_run_dir
from tests.integration.webui_support import (
    extended,
    finish,
    get_json,
    http_get,
    http_post_form,
    locust_row,
    row,
    start_locust,
    start_master_and_workers,
    wait_for,
)

pytestmark = pytest.mark.integration
SECRET = "sk-fourfoldtestsecret0123"


@pytest.mark.timing
def test_llm_tab_csv_charts_and_start_form_on_a_local_run(tmp_path, locustfile):
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = start_locust(["-f", locustfile("l1_throughput.py"), "--web-host", "127.0.0.1",
                         "--web-port", str(port), "--sim-profile", "flat", "--max-tokens", "16",
                         "-u", "3", "-r", "3"],
                        tmp_path, env={"FOURFOLD_API_KEY": SECRET})
    try:
        status, _, page = wait_for(lambda: (r := http_get(base + "/"))[0] == 200 and r, 30, what="the web UI")
        # the tab, its table and the downloads are in the page's template args
        args = json.loads(re.search(r"window\.templateArgs = (\{.*?\})\s*</script>", page, re.S).group(1))
        assert {"key": "llm", "title": "LLM"} in args["extended_tabs"]
        table = next(t for t in args["extended_tables"] if t["key"] == "llm")
        titles = [c["title"] for c in table["structure"]]
        assert titles[:6] == ["level:scenario", "requests", "failures", "TTFT p50 ms", "TTFT p95 ms",
                              "TTFT p99 ms"]
        assert {"stall %", "interrupted %", "conn reuse %", "goodput req/s", "output tok/s", "jitter p50 ms",
                "pulse Hz", "TTFO p50 ms", "TTFO p95 ms", "reasoned %", "prefix cache hit %"} <= set(titles)
        assert all("_" not in c["key"] for c in table["structure"])   # the frontend camel-cases row keys
        assert {f["href"] for f in args["extended_csv_files"]} == {"./fourfold/llm.csv", "./fourfold/charts"}
        # fourfold's options are in the start form with their defaults; the secret is masked, not in the page
        extra = args["extra_options"]
        assert extra["stall_ms"]["default_value"] == 150.0 and extra["dialect"]["default_value"] == "openai"
        assert extra["slo"]["default_value"] == "" and "junit" not in extra
        assert extra["api_key"]["is_secret"] is True and extra["api_key"]["default_value"] == ""
        assert SECRET not in page

        # start from the form, as the browser does (an empty api_key keeps the one given at start-up)
        started = http_post_form(base + "/swarm", {
            "user_count": "3", "spawn_rate": "3", "host": args["host"], "run_time": "8s",
            "slo": "ttft_p95<=5s,interruption_rate<0.5%", "api_key": "", "stall_ms": "150"})
        assert started["success"] is True, started

        def llm_rows_with_requests():
            rows = extended(get_json(base + "/stats/requests"), "llm")
            total = row(rows, "Aggregated")
            return rows if total and total["requests"] >= 6 else None

        rows = wait_for(llm_rows_with_requests, 25, what="LLM rows with requests")
        assert [r["name"] for r in rows] == ["l1:saturation", "Aggregated"]
        agg = rows[-1]
        assert set(agg) == {c["key"] for c in table["structure"]}
        assert 40.0 <= float(agg["ttftP50Ms"]) <= 200.0 and float(agg["itlP50Ms"]) > 0
        assert float(agg["outputTps"]) > 0 and float(agg["connReuse"]) > 0
        assert agg["failures"] == 0 and float(agg["interruptionRate"]) == 0.0
        slo_rows = extended(get_json(base + "/stats/requests"), "slo")
        assert [(r["slo"], r["verdict"]) for r in slo_rows] == [("ttft_p95 <= 5000 ms", "pass"),
                                                               ("interruption_rate < 0.5 %", "pass")]

        status, ctype, body = http_get(base + "/fourfold/llm.csv")
        assert status == 200 and ctype.startswith("text/csv")
        csv_rows = list(csv.DictReader(io.StringIO(body)))
        assert [r["name"] for r in csv_rows] == ["l1:saturation", "Aggregated"]
        assert float(csv_rows[-1]["ttft_p95_ms"]) > 0 and float(csv_rows[-1]["conn_reuse"]) <= 1.0

        status, ctype, html = http_get(base + "/fourfold/charts")
        assert status == 200 and ctype.startswith("text/html")
        assert "<svg" in html and "charts.json" in html and "http" not in html.split("<script>")[1].replace(
            "http://www.w3.org/2000/svg", "")                          # no CDN, nothing outside

        def windowed_ttft():
            data = get_json(base + "/fourfold/charts.json")
            ready = data and any(v is not None for v in data["ttft_window"]["p95"])
            return data if ready and sum(data["series"]["output_tokens"]) else None   # (a second complete)

        charts = wait_for(windowed_ttft, 15, what="a TTFT window point and a complete second")
        assert charts["keys"] == ["l1:saturation", "Aggregated"] and charts["key"] == "Aggregated"
        series = charts["series"]
        assert set(series) >= {"t_s", "output_tokens", "stalls", "failures", "ttft_mean_ms"}
        assert sum(series["output_tokens"]) > 0 and len(series["stalls"]) == len(series["t_s"])
        assert get_json(base + "/fourfold/charts.json?key=l1:saturation")["key"] == "l1:saturation"
        llm_json = get_json(base + "/fourfold/llm.json")
        assert llm_json["rows"][-1]["name"] == "Aggregated" and len(llm_json["slo"]) == 2

        wait_for(lambda: (get_json(base + "/stats/requests") or {}).get("state") == "stopped", 20,
                 what="the run to stop")
    finally:
        out = finish(proc, terminate=True)
    assert proc.returncode == 0, out[-3000:]
    assert "fourfold SLO gate: all 2 met" in out
    run = only_run_dir(tmp_path)
    meta = json.loads((run / "meta.json").read_text())
    assert meta["settings"]["api_key"] == "***"            # the key given at start-up stayed in force
    assert SECRET not in (run / "meta.json").read_text()
    summary = json.loads((run / "summary.json").read_text())
    assert summary["slo"]["spec"] == "ttft_p95<=5000ms,interruption_rate<0.5%" and summary["slo"]["passed"]
    assert summary["slo_ms"] == {"ttft_ms": 5000.0}         # goodput counts requests within the SLO


def test_master_web_ui_merges_both_workers_into_the_llm_tab(tmp_path, locustfile):
    # the candidate's stream rhythm, every answer pulsing (its own profile: half of them), no 4 s stall;
    # 80 tokens: long enough to pulse (>= 60) and to show two periods of ~0.3 s
    profile = tmp_path / "pulsing.json"
    profile.write_text(json.dumps({"extends": "candidate",
                                   "pulse": {"probability": 1.0, "stall_every_requests": 0}}))
    common = ["-f", locustfile("l1_throughput.py"), "--sim-profile", str(profile), "--max-tokens", "80"]
    base, master, workers = start_master_and_workers(
        common, tmp_path, master_args=("--autostart", "-u", "6", "-r", "6", "--run-time", "8s",
                                       "--autoquit", "30", "--expect-workers", "2", "--slo", "ttft_p99<=10s"))
    try:
        def both_workers_running():
            report = get_json(base + "/stats/requests")
            total = row(extended(report, "llm"), "Aggregated")
            busy = [w for w in (report or {}).get("workers") or () if w["user_count"] > 0]
            return report if len(busy) == 2 and total and total["requests"] > 0 else None

        report = wait_for(both_workers_running, 40, what="two busy workers and LLM rows")
        assert report["worker_count"] == 2

        seen: list[tuple[float, int]] = []

        def agreed():
            """Once stopped, the tab and Locust's own row (both merged from the workers' reports) agree,
            and have for longer than a worker's report interval (3 s): a worker sends the samples of
            its last seconds with its next periodic report, not with its "stopped" message."""
            report = get_json(base + "/stats/requests")
            if not report or report["state"] != "stopped":
                return None
            mine, theirs = row(extended(report, "llm"), "Aggregated"), locust_row(report, "l1:saturation")
            if not (mine and theirs and mine["requests"] == theirs["num_requests"]):
                return None
            if not seen or seen[-1][1] != mine["requests"]:
                seen.append((time.monotonic(), mine["requests"]))
            return mine["requests"] if time.monotonic() - seen[-1][0] > 3.5 else None

        assert wait_for(agreed, 30, interval=0.3, what="the tab to agree with Locust's row") > 0
        final_rows = extended(get_json(base + "/stats/requests"), "llm")
        master_out = finish(master, timeout=40, terminate=True)   # SIGTERM: Locust's normal shutdown
        worker_outs = [finish(w, timeout=20) for w in workers]
    finally:
        for proc in (master, *workers):
            if proc.poll() is None:
                proc.kill()
    assert master.returncode == 0, master_out[-3000:]
    seen = [int(m.group(1)) for out in worker_outs
            for m in re.finditer(r"fourfold worker: (\d+) records", out)]
    assert len(seen) == 2 and all(n > 0 for n in seen), worker_outs
    summary = json.loads((only_run_dir(tmp_path) / "summary.json").read_text())
    final = re.search(r"LLM\s+l1:saturation\s+(\d+)", master_out)      # Locust's final table
    assert final and summary["total"]["requests"] == int(final.group(1)), master_out[-3000:]
    assert summary["slo"]["passed"] and summary["slo"]["verdicts"][0]["status"] == "pass"
    # the stream-rhythm columns: the workers' merged statistics, the numbers summary.json gives
    for block, name in ((summary["groups"][0], "l1:saturation"), (summary["total"], "Aggregated")):
        shown = row(final_rows, name)
        assert shown["requests"] == block["requests"]
        assert shown["jitterP50Ms"] == f"{block['jitter_ms']['p50']:.1f}" and float(shown["jitterP50Ms"]) > 0
        assert shown["pulseHz"] == f"{block['pulse_hz']:.2f}" and 2.0 <= float(shown["pulseHz"]) <= 5.0

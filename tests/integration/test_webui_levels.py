"""The web UI's per-level live panels (issue 19): ``/fourfold/levels.json`` and the "LLM level" tab
serve the loaded level's summary blocks over the data so far, from the functions that write
summary.json's blocks: equal to the test's summary.json at its end, merged on a master.

L3 against its embedded targets (the simulator and the reference RAG service), the web UI driven
over HTTP as the browser does; then master + 2 workers, the endpoint against the records.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from fourfold.measure.record import RequestRecord
from tests.conftest import free_port
from tests.integration.webui_support import (
    extended,
    finish,
    get_json,
    http_get,
    http_post_form,
    ready_workers,
    start_locust,
    start_master_and_workers,
    wait_for,
)

pytestmark = pytest.mark.integration
COMMON = ["--sim-profile", "flat", "--max-tokens", "16"]


def _records(run: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run / "records.jsonl").read_text().splitlines() if line.strip()]


def _summaries(base: Path) -> list[Path]:
    runs = base / "runs"
    return (sorted(p / "summary.json" for p in runs.iterdir() if (p / "summary.json").is_file())
            if runs.is_dir() else [])


def _host(base: str) -> str:
    _, _, page = wait_for(lambda: (r := http_get(base + "/"))[0] == 200 and r, 40, what="the web UI")
    args = json.loads(re.search(r"window\.templateArgs = (\{.*?\})\s*</script>", page, re.S).group(1))
    assert {"title": "LLM level", "key": "level"} in args["extended_tabs"]
    return args["host"]


def _rag_live(base: str, at_least: int) -> dict[str, Any] | None:
    live = get_json(base + "/fourfold/levels.json") or {}
    rag = (live.get("blocks") or {}).get("rag") or {}
    return live if live.get("state") == "running" and (rag.get("requests") or 0) >= at_least else None


def _check_final(base: str, tmp_path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """After Stop: the endpoint's rag block equals summary.json's, and the tab's rows show it."""
    summary_path = wait_for(lambda: _summaries(tmp_path), 20, what="summary.json written on Stop")[0]
    summary = json.loads(summary_path.read_text())
    live = get_json(base + "/fourfold/levels.json")
    assert live is not None and live["finished"] is True and live["level"] == "l3"
    rag, final = live["blocks"]["rag"], summary["rag"]
    for key in ("requests", "ok", "recall_at_k", "precision_at_k", "conflict_rate", "effective_tps", "k"):
        assert rag[key] == final[key], key
    assert rag["stages_ms"] == final["stages_ms"] and rag["other_ms"] == final["other_ms"]
    means = {name: h["mean"] for name, h in final["stages_ms"].items()}
    assert len(means) >= 2 and all(v is not None and v > 0 for v in means.values())
    assert live["stage_means_ms"] == {**means, "other": final["other_ms"]["mean"]}
    panels = extended(get_json(base + "/stats/requests"), "level")
    shown = {r["metric"]: r["value"] for r in panels}
    assert shown[f"recall@{final['k']}"] == f"{final['recall_at_k']:.3f}"
    assert shown["conflict rate"] == f"{100 * final['conflict_rate']:.2f} %"
    assert {"output tok/s", "TPOT p50 ms", "stall %", "pulse Hz"} <= set(shown)
    return live, summary


def test_l3_live_panel_moves_while_running_and_equals_the_summary_at_stop(tmp_path, locustfile):
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = start_locust(["-f", locustfile("l3_rag.py"), "--web-host", "127.0.0.1", "--web-port", str(port),
                         *COMMON], tmp_path)
    try:
        host = _host(base)
        assert (get_json(base + "/fourfold/levels.json") or {}).get("level") == "l3"
        assert http_post_form(base + "/swarm", {"user_count": "3", "spawn_rate": "3", "host": host,
                                                "metrics_url": ""})["success"] is True
        first = wait_for(lambda: _rag_live(base, 3), 40, what="the live rag block while running")
        rag = first["blocks"]["rag"]
        assert rag["recall_at_k"] is not None and 0 <= rag["recall_at_k"] <= 1
        assert any(r["metric"].startswith("recall@") and r["value"] != "-" for r in first["panels"])
        later = wait_for(lambda: (x := _rag_live(base, rag["requests"] + 5)) and x, 40,
                         what="the block moving")
        assert later["blocks"]["rag"]["requests"] > rag["requests"]
        assert sum(later["stage_means_ms"].values()) > 0
        stages = wait_for(lambda: (c := get_json(base + "/fourfold/charts.json")) and c["stages"]["t_s"]
                          and c, 20, what="the stage means over time")["stages"]
        names = [n for n in stages if n != "t_s"]
        assert (set(names) == set(later["stage_means_ms"])
                and all(v > 0 for v in stages[names[0]] if v is not None))
        status, _, page = http_get(base + "/fourfold/charts")
        assert status == 200 and "levels.json" in page and 'id="stagebar"' in page
        assert http_post_form(base + "/stop", {})["success"] is True
        wait_for(lambda: (get_json(base + "/stats/requests") or {}).get("state") == "stopped", 30,
                 what="stopped")
        _check_final(base, tmp_path)
    finally:
        out = finish(proc, terminate=True)
    assert proc.returncode == 0, out[-3000:]


def test_master_two_workers_live_panel_is_merged(tmp_path, locustfile):
    common = ["-f", locustfile("l3_rag.py"), *COMMON]
    base, master, workers = start_master_and_workers(common, tmp_path)
    try:
        host = _host(base)
        wait_for(lambda: ready_workers(base) == 2, 40, what="two ready workers")
        assert http_post_form(base + "/swarm",
                              {"user_count": "4", "spawn_rate": "4", "host": host})["success"]
        running = wait_for(lambda: _rag_live(base, 8), 40, what="the merged live rag block")
        assert running["blocks"]["rag"]["recall_at_k"] is not None
        assert http_post_form(base + "/stop", {})["success"] is True
        wait_for(lambda: (get_json(base + "/stats/requests") or {}).get("state") == "stopped", 30,
                 what="stopped")
        live, summary = _check_final(base, tmp_path)
    finally:
        master_out = finish(master, timeout=40, terminate=True)
        for proc in workers:
            finish(proc, timeout=20)
    assert master.returncode == 0, master_out[-3000:]
    run = _summaries(tmp_path)[0].parent
    records = [r for r in _records(run) if not r.get("warmup") and r.get("error_class") != "cancelled"]
    rag = live["blocks"]["rag"]
    # at least the 8 the live block showed before Stop (no more when none ended between the two)
    assert rag["requests"] == len(records) == summary["total"]["requests"] >= 8
    ok = [r for r in records if RequestRecord.from_dict(r).ok]
    recalls = [r["extra"]["recall_at_k"] for r in ok if r["extra"].get("recall_at_k") is not None]
    assert rag["recall_at_k"] == pytest.approx(sum(recalls) / len(recalls), rel=1e-9)
    conflicts = [r["extra"]["conflict"] for r in ok if "conflict" in r["extra"]]
    if conflicts:
        assert rag["conflict_rate"] == pytest.approx(sum(map(bool, conflicts)) / len(conflicts), rel=1e-9)


def test_l1_telemetry_panel_and_chart_follow_the_sampler(tmp_path, locustfile):
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = start_locust(["-f", locustfile("l1_throughput.py"), "--web-host", "127.0.0.1",
                         "--web-port", str(port), "--sample-interval", "0.5", *COMMON], tmp_path)
    try:
        host = _host(base)
        assert http_post_form(base + "/swarm", {"user_count": "2", "spawn_rate": "2", "host": host,
                                                "metrics_url": ""})["success"] is True
        live = wait_for(lambda: (x := get_json(base + "/fourfold/levels.json")) and
                        ((x["blocks"].get("server_metrics") or {}).get("metrics")
                         or {}).get("server.kv_cache_usage_pct")
                        and any(r["metric"] == "output tok/s" and r["value"] != "-"
                                for r in x["panels"]) and x,
                        30, what="telemetry and a finished request in the live block")
        assert any(r["panel"] == "telemetry" and r["metric"] == "server.kv_cache_usage_pct"
                   for r in live["panels"])
        assert any(r["metric"] == "output tok/s" and r["value"] != "-" for r in live["panels"])
        tele = wait_for(lambda: (c := get_json(base + "/fourfold/charts.json"))
                        and len(c["telemetry"]["t_s"]) >= 2
                        and c["telemetry"], 30, what="the telemetry chart's rows")
        assert "server.kv_cache_usage_pct" in tele and tele["server.kv_cache_usage_pct"][-1] is not None
        assert http_post_form(base + "/stop", {})["success"] is True
        summary = json.loads(wait_for(lambda: _summaries(tmp_path), 20, what="summary.json")[0].read_text())
        final = get_json(base + "/fourfold/levels.json")
        assert final["blocks"]["server_metrics"] == summary["server_metrics"]      # as written at Stop
    finally:
        out = finish(proc, terminate=True)
    assert proc.returncode == 0, out[-3000:]

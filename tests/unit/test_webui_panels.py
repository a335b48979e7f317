"""The "LLM level" tab's rows (fourfold.levels.webui_panels): each level's block as panel rows."""

from __future__ import annotations

from fourfold.levels.webui_panels import panel_rows, stage_means
from fourfold.measure.rag import RagStats
from fourfold.measure.record import RequestRecord


def _shown(rows):
    return {(r["panel"], r["metric"]): r["value"] for r in rows}


def _rag_record(recall: float, conflict: bool, retrieve: float, generate: float) -> RequestRecord:
    return RequestRecord(level="l3", scenario="rag", item_id="q", error_class="ok", e2e_ms=100.0, ttft_ms=20.0,
                         output_tokens=10, server_timing={"retrieve": retrieve, "generate": generate},
                         extra={"recall_at_k": recall, "precision_at_k": recall / 2, "conflict": conflict})


def test_l3_panel_from_the_rag_block_with_the_stage_breakdown():
    stats = RagStats(3)
    stats.add(_rag_record(1.0, True, 10.0, 60.0))
    stats.add(_rag_record(0.5, False, 30.0, 60.0))
    block = stats.summary()
    shown = _shown(panel_rows({"rag": block}, {"output_tps": 123.4, "stall_rate": 0.25, "pulse_hz": None}))
    assert shown[("L3", "recall@3")] == "0.750"
    assert shown[("L3", "context precision@3")] == "0.375"
    assert shown[("L3", "conflict rate")] == "50.00 %"
    assert shown[("stream", "output tok/s")] == "123.4" and shown[("stream", "stall %")] == "25.00 %"
    assert shown[("stream", "pulse Hz")] == "-"
    means = stage_means(block)
    assert list(means)[-1] == "other" and means["generate"] == block["stages_ms"]["generate"]["mean"]
    assert 15 <= means["retrieve"] <= 25
    assert shown[("L3", "stage retrieve mean ms")] == f"{means['retrieve']:.1f}"


def test_l2_l4_and_telemetry_panels():
    l2 = {"ladder": {"hold_s": 5, "ladder": {"steps": [{"users": 2, "ttft_p95_ms": 40.0},
                                                       {"users": 4, "ttft_p95_ms": 900.0}], "knee_users": 4}},
          "open_loop": {"offered_rps": 10.0, "sent_rps": 9.5, "completed_rps": 9.0},
          "connections": {"h1": {"conn_reused": 90, "conn_new": 10, "conn_reconnects": 2}}}
    sessions = {"by_variant": {"A": {"ended": 4, "completion_rate": 0.75, "abandonment_rate": 0.25, "rounds_mean": 2.5}},
                "total": {"ended": 4, "completion_rate": 0.75, "abandonment_rate": 0.25, "rounds_mean": 2.5}}
    telemetry = {"metrics": {"server.kv_cache_usage_pct": {"last": 0.4, "mean": 0.3, "max": 0.5}}, "errors": {}}
    shown = _shown(panel_rows({"l2": l2, "sessions": sessions, "server_metrics": telemetry}, {}))
    assert shown[("L2", "ladder: current step")] == "4 users"
    assert shown[("L2", "ladder: 4 users TTFT p95 ms")] == "900.0" and shown[("L2", "ladder: knee (users)")] == "4"
    assert shown[("L2", "offered req/s")] == "10.0" and shown[("L2", "completed req/s")] == "9.0"
    assert shown[("L2", "h1: connections reused / new")] == "90 / 10" and shown[("L2", "h1: reconnects")] == "2"
    assert shown[("L4", "A: completion")] == "75.00 %" and shown[("L4", "all: rounds per session")] == "2.500"
    assert shown[("telemetry", "server.kv_cache_usage_pct")] == "last 0.4  mean 0.3  max 0.5"


def test_series_columns_put_the_telemetry_names_first_and_fill_gaps_with_none():
    from fourfold.levels.webui_panels import series_columns

    cols = series_columns([{"t_s": 1.0, "server.running": 2.0, "server.kv_cache_usage_pct": 40.0},
                           {"t_s": 2.0, "server.running": 3.0}])
    assert list(cols) == ["t_s", "server.kv_cache_usage_pct", "server.running"]
    assert cols["server.kv_cache_usage_pct"] == [40.0, None] and cols["t_s"] == [1.0, 2.0]
    assert series_columns([]) == {"t_s": []}

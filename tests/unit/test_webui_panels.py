"""The "LLM level" tab's rows (fourfold.levels.webui_panels): each level's block as panel rows."""

from __future__ import annotations

from fourfold.levels.webui_panels import panel_rows, stage_means
from fourfold.measure.rag import RagStats
from fourfold.measure.record import RequestRecord


def _shown(rows):
    return {(r["panel"], r["metric"]): r["value"] for r in rows}


def _rag_record(recall: float, conflict: bool, retrieve: float, generate: float) -> RequestRecord:
    return RequestRecord(level="l3", scenario="rag", item_id="q", error_class="ok", e2e_ms=100.0,
                         ttft_ms=20.0, output_tokens=10,
                         server_timing={"retrieve": retrieve, "generate": generate},
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
    sessions = {"by_variant": {"A": {"ended": 4, "completion_rate": 0.75, "abandonment_rate": 0.25,
                                     "rounds_mean": 2.5, "tool_calls_per_session": None}},
                "total": {"ended": 4, "completion_rate": 0.75, "abandonment_rate": 0.25, "rounds_mean": 2.5,
                          "tool_calls_per_session": 1.25}}
    embed = {"embeddings@b8": {"request_rps": 12.5, "inputs_per_s": 100.0, "input_tokens_per_s": 950.25}}
    telemetry = {"metrics": {"server.kv_cache_usage_pct": {"last": 0.4, "mean": 0.3, "max": 0.5}},
                 "errors": {}}
    blocks = {"l2": l2, "sessions": sessions, "server_metrics": telemetry, "embed": embed}
    shown = _shown(panel_rows(blocks, {}))
    assert shown[("L2", "ladder: current step")] == "4 users"
    assert shown[("L2", "ladder: 4 users TTFT p95 ms")] == "900.0" \
        and shown[("L2", "ladder: knee (users)")] == "4"
    assert shown[("L2", "offered req/s")] == "10.0" and shown[("L2", "completed req/s")] == "9.0"
    assert shown[("L2", "h1: connections reused / new")] == "90 / 10" \
        and shown[("L2", "h1: reconnects")] == "2"
    assert shown[("L4", "A: completion")] == "75.00 %" and shown[("L4", "all: rounds per session")] == "2.500"
    assert shown[("telemetry", "server.kv_cache_usage_pct")] == "last 0.4  mean 0.3  max 0.5"
    assert shown[("L4", "all: tool calls per session")] == "1.250"
    assert ("L4", "A: tool calls per session") not in shown
    assert shown[("embed", "embeddings@b8: inputs/s")] == "100.0"
    assert shown[("embed", "embeddings@b8: input tokens/s")] == "950.2"


def test_series_columns_put_the_telemetry_names_first_and_fill_gaps_with_none():
    from fourfold.levels.webui_panels import series_columns

    cols = series_columns([{"t_s": 1.0, "server.running": 2.0, "server.kv_cache_usage_pct": 40.0},
                           {"t_s": 2.0, "server.running": 3.0}])
    assert list(cols) == ["t_s", "server.kv_cache_usage_pct", "server.running"]
    assert cols["server.kv_cache_usage_pct"] == [40.0, None] and cols["t_s"] == [1.0, 2.0]
    assert series_columns([]) == {"t_s": []}


# ---- the charts page (issue 31 item 8: an empty telemetry panel on L3, two colours for one stage) ----

def test_a_chart_is_shown_only_with_a_series_to_draw():
    from fourfold.levels.webui_panels import has_series, series_columns

    assert has_series(series_columns([])) is False                      # L3: no telemetry sampler
    assert has_series(series_columns([{"t_s": 1.0}])) is False
    assert has_series(series_columns([{"t_s": 1.0, "server.running": 2.0}])) is True


def test_one_colour_per_stage_in_the_order_first_seen():
    from fourfold.levels.webui_panels import CHART_COLORS, stage_colors

    colours = stage_colors(["retrieve", "rerank", "generate", "retrieve", "other"])
    assert colours == {"retrieve": CHART_COLORS[0], "rerank": CHART_COLORS[1], "generate": CHART_COLORS[2],
                       "other": CHART_COLORS[3]}
    many = stage_colors(f"s{i}" for i in range(len(CHART_COLORS) + 1))
    assert many[f"s{len(CHART_COLORS)}"] == CHART_COLORS[0]               # more stages than colours: cycled


def _charts_ui():
    from types import SimpleNamespace

    from fourfold.levels.runtime import Runtime
    from fourfold.levels.state import state_of
    from fourfold.levels.webui import LLMWebUI
    from fourfold.measure.stats import LLMStats

    runtime = SimpleNamespace(stats=LLMStats(), is_master=False, tests=1)
    environment = SimpleNamespace(runner=SimpleNamespace(state="stopped"))
    state_of(environment).put(runtime, Runtime)       # a stand-in Runtime: the web UI reads these three
    return LLMWebUI(environment)


def test_charts_json_says_which_charts_to_show_and_colours_stages_as_the_bar_does():
    from fourfold.levels.webui_panels import CHART_COLORS

    ui = _charts_ui()
    ui.stage_names = ["retrieve", "rerank", "generate", "other"]   # as _sample_levels saw them (block order)
    ui.stage_points.append({"t_s": 1.0, "retrieve": 2.0, "rerank": None, "generate": 6.0, "other": 1.0})
    data = ui.charts_data("")
    assert data["shown"] == {"telemetry": False, "stages": True}           # L3: no empty telemetry panel
    assert list(data["stages"]) == ["t_s", "generate", "other", "rerank", "retrieve"]     # columns sorted...
    assert data["stage_colors"] == {"retrieve": CHART_COLORS[0], "rerank": CHART_COLORS[1],   # ...colours not
                                    "generate": CHART_COLORS[2], "other": CHART_COLORS[3]}
    bar = ui._stage_colors({"retrieve": 2.0, "rerank": 0.0, "generate": 6.0, "other": 1.0})     # levels.json
    assert bar == data["stage_colors"]
    ui.telemetry = [{"t_s": 1.0, "server.running": 3.0}]
    ui.stage_points.clear()
    assert ui.charts_data("")["shown"] == {"telemetry": True, "stages": False}    # L1: no empty stage panel


def test_the_charts_page_hides_empty_charts_and_takes_stage_colours_from_the_server():
    import json

    from fourfold.levels.webui_page import CHARTS_HTML
    from fourfold.levels.webui_panels import CHART_COLORS

    assert f"const COLORS = {json.dumps(list(CHART_COLORS))};" in CHARTS_HTML
    assert '<div class="chart" id="chart-stages" hidden>' in CHARTS_HTML
    assert '<div class="chart" id="chart-telemetry" hidden>' in CHARTS_HTML
    assert 'document.getElementById("chart-" + name).hidden = !on;' in CHARTS_HTML
    assert CHARTS_HTML.count("(data.stage_colors || {})") == 2                # the bar and the stage chart

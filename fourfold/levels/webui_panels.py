"""The web UI's per-level live panels: the loaded level's summary blocks as rows (pure functions).

Their input is what ``/fourfold/levels.json`` serves: the levels' blocks over the data so far
(:func:`fourfold.levels.runtime.live_blocks`, the same functions that write summary.json's ``rag``,
``l2``, ``sessions`` and ``server_metrics`` blocks) and the Aggregated row of the LLM tab (the
merged LLMStats summary). One row per figure: ``{"panel", "metric", "value"}``, in the tab
"LLM level" and on the charts page, which also draws the L3 stage means as a stacked bar.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

CHART_COLORS = ("#2457c5", "#e8871e", "#c93c3c", "#3a9a5b", "#7b53c1")     # the charts page's lines and bars
STREAM = (("output_tps", "output tok/s", "num"), ("tpot_p50_ms", "TPOT p50 ms", "ms"),
          ("stall_rate", "stall %", "pct"), ("pulse_hz", "pulse Hz", "hz"),
          ("jitter_p50_ms", "jitter p50 ms", "ms"))
TELEMETRY_FIRST = ("server.gpu_util_pct", "server.mem_bw_util_pct", "server.kv_cache_usage_pct",
                   "server.running", "server.waiting")


def show(value: Any, kind: str) -> str:
    if value is None:
        return "-"
    if kind == "pct":
        return f"{100 * value:.2f} %"
    if kind == "ms" or kind == "num":
        return f"{value:.1f}"
    if kind == "hz":
        return f"{value:.2f}"
    if kind == "ratio":
        return f"{value:.3f}"
    return str(value)


def _row(panel: str, metric: str, value: Any, kind: str = "text") -> dict[str, str]:
    return {"panel": panel, "metric": metric, "value": show(value, kind)}


def stream_rows(total: dict[str, Any]) -> list[dict[str, str]]:
    """Every level: throughput, TPOT and the stream rhythm of the Aggregated row."""
    return [_row("stream", title, total.get(key), kind) for key, title, kind in STREAM]


def telemetry_rows(block: dict[str, Any]) -> list[dict[str, str]]:
    """Server telemetry (``server_metrics``): each metric's last value, mean and max so far."""
    metrics = block.get("metrics") or {}
    names = ([n for n in TELEMETRY_FIRST if n in metrics]
             + sorted(n for n in metrics if n not in TELEMETRY_FIRST))
    rows = [_row("telemetry", name, f"last {m.get('last')}  mean {m.get('mean')}  max {m.get('max')}")
            for name in names for m in (metrics[name],)]
    if not rows:
        rows = [_row("telemetry", "samples", "none yet" if not block.get("errors") else
                     "; ".join(f"{k}: {v}" for k, v in sorted(block["errors"].items())))]
    return rows


def rag_rows(rag: dict[str, Any]) -> list[dict[str, str]]:
    k = rag.get("k")
    rows = [_row("L3", "requests (ok)", f"{rag.get('requests')} ({rag.get('ok')})"),
            _row("L3", f"recall@{k}", rag.get("recall_at_k"), "ratio"),
            _row("L3", f"context precision@{k}", rag.get("precision_at_k"), "ratio"),
            _row("L3", "conflict rate", rag.get("conflict_rate"), "pct"),
            _row("L3", "effective tok/s", rag.get("effective_tps"), "num")]
    for name, hist in stage_means(rag).items():
        rows.append(_row("L3", f"stage {name} mean ms", hist, "ms"))
    return rows


def stage_means(rag: dict[str, Any]) -> dict[str, float | None]:
    """The stage breakdown's means (ms), in the block's stage order, then ``other``."""
    means = {name: (h or {}).get("mean") for name, h in (rag.get("stages_ms") or {}).items()}
    if means:
        means["other"] = (rag.get("other_ms") or {}).get("mean")
    return means


def l2_rows(l2: dict[str, Any]) -> list[dict[str, str]]:
    rows: list[dict[str, str]] = []
    for base, ladder in (l2.get("ladder") or {}).items():
        if not isinstance(ladder, dict):          # "hold_s"
            continue
        steps = ladder.get("steps") or []
        if steps:
            rows.append(_row("L2", f"{base}: current step", f"{steps[-1].get('users')} users"))
        for step in steps:
            rows.append(_row("L2", f"{base}: {step.get('users')} users TTFT p95 ms", step.get("ttft_p95_ms"),
                             "ms"))
        rows.append(_row("L2", f"{base}: knee (users)", ladder.get("knee_users") or "not yet"))
    loop = l2.get("open_loop")
    if loop:
        rows += [_row("L2", "offered req/s", loop.get("offered_rps"), "num"),
                 _row("L2", "sent req/s", loop.get("sent_rps"), "num"),
                 _row("L2", "completed req/s", loop.get("completed_rps"), "num")]
    rows += sweep_rows(l2.get("sweep") or {})
    for base, conn in (l2.get("connections") or {}).items():
        rows += [_row("L2", f"{base}: connections reused / new",
                      f"{conn.get('conn_reused')} / {conn.get('conn_new')}"),
                 _row("L2", f"{base}: reconnects", conn.get("conn_reconnects"))]
    return rows


def sweep_rows(sweep: dict[str, Any]) -> list[dict[str, str]]:
    """``--sweep`` (``l2.sweep``): the rate offered now, each rate judged so far, then the bracket."""
    if not sweep:
        return []

    def rps(value: Any) -> str:
        return "-" if value is None else f"{value:.2f}"

    metric = sweep.get("knee_metric") or "ttft_p95"
    name, _, stat = metric.rpartition("_")
    done = sweep.get("finished")
    rows = [_row("L2 sweep", "offering now (req/s)", f"done: {sweep.get('stopped')}" if done
                 else rps(sweep.get("current_rps")))]
    for point in sweep.get("rates") or []:
        latency = ((point.get("latency_ms") or {}).get(f"{name}_ms") or {}).get(stat)
        rows.append(_row("L2 sweep", f"{point.get('scenario') or rps(point.get('offered_rps'))}: "
                         f"{metric} ms, achieved req/s, SLO",
                         f"{show(latency, 'ms')}, {rps(point.get('achieved_rps'))}, "
                         + ("meets" if point.get("passed") else "MISSES")))
    low, high = (list(sweep.get("bracket_rps") or []) + [None, None])[:2]
    if sweep.get("capacity_rps") is not None or high is not None:
        rows.append(_row("L2 sweep", f"capacity req/s (SLO {sweep.get('slo')})",
                         f"{rps(sweep.get('capacity_rps'))} in [{rps(low)}, {rps(high)}]"
                         + ("" if sweep.get("converged")
                            else " (not converged)" if done else " (not converged yet)")))
    rows.append(_row("L2 sweep", "knee (req/s)", rps(sweep.get("knee_rps"))))
    return rows


def session_rows(sessions: dict[str, Any]) -> list[dict[str, str]]:
    rows: list[dict[str, str]] = []
    variants = {**(sessions.get("by_variant") or {}), "all": sessions.get("total") or {}}
    for name, one in variants.items():
        rows += [_row("L4", f"{name}: sessions ended", one.get("ended")),
                 _row("L4", f"{name}: completion", one.get("completion_rate"), "pct"),
                 _row("L4", f"{name}: abandonment", one.get("abandonment_rate"), "pct"),
                 _row("L4", f"{name}: rounds per session", one.get("rounds_mean"), "ratio")]
        if one.get("tool_calls_per_session") is not None:          # agentic sessions (levels.l4_agent)
            rows.append(_row("L4", f"{name}: tool calls per session", one["tool_calls_per_session"], "ratio"))
    return rows


def embed_rows(embed: dict[str, Any]) -> list[dict[str, str]]:
    """Embeddings / rerank (the ``embed`` block): per batch size, requests, inputs, input tokens a second."""
    rows: list[dict[str, str]] = []
    for scenario, one in embed.items():
        rows += [_row("embed", f"{scenario}: requests/s", one.get("request_rps"), "num"),
                 _row("embed", f"{scenario}: inputs/s", one.get("inputs_per_s"), "num"),
                 _row("embed", f"{scenario}: input tokens/s", one.get("input_tokens_per_s"), "num")]
    return rows


def mix_rows(mix: dict[str, Any]) -> list[dict[str, str]]:
    """``--mix`` (the ``mix`` block): per tenant its share of requests against its weight, goodput,
    429s, Retry-After answers and TTFT / E2E p95; per model the same when the mix has more than one;
    Jain's index."""
    rows: list[dict[str, str]] = []
    for kind, name_key, entries in (("tenant", "name", mix.get("tenants") or []),
                                    ("model", "model", mix.get("models") or [])):
        if kind == "model" and len(entries) < 2:
            continue
        for one in entries:
            name = f"{kind} {one.get(name_key)}"
            rows += [_row("mix", f"{name}: requests, share (weight)",
                          f"{one.get('requests')}, {show(one.get('share'), 'pct')} "
                          f"({show(one.get('weight'), 'pct')})"),
                     _row("mix", f"{name}: goodput req/s (share)",
                          f"{show(one.get('goodput_rps'), 'num')} ({show(one.get('goodput_share'), 'pct')})"),
                     _row("mix", f"{name}: 429s", one.get("rate_limited")),
                     *([_row("mix", f"{name}: Retry-After answers (s asked)",
                             f"{one['retry_after']} ({show(one.get('retry_after_s'), 'num')})")]
                       if "retry_after" in one else []),
                     _row("mix", f"{name}: TTFT p95 ms", (one.get("ttft_ms") or {}).get("p95"), "ms"),
                     _row("mix", f"{name}: E2E p95 ms", (one.get("e2e_ms") or {}).get("p95"), "ms")]
    rows.append(_row("mix", "fairness (Jain, goodput share / weight)",
                     (mix.get("fairness") or {}).get("jain_index"), "ratio"))
    return rows


def panel_rows(blocks: dict[str, Any], total: dict[str, Any]) -> list[dict[str, str]]:
    """The rows of the "LLM level" tab: the level's own panels, stream rhythm, telemetry."""
    rows: list[dict[str, str]] = []
    if blocks.get("rag"):
        rows += rag_rows(blocks["rag"])
    if blocks.get("l2"):
        rows += l2_rows(blocks["l2"])
    if blocks.get("sessions"):
        rows += session_rows(blocks["sessions"])
    if blocks.get("embed"):
        rows += embed_rows(blocks["embed"])
    if blocks.get("mix"):
        rows += mix_rows(blocks["mix"])
    rows += stream_rows(total)
    if blocks.get("server_metrics"):
        rows += telemetry_rows(blocks["server_metrics"])
    return rows


def series_columns(rows: list[dict[str, Any]], max_names: int = 8) -> dict[str, list[Any]]:
    """Rows ``{"t_s": .., name: value, ..}`` (the sampler's, or stage means by time) as columns for a
    chart: ``t_s`` and each name (the telemetry names first), None where a row lacks it."""
    names = [n for n in TELEMETRY_FIRST if any(n in r for r in rows)]
    names += sorted({n for r in rows for n in r if n != "t_s" and n not in names})
    names = names[:max_names]
    return {"t_s": [r.get("t_s") for r in rows], **{n: [r.get(n) for r in rows] for n in names}}


def has_series(columns: dict[str, list[Any]]) -> bool:
    """Whether :func:`series_columns` found anything to draw (a chart with none is left off the page:
    L3 has no telemetry sampler, the other levels no stages)."""
    return any(name != "t_s" for name in columns)


def stage_colors(names: Iterable[str]) -> dict[str, str]:
    """One colour per stage, by its place in ``names`` (the order the stages were first seen), for
    both the stacked bar and the stage chart."""
    return {name: CHART_COLORS[i % len(CHART_COLORS)] for i, name in enumerate(dict.fromkeys(names))}


__all__ = ["CHART_COLORS", "embed_rows", "has_series", "mix_rows", "panel_rows", "series_columns",
           "stage_colors", "stage_means", "stream_rows"]

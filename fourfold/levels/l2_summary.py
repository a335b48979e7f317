"""``summary.json``'s ``l2`` block and its console lines, at a test's end and live (the web UI).

:func:`l2_report` reads LLMStats' summary and the level's own aggregates (``L2State`` of
:mod:`fourfold.levels.l2_gateway`: its settings, ``GatewayStats`` and the sweep): the ladder and its
knee, the gateway overhead (``--direct-host``, :mod:`fourfold.levels.l2_direct`), connections, rate
limits, the sweep and the open loop.
"""

from __future__ import annotations

from typing import Any

from fourfold.levels.arrivals import trace_offered
from fourfold.levels.base import selected_items
from fourfold.levels.l2_direct import format_overhead, overhead_report
from fourfold.levels.l2_probe import PROBE_SCENARIO
from fourfold.levels.l2_saturation import stopped_lines
from fourfold.levels.l2_stats import (
    connections_report,
    format_connections,
    format_open_loop,
    open_loop_report,
)
from fourfold.levels.ladder import format_ladder, ladder_report
from fourfold.levels.options import Settings
from fourfold.workloads.trace import arrival_offsets_s, is_trace

OPEN_SCENARIO = "open"      # the open-loop dispatcher's records (OpenLoopUser.scenario)


def l2_report(summary: dict[str, Any], state: Any, options: Any) -> tuple[dict[str, Any], list[str]]:
    """``summary.json``'s ``l2`` block and the console lines, from LLMStats' summary and GatewayStats."""
    settings = state.settings
    groups = [g for g in summary.get("groups", []) if g["level"] == "l2"]
    report: dict[str, Any] = {}
    notes: list[str] = []
    ladders = ladder_report(groups, settings.slo_ttft_p95_ms)
    if ladders:
        stopped = getattr(state.saturation, "stopped", None)
        if stopped and stopped["base"] in ladders:       # --stop-on-saturation ended the ladder there
            ladders[stopped["base"]]["stopped"] = {k: stopped[k]
                                                   for k in ("step", "at_s", "in_step_s", "reason")}
        report["ladder"] = {"hold_s": settings.ladder_hold_s, **ladders}
        for base, ladder in ladders.items():
            notes.extend(format_ladder(base, ladder, settings.ladder_hold_s))
        notes.extend(stopped_lines(stopped))
        knees = {base: ladder["knee_users"] for base, ladder in ladders.items()}
        report["knee_users"] = knees.get("ladder", next(iter(knees.values())))
    probe = next((g for g in groups if g["scenario"] == PROBE_SCENARIO), None)
    if probe is not None and settings.probe_request_rate > 0:
        report["probe"] = probe_block(probe, settings)
        notes.append(format_probe(report["probe"]))
    overhead = overhead_report(groups, settings.direct_host) if settings.direct_host else None
    if overhead:
        report["overhead"] = overhead
        notes.extend(format_overhead(overhead))
    connections = connections_report(groups, state.stats)
    if connections:
        report["connections"] = connections
        notes.extend(format_connections(connections))
    statuses = (summary.get("total") or {}).get("statuses") or {}
    limited = {code: statuses[code] for code in ("429", "503") if statuses.get(code)}
    if limited:
        report["rate_limited"] = limited
        notes.append("L2 rate limits: " + ", ".join(f"HTTP {code} x{n}" for code, n in limited.items())
                     + ("" if settings.honour_retry_after
                        else " (Retry-After not honoured: --honour-retry-after)"))
    if state.sweep is not None:
        report["sweep"] = state.sweep.block()
        notes.extend(state.sweep.lines())
    if state.stats.dispatchers:
        group = next((g for g in groups if g["scenario"] == OPEN_SCENARIO), None)
        arrivals = settings.arrivals
        configured = {"process": arrivals.kind, "offered_rps": arrivals.rate_rps,
                      "burstiness": arrivals.burstiness, "max_in_flight": settings.max_in_flight,
                      "max_in_flight_policy": settings.max_in_flight_policy, "seed": settings.arrival_seed}
        run = Settings.from_options(options)
        items = selected_items(run.dataset, run)
        if is_trace(items):
            configured.update(trace_offered(arrival_offsets_s(items, run.trace_speed), run.trace_speed))
        open_loop = open_loop_report(state.stats.dispatchers, group, state.stats.facts(OPEN_SCENARIO),
                                     configured)
        report["open_loop"] = open_loop
        notes.extend(format_open_loop(open_loop))
        if "trace_entries" in open_loop:
            notes.append(f"  trace: {open_loop['trace_entries']} entries over {open_loop['trace_span_s']:g} "
                         f"s (--trace-speed {open_loop['trace_speed']:g}), each sent at its own time")
    return report, notes


def probe_block(probe: dict[str, Any], settings: Any) -> dict[str, Any]:
    """``l2.probe``: the interference probe's settings, requests and latency (its group, ``l2:probe``,
    holds the rest; the main load's groups are beside it)."""
    figures = {name: {q: probe[name][q] for q in ("p50", "p95", "p99")} for name in ("ttft_ms", "e2e_ms")}
    return {"rate_rps": settings.probe_request_rate, "max_tokens": settings.probe_max_tokens,
            "requests": probe["requests"], "failures": probe["failures"], **figures}


def format_probe(block: dict[str, Any]) -> str:
    def ms(value: float | None) -> str:
        return "-" if value is None else f"{value:.1f}"

    ttft, e2e = block["ttft_ms"], block["e2e_ms"]
    return (f"L2 interference probe ({block['rate_rps']:g}/s, {block['max_tokens']} tokens, group l2:probe): "
            f"{block['requests']} requests, TTFT p50 {ms(ttft['p50'])} p95 {ms(ttft['p95'])} ms, "
            f"E2E p50 {ms(e2e['p50'])} p95 {ms(e2e['p95'])} ms")


__all__ = ["OPEN_SCENARIO", "format_probe", "l2_report", "probe_block"]

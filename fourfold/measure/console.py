"""The LLM summary printed at the end of a run (plain text, fixed-width, pure)."""

from __future__ import annotations

from typing import Any

_COLUMNS = (
    # header, width, getter
    ("level:scenario", 22, lambda g: f"{g['level']}:{g['scenario']}" if g["scenario"] else g["level"]),
    ("reqs", 6, lambda g: g["requests"]),
    ("fail%", 6, lambda g: _pct(g.get("error_rate"))),
    ("TTFT p50", 9, lambda g: _ms(g["ttft_ms"]["p50"])),
    ("p95", 7, lambda g: _ms(g["ttft_ms"]["p95"])),
    ("p99", 7, lambda g: _ms(g["ttft_ms"]["p99"])),
    ("ITL p50", 8, lambda g: _ms(g["itl_ms"]["p50"])),
    ("p99", 7, lambda g: _ms(g["itl_ms"]["p99"])),
    ("TPOT p50", 9, lambda g: _ms(g["tpot_ms"]["p50"])),
    ("E2E p50", 8, lambda g: _ms(g["e2e_ms"]["p50"])),
    ("p95", 7, lambda g: _ms(g["e2e_ms"]["p95"])),
    ("p99", 7, lambda g: _ms(g["e2e_ms"]["p99"])),
    ("out tok/s", 10, lambda g: _num(g.get("output_tps"))),
    ("stall%", 7, lambda g: _pct(g.get("stall_rate"))),
    ("jitter p50", 10, lambda g: _ms((g.get("jitter_ms") or {}).get("p50"))),
    ("pulse Hz", 8, lambda g: _num(g.get("pulse_hz"))),
)


# counters of summary.json shown under the table when not zero
_TARGET_ODDITIES = ("usage_implausible", "no_terminal_event", "unsolicited_responses")


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """A count and its noun in the right number: "1 answer", "0 answers", "2 answers" (``plural``
    for a noun that takes no "s")."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}"


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def token_counts_line(total: dict[str, Any], facts: dict[str, Any]) -> str:
    """Where the run's token counts came from (``--tokenizer``, ``--synthetic``): one line."""
    requests = int(total.get("requests") or 0)
    by_tokenizer = int(total.get("output_tokens_tokenizer") or 0)
    # chunk counts, text estimates
    estimated = max(0, int(total.get("output_tokens_estimated") or 0) - by_tokenizer)
    input_usage, input_tokenizer = (int(total.get("input_tokens_usage") or 0),
                                    int(total.get("input_tokens_tokenizer") or 0))
    line = (f"token counts: input usage={input_usage} tokenizer={input_tokenizer} "
            f"none={max(0, requests - input_usage - input_tokenizer)}; output usage="
            f"{max(0, requests - by_tokenizer - estimated)} tokenizer={by_tokenizer} estimated={estimated}")
    if facts.get("synthetic"):
        line += (f"; synthetic {facts['synthetic']} (input lengths: "
                 f"{facts.get('synthetic_lengths', 'estimate')})")
    if facts.get("tokenizer"):
        line += f"; tokenizer {facts['tokenizer']}"
    return line


def left_out_line(summary: dict[str, Any]) -> str:
    """What the table's counts leave out (``records_warmup``, ``records_cancelled`` of summary.json),
    "" when nothing: "not counted above: 16 warm-up requests (--warmup-requests), 1 cancelled request
    (in flight when the load generator stopped); records.jsonl holds them"."""
    parts = []
    warmup, cancelled = int(summary.get("records_warmup") or 0), int(summary.get("records_cancelled") or 0)
    if warmup:
        parts.append(f"{counted(warmup, 'warm-up request')} (--warmup-requests)")
    if cancelled:
        parts.append(f"{counted(cancelled, 'cancelled request')} (in flight when the load generator stopped)")
    return f"not counted above: {', '.join(parts)}; records.jsonl holds them" if parts else ""


def format_summary(summary: dict[str, Any]) -> str:
    """A table with one line per (level, scenario) and the Aggregated line; times in ms.

    TTFT/ITL/TPOT/E2E follow docs/metrics.md (ITL = pooled gaps between content chunks, vLLM's ITL;
    TPOT = (E2E - TTFT) / (tokens - 1) per request, AIPerf's "ITL").
    """
    groups = list(summary.get("groups", []))
    total = summary.get("total")
    rows = groups + ([total] if total and len(groups) != 1 else [])
    header = " ".join(f"{name:>{width}}" if i else f"{name:<{width}}"
                      for i, (name, width, _) in enumerate(_COLUMNS))
    lines = ["fourfold LLM summary (ms; ITL = gap between content chunks, TPOT = (E2E-TTFT)/(tokens-1))",
             header]
    for group in rows:
        cells = []
        for i, (_, width, get) in enumerate(_COLUMNS):
            text = str(get(group))
            cells.append(f"{text:>{width}}" if i else f"{text:<{width}.{width}}")
        lines.append(" ".join(cells))
    left_out = left_out_line(summary)
    if left_out:
        lines.append(left_out)
    if total:
        errors = {k: v for k, v in (total.get("errors") or {}).items() if k != "ok" and v}
        if errors:
            lines.append("errors: " + ", ".join(f"{k}={v}" for k, v in sorted(errors.items())))
        oddities = {k: total.get(k) for k in _TARGET_ODDITIES if total.get(k)}
        if oddities:       # what the target got wrong beside the classes (docs/errors.md)
            lines.append("target: " + ", ".join(f"{k}={v}" for k, v in oddities.items()))
        if summary.get("token_counts"):
            lines.append(token_counts_line(total, summary["token_counts"]))
        stages = total.get("server_timing_ms") or {}
        if stages:     # what the server said it spent (Server-Timing, Triton's inference_time_ms)
            lines.append("server-side ms: " + "; ".join(f"{stage} p50 {_ms(h['p50'])} p95 {_ms(h['p95'])}"
                                                        for stage, h in stages.items()))
    server = summary.get("server_metrics", {}).get("metrics") or {}
    if server:
        parts = [f"{name} mean {m['mean']:g} max {m['max']:g}" for name, m in server.items()
                 if not name.endswith("_total")]
        lines.append("server: " + "; ".join(parts))
    lines.extend(summary.get("notes") or ())   # level-specific report lines (e.g. L2's knee)
    return "\n".join(lines)

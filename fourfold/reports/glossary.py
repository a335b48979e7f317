"""What the report's words mean: verdict symbols, number formats, and the metric definitions
(condensed from docs/metrics.md) that every renderer puts in its footnote."""

from __future__ import annotations

from fourfold.reports.compare import BETTER, NA, SAME, WORSE, Row

__all__ = ["DEFINITIONS", "METRICS_DOC", "SYMBOLS", "fmt_ci", "fmt_delta", "fmt_p", "fmt_pct", "fmt_value",
           "legend_lines", "verdict_text"]

METRICS_DOC = "docs/metrics.md"
SYMBOLS = {BETTER: "✅", WORSE: "❌", SAME: "➖", NA: ""}

# (fourfold name, definition, vLLM bench serve, AIPerf)
DEFINITIONS: tuple[tuple[str, str, str, str], ...] = (
    ("ttft_ms", "request sent -> first chunk carrying output text (a role-only chunk does not count)",
     "TTFT", "TTFT"),
    ("itl_ms", "gap between consecutive content chunks, pooled over all requests", "ITL", "inter-chunk latency"),
    ("tpot_ms", "(e2e - ttft) / (output_tokens - 1), per request", "TPOT", "ITL"),
    ("e2e_ms", "request sent -> last chunk (the terminal event)", "E2EL", "request latency"),
    ("output_tps", "all output tokens (server usage, else chunks) / wall time (first send -> last end)",
     "output throughput", "output token throughput"),
    ("goodput_rps", "ok requests meeting every per-request SLO / wall time", "goodput", "goodput"),
    ("stall_rate", "requests with a chunk gap above the stall threshold (150 ms) / requests", "-", "-"),
    ("interruption_rate", "streams that broke or ended without their terminal event / requests", "-", "-"),
    ("error_rate", "failed requests (connect, timeout, 4xx/5xx, 429, malformed, interrupted) / requests",
     "failed", "error requests"),
    ("conn_reuse", "requests sent on an already-open connection / requests where known", "-", "-"),
    ("ttft structured - plain", "mean TTFT of structured prompts (\"in three points\") - of plain ones", "-", "-"),
    ("session completion, rounds", "L4: sessions that reached their goal / ended sessions; turns per session",
     "-", "-"),
    ("recall@k, context precision@k", "L3: gold documents among the top k retrieved / gold ones; retrieved ones "
     "that are gold / k (mean per request)", "-", "-"),
    ("similarity", "cosine(MiniLM(answer), MiniLM(reference)); p5 = 5th percentile", "-", "-"),
    ("structure compliance", "answers delivering the requested number of items / answers asked for a number",
     "-", "-"),
)

_DECIMALS = {"ms": 1, "tok/s": 1, "req/s": 2, "%": 2, "cos": 3, "rounds": 2}


def _decimals(unit: str) -> int:
    return _DECIMALS.get(unit, 2)


def fmt_value(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    return f"{_round(value, _decimals(unit)):.{_decimals(unit)}f}"


def fmt_delta(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    return f"{_round(value, _decimals(unit)):+.{_decimals(unit)}f}"


def fmt_pct(value: float | None) -> str:
    return "-" if value is None else f"{_round(value, 1):+.1f}%"


def fmt_ci(low: float | None, high: float | None, unit: str) -> str:
    if low is None or high is None:
        return "-"
    return f"[{fmt_delta(low, unit)}, {fmt_delta(high, unit)}]"


def fmt_p(p_value: float | None) -> str:
    if p_value is None:
        return "-"
    return "<0.001" if p_value < 0.001 else f"{p_value:.3f}"


def verdict_text(row: Row) -> str:
    symbol = SYMBOLS.get(row.verdict, "")
    return f"{symbol} {row.verdict}" if symbol else row.verdict


def _round(value: float, digits: int) -> float:
    rounded = round(value, digits)
    return 0.0 if rounded == 0 else rounded      # no "-0.0"


def legend_lines(resamples: int, seed: int, confidence: float, alpha: float) -> list[str]:
    level = f"{confidence:.0%}"
    return [
        f"{SYMBOLS[BETTER]} better · {SYMBOLS[WORSE]} worse · {SYMBOLS[SAME]} no significant change "
        f"(p >= {alpha:g}) · n/a: a side has no data for this row.",
        "Δ = candidate - baseline; for % rows Δ is in percentage points. Lower is better for latencies, "
        "error / interruption / stall rates and rounds; higher for throughput, goodput, connection reuse, "
        "session completion and quality.",
        f"{level} CI of Δ: percentile bootstrap, {resamples:,} resamples, seed {seed} (requests resampled for "
        "percentiles, whole requests for ITL, 1-s intervals for tokens/s and goodput). p: the bootstrap's, a "
        "two-proportion z-test (Fisher exact for small counts) for rates, a sign-flip permutation test for "
        "rows marked (paired) (same items on both sides: mean per-item difference).",
        f"Every row is tested on its own at α = {alpha:g}, with no correction for the number of rows: among "
        "20 rows with no real change, about one is expected to come out \"significant\" by chance.",
    ]

"""What the report's words mean: verdict symbols, number formats, and the definitions of the
metrics the report shows (from :mod:`fourfold.measure.metric_names`, the registry docs/metrics.md
is generated from) that every renderer puts in its footnote."""

from __future__ import annotations

from fourfold.measure.metric_names import METRICS, MetricDef, resolve
from fourfold.reports.compare import BETTER, NA, SAME, WORSE, Row
from fourfold.reports.compare import METRICS as ROWS

__all__ = ["DEFINITIONS", "METRICS_DOC", "SYMBOLS", "fmt_ci", "fmt_delta", "fmt_p", "fmt_pct", "fmt_value",
           "legend_lines", "verdict_text"]

METRICS_DOC = "docs/metrics.md"
SYMBOLS = {BETTER: "✅", WORSE: "❌", SAME: "➖", NA: ""}


def _definition(metric: MetricDef) -> str:
    """The registry's definition; for a rate or ratio ``a / b``, with what ``a`` is."""
    text = metric.definition
    numerator = text.split(" / ")[0] if metric.kind in ("rate", "ratio") and " / " in text else ""
    found = resolve(numerator) if numerator.isidentifier() else None
    return f"{text}, where {numerator} = {found[0].definition}" if found and found[1] is None else text


_ROW_KEYS = {row.key for row in ROWS}

# (fourfold name, definition, vLLM bench serve, AIPerf) of every metric shown as a row
DEFINITIONS: tuple[tuple[str, str, str, str], ...] = tuple(
    (m.name, _definition(m), m.vllm, m.aiperf) for m in METRICS if _ROW_KEYS & set(m.report))

_DECIMALS = {"ms": 1, "tok/s": 1, "req/s": 2, "%": 2, "cos": 3, "F1": 3, "rounds": 2}


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
        "error / interruption / stall rates, rounds and L3's conflict and low-groundedness rates; higher for throughput, goodput, connection reuse, "
        "session completion and quality. Server telemetry rows (server: / nvidia-smi:, from server_metrics.json) "
        "are descriptive: their mean is compared over the samples, higher reading as more of the GPU used; their "
        "max rows are values only (n/a).",
        f"{level} CI of Δ: percentile bootstrap, {resamples:,} resamples, seed {seed} (requests resampled for "
        "percentiles, whole requests for ITL, 1-s intervals for tokens/s and goodput). p: the bootstrap's, a "
        "two-proportion z-test (Fisher exact for small counts) for rates, a sign-flip permutation test for "
        "rows marked (paired) (same items on both sides: mean per-item difference).",
        f"Every row is tested on its own at α = {alpha:g}, with no correction for the number of rows: among "
        "20 rows with no real change, about one is expected to come out \"significant\" by chance.",
    ]

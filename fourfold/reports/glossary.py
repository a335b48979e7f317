"""What the report's words mean: verdict symbols, number formats, and the definitions of the
metrics the report shows (from :mod:`fourfold.measure.metric_names`, the registry docs/metrics.md
is generated from) that every renderer puts in its footnote."""

from __future__ import annotations

from fourfold.measure.metric_names import METRICS, MetricDef, resolve
from fourfold.reports.compare import BETTER, EQUIVALENT, INCONCLUSIVE, NA, NO_CHANGE, TOO_FEW, WORSE, Row
from fourfold.reports.compare import METRICS as ROWS

__all__ = ["DEFINITIONS", "GATED_MARK", "METRICS_DOC", "SYMBOLS", "fmt_band", "fmt_ci", "fmt_delta", "fmt_p",
           "fmt_pct", "fmt_value", "legend_lines", "shown_p", "short_why", "verdict_text"]

GATED_MARK = "†"

METRICS_DOC = "docs/metrics.md"
SYMBOLS = {BETTER: "✅", WORSE: "❌", EQUIVALENT: "🟰", INCONCLUSIVE: "❔", NO_CHANGE: "➖", TOO_FEW: "·",
           NA: ""}


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
    text = f"{symbol} {row.verdict}" if symbol else row.verdict
    why = short_why(row)
    return f"{text} ({why})" if why else text


def short_why(row: Row) -> str:
    """A few words on what a verdict lacks (the notes and the CSV's ``why`` say it in full)."""
    if row.verdict == TOO_FEW:
        return row.why
    if row.verdict == INCONCLUSIVE and row.why.startswith("1 run a side"):
        return "1 run a side"
    if row.verdict == INCONCLUSIVE and " not after " in row.why:
        return "not after " + row.why.split(" not after ")[1].split(" over ")[0]
    return ""


def fmt_band(row: Row) -> str:
    if row.band is None or row.verdict in (NA,):
        return "-"
    return f"±{fmt_value(row.band, row.unit)}"


def shown_p(row: Row) -> float | None:
    """The p the table shows: adjusted for the number of rows when it was."""
    return row.p_adjusted if row.p_adjusted is not None else row.p_value


def _round(value: float, digits: int) -> float:
    rounded = round(value, digits)
    return 0.0 if rounded == 0 else rounded      # no "-0.0"


def legend_lines(resamples: int, seed: int, confidence: float, alpha: float) -> list[str]:
    level = f"{confidence:.0%}"
    return [
        f"{SYMBOLS[BETTER]} better / {SYMBOLS[WORSE]} worse: the whole {level} interval of Δ lies beyond the "
        f"row's minimum effect (band) · {SYMBOLS[EQUIVALENT]} equivalent: the {1 - 2 * alpha:.0%} interval "
        f"lies inside the band · {SYMBOLS[INCONCLUSIVE]} inconclusive: neither · {SYMBOLS[NO_CHANGE]} no "
        f"change: the same value on both sides · {SYMBOLS[TOO_FEW]} too few: not data enough for the "
        "statistic (a quantile q needs 10 / min(q, 1 - q) values) · n/a: a side has no data, or values only.",
        "Δ = candidate - baseline; for % rows Δ is in percentage points. Lower is better for latencies, "
        "error / interruption / stall rates, rounds and L3's conflict and low-groundedness rates; higher for "
        "throughput, goodput, connection reuse, session completion and quality. Server telemetry rows "
        "(server: / nvidia-smi:, from server_metrics.json) are descriptive: their mean is compared over the "
        "samples, higher reading as more of the GPU used; their max rows are values only (n/a).",
        f"Runs are the unit of replication: a side's value is the mean over its runs, the {level} interval a "
        "Student-t one from the variance between runs (floored by the within-run variance; within a run, "
        f"blocks of consecutive requests are resampled, {resamples:,} resamples, seed {seed}). With one run "
        "a side the between-run variance is unknown: such rows show the within-run interval and no verdict. "
        "Rows marked (paired) compare the same items on both sides (mean per-item difference, items as the "
        "unit); the A/B arms of one run are compared on blocks of requests.",
        "Many rows, one decision: p is that of \"the difference lies beyond the band\", adjusted: the gated "
        f"rows ({GATED_MARK}, --fail-on-worse's family) by Holm, the others by Benjamini-Hochberg, at α = "
        f"{alpha:g}.",
    ]

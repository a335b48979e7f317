"""From a difference, its standard error and degrees of freedom to a verdict (pure: numbers in, words out).

A verdict is a claim about the *version*, not about two runs, and it must survive an A/A test
(one version compared with itself). Three rules make it so:

1. **A minimum effect that matters** (:class:`MinEffect`, per metric family, overridable per metric
   with ``--min-effect``): a row's *band* is ``max(relative × |baseline|, absolute)``. A latency
   percentile that moved 0.3 % is no regression even when the data are precise enough to see it.
2. **Interval against band** (two one-sided tests): with the ``1 - alpha`` Student-t interval
   ``Δ ± t·se``, the verdict is *better* / *worse* only when the interval lies wholly beyond the band
   on one side, *equivalent* when the ``1 - 2·alpha`` interval lies wholly inside it (TOST), and
   *inconclusive* otherwise. A difference that is exactly zero, or below floating-point resolution
   of the values, is *no change* (two runs whose telemetry was 12.12 on every sample).
3. **Many rows, one decision**: the p-value of "the difference lies beyond the band",
   ``2·P(T > (|Δ| - band)/se)``, is adjusted by Holm over the gated rows (the family
   ``--fail-on-worse`` decides on) and by Benjamini-Hochberg over the other rows; a row whose
   adjusted p is not below alpha is *inconclusive* whatever its raw interval says.

The interval itself (``Δ``, ``se``, ``df``) comes from :mod:`fourfold.reports.replication`, which
treats runs (or, for an A/B arm, users; for paired answers, items) as the unit of replication.
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Sequence
from dataclasses import dataclass

from scipy import special as _special

from fourfold.errors import UsageError

__all__ = ["BETTER", "EQUIVALENT", "FAMILIES", "INCONCLUSIVE", "NA", "NO_CHANGE", "TOO_FEW", "VERDICTS",
           "WORSE", "Decision", "MinEffect", "benjamini_hochberg", "decide", "family_of", "holm",
           "min_effect_for", "parse_min_effects", "t_quantile"]

BETTER, WORSE, EQUIVALENT, INCONCLUSIVE = "better", "worse", "equivalent", "inconclusive"
NO_CHANGE, TOO_FEW, NA = "no change", "too few", "n/a"
VERDICTS = (BETTER, WORSE, EQUIVALENT, INCONCLUSIVE, NO_CHANGE, TOO_FEW, NA)

# |Δ| below this share of the values' magnitude is floating-point noise, not a difference
FP_RESOLUTION = 1e-9


@dataclass(frozen=True)
class MinEffect:
    """The smallest change that matters: ``relative`` (a share of |baseline|) and/or ``absolute``
    (in the row's unit; percentage points for % rows). The band is the larger of the two."""

    relative: float = 0.0
    absolute: float = 0.0

    def band(self, baseline: float | None) -> float:
        rel = self.relative * abs(baseline) if baseline is not None and math.isfinite(baseline) else 0.0
        return max(rel, self.absolute)

    def describe(self, unit: str) -> str:
        parts = []
        if self.relative:
            parts.append(f"{self.relative * 100:g} %")
        if self.absolute:
            parts.append(f"{self.absolute:g} {'points' if unit == '%' else unit}")
        return " or ".join(parts) if parts else "0"


# metric family -> (fnmatch patterns of row keys, units that fall in it, the default minimum effect)
FAMILIES: dict[str, MinEffect] = {
    "latency": MinEffect(relative=0.02, absolute=1.0),      # TTFT/E2E/ITL/TPOT quantiles, jitter: 2 % or 1 ms
    "throughput": MinEffect(relative=0.01),                 # tokens/s, goodput: 1 %
    "rate": MinEffect(absolute=0.5),                        # error/stall/compliance...: 0.5 percentage points
    "quality": MinEffect(absolute=0.01),                    # similarity, char-bigram F1, groundedness: 0.01
    "telemetry": MinEffect(relative=0.02, absolute=1.0),    # server gauges: 2 % or 1 unit
    "count": MinEffect(relative=0.02),                      # rounds per session, pulse frequency: 2 %
}


def family_of(key: str, unit: str) -> str:
    """The family of a row, from its key and unit."""
    if key.startswith("telemetry."):
        return "telemetry"
    if unit == "ms":
        return "latency"
    if unit in ("tok/s", "req/s"):
        return "throughput"
    if unit == "%":
        return "rate"
    if unit in ("cos", "F1"):
        return "quality"
    return "count"


def min_effect_for(key: str, unit: str, overrides: Sequence[tuple[str, MinEffect]] = ()) -> MinEffect:
    """The row's minimum effect: the last override whose pattern matches the key or the family, else
    the family's default."""
    family = family_of(key, unit)
    for pattern, effect in reversed(overrides):
        if fnmatch.fnmatchcase(key, pattern) or pattern == family:
            return effect
    return FAMILIES[family]


def parse_min_effects(texts: Sequence[str]) -> tuple[tuple[str, MinEffect], ...]:
    """``--min-effect`` values: ``KEY=5%`` (relative), ``KEY=1`` / ``KEY=1ms`` / ``KEY=0.5pp`` (absolute,
    in the row's unit), ``KEY=5%+1ms`` (both: the larger wins). KEY is a row key (``ttft_p99``), an
    fnmatch pattern (``ttft_*``) or a family (``latency``, ``throughput``, ``rate``, ``quality``,
    ``telemetry``, ``count``); several may be given, comma-separated or repeated."""
    out = []
    for text in texts:
        for part in (p.strip() for p in text.split(",")):
            if not part:
                continue
            key, sep, value = part.partition("=")
            if not sep or not key.strip() or not value.strip():
                raise UsageError(f"--min-effect {part!r}: expected KEY=VALUE, e.g. ttft_p99=5% or "
                                 "latency=3ms")
            relative = absolute = 0.0
            for piece in value.split("+"):
                piece = piece.strip().lower()
                try:
                    if piece.endswith("%"):
                        relative = float(piece[:-1]) / 100
                        bad = not 0 <= relative < 10
                    else:
                        for suffix in ("ms", "pp", "tok/s", "req/s", "s"):
                            piece = piece.removesuffix(suffix)
                        absolute = float(piece)
                        bad = not 0 <= absolute < 1e12
                except ValueError:
                    bad = True
                if bad:
                    raise UsageError(f"--min-effect {part!r}: {piece!r} is not a share (5%) or an amount "
                                     "(1ms, 0.5pp) >= 0")
            out.append((key.strip(), MinEffect(relative, absolute)))
    return tuple(out)


def t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile of Student's t with ``df`` degrees of freedom (the normal's for df = inf).
    scipy.special's functions are what ``scipy.stats.t.ppf`` / ``norm.ppf`` / ``t.sf`` call, without
    their argument checks (~50x faster: a report computes thousands)."""
    if not math.isfinite(df) or df > 1e6:
        return float(_special.ndtri(p))
    return float(_special.stdtrit(max(df, 1.0), p))


@dataclass(frozen=True)
class Decision:
    verdict: str
    ci_low: float | None
    ci_high: float | None
    p_value: float | None         # of "the difference lies beyond the band" (before any adjustment)


def is_tie(delta: float, baseline: float | None, candidate: float | None) -> bool:
    scale = max(abs(baseline or 0.0), abs(candidate or 0.0), 1e-300)
    return delta == 0 or abs(delta) <= FP_RESOLUTION * scale


def decide(delta: float, se: float, df: float, band: float, better: str, alpha: float,
           baseline: float | None = None, candidate: float | None = None) -> Decision:
    """The verdict of one row (see module docstring); ``better`` is "lower" or "higher"."""
    if is_tie(delta, baseline, candidate):
        return Decision(NO_CHANGE, 0.0, 0.0, 1.0)
    if not math.isfinite(se) or se < 0 or not math.isfinite(delta):
        return Decision(INCONCLUSIVE, None, None, None)
    half = t_quantile(1 - alpha / 2, df) * se
    low, high = delta - half, delta + half
    if se == 0:
        p = 0.0 if abs(delta) > band else 1.0
    else:
        p = (float(min(1.0, 2 * _special.stdtr(max(df, 1.0), -(abs(delta) - band) / se))) if abs(delta) > band
             else 1.0)
    if low > band or high < -band:
        up = low > band
        return Decision(WORSE if up == (better == "lower") else BETTER, low, high, p)
    tost = t_quantile(1 - alpha, df) * se
    if band > 0 and delta - tost > -band and delta + tost < band:
        return Decision(EQUIVALENT, low, high, p)
    return Decision(INCONCLUSIVE, low, high, p)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (family-wise error rate), in the input's order."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [1.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


def benjamini_hochberg(p_values: Sequence[float]) -> list[float]:
    """Benjamini-Hochberg adjusted p-values (false discovery rate), in the input's order."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i], reverse=True)
    adjusted = [1.0] * m
    running = 1.0
    for position, i in enumerate(order):
        rank = m - position
        running = min(running, p_values[i] * m / rank)
        adjusted[i] = min(1.0, running)
    return adjusted

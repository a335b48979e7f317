"""Runs as the unit of replication: one side's value of a metric, its variance and degrees of freedom.

Two runs of one version differ by more than the requests of one run suggest: another request mix
and order, another machine state, warm caches, neighbours. And within a run the requests are not
independent: a queue couples neighbours, a closed-loop user's requests follow each other. So a
side's uncertainty is built in two stages (the summary-statistics form of a two-level random-effects
model, exact for equal run sizes):

- **within a run** (:class:`Spread`): the statistic of each run, and its block-bootstrap replicates.
  A run's requests are cut into *blocks* of consecutive requests (by start time,
  :func:`block_ids`), at least as long as the number of requests in flight at once and ``n^(1/3)``
  long, so requests coupled by a queue fall in one block; whole blocks are resampled. An A/B arm
  of one run uses the same blocks of time (the arms ran side by side, so a drift of the machine hit
  both).
- **between runs** (:func:`combine`): the side's value is the mean of its runs' values; with ``k >= 2``
  runs its variance is ``max(S² / k, mean(within) / k)`` (``S²``: the variance of the run values,
  which holds the between-run *and* the within-run variance; the floor keeps two runs that agree by
  chance from claiming more precision than their requests hold) with ``k - 1`` degrees of freedom.
  With one run its variance is the within-run one only, and :func:`combine` says so
  (``between_known`` False): the comparison then makes no verdict on it, unless the other side has
  runs enough to lend its between-run variance.

:func:`difference` puts two sides together (Welch-Satterthwaite degrees of freedom) and
:func:`runs_needed` turns the variance components into the number of runs a side that detects a
given effect.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from fourfold.measure.histogram import bucket_keys, bucket_values
from fourfold.reports import bootstrap as bs
from fourfold.reports.verdict import t_quantile

__all__ = ["MAX_BLOCKS", "MIN_BLOCKS", "MIN_TAIL", "Difference", "SideValue", "Spread", "block_ids",
           "combine", "difference", "lend_between", "paired_difference", "per_block", "quantile_spread",
           "ratio_spread", "runs_needed", "sorted_with_blocks", "too_few_for_quantile"]

MIN_BLOCKS = 10        # fewer blocks than this: no within-run variance (a bootstrap of 5 blocks says little)
MAX_BLOCKS = 2000      # more requests than this many blocks: longer blocks (bounded work per row)
MIN_TAIL = 10          # a quantile q needs n * min(q, 1 - q) >= MIN_TAIL values (p99: 1,000; p95: 200)


@dataclass
class Spread:
    """One run's statistic and its within-run replicates."""

    value: float | None
    n: int = 0
    replicates: np.ndarray | None = None     # block-bootstrap replicates of value (None: not estimable)
    too_few: str = ""                        # why the value is not fit for a test ("" when it is)
    blocks: int = 0                          # independent blocks behind the replicates
    no_interval: str = ""                    # why there are no replicates, while the value itself is sound
    kept_var: float | None = None            # the replicates' variance kept without them (run history)

    @property
    def within_var(self) -> float | None:
        if self.replicates is None or self.replicates.size < 2:
            return self.kept_var
        return float(np.var(self.replicates, ddof=1))


@dataclass(frozen=True)
class SideValue:
    """One side of a row: the mean over its runs, the variance of that mean, and what stands behind it."""

    value: float
    var: float | None            # of ``value``; None: unknown
    df: float
    runs: int
    between_known: bool          # True with >= 2 runs (or borrowed from the other side)
    between_var: float | None    # per run, beyond the within-run variance (None: unknown)
    within_var: float | None     # per run, mean over runs


@dataclass(frozen=True)
class Difference:
    delta: float
    se: float
    df: float


def too_few_for_quantile(q: float, n: int) -> str:
    need = math.ceil(MIN_TAIL / min(q, 1 - q)) if 0 < q < 1 else 2
    return "" if n >= need else f"p{round(q * 100):d} of {n} values (needs {need})"


def block_ids(started_at: np.ndarray, e2e_ms: np.ndarray) -> np.ndarray:
    """Each request's block (0, 1, ...): requests sorted by start time, cut into blocks of ``L``
    consecutive requests, ``L = max(n^(1/3), requests in flight on average, n / MAX_BLOCKS)``."""
    n = len(started_at)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    started = np.asarray(started_at, dtype=np.float64)
    e2e = np.asarray(e2e_ms, dtype=np.float64)
    span = float(np.nanmax(started) - np.nanmin(started)) if n > 1 else 0.0
    busy = float(np.nansum(np.where(np.isfinite(e2e), e2e, 0.0))) / 1000
    in_flight = busy / span if span > 0 else 1.0
    length = max(1, math.ceil(n ** (1 / 3)), math.ceil(min(in_flight, n) - 1e-9), math.ceil(n / MAX_BLOCKS))
    order = np.argsort(np.where(np.isfinite(started), started, np.inf), kind="stable")
    out = np.empty(n, dtype=np.int64)
    out[order] = np.arange(n) // length
    return out


def sorted_with_blocks(values: np.ndarray, blocks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The finite ``values`` ascending, and the block of each in that order."""
    finite = np.isfinite(values)
    order = np.argsort(values[finite], kind="stable")
    return values[finite][order], blocks[finite][order]


def per_block(blocks: np.ndarray, flags: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Each per-request flag counted per block (the sums :func:`ratio_spread` resamples)."""
    size = int(blocks.max()) + 1 if blocks.size else 0
    return {name: np.bincount(blocks, weights=np.asarray(f, dtype=float), minlength=size)
            for name, f in flags.items()}


def _weights(n_blocks: int, resamples: int, rng: np.random.Generator) -> np.ndarray:
    return rng.multinomial(n_blocks, np.full(n_blocks, 1.0 / n_blocks), size=resamples).astype(np.float64)


def ratio_spread(numerator: np.ndarray, denominator: np.ndarray, resamples: int,
                 rng: np.random.Generator, scale: float = 1.0) -> np.ndarray | None:
    """Block-bootstrap replicates of ``scale * sum(numerator) / sum(denominator)`` from per-block sums
    (a mean: sums and counts; a rate: events and trials); None with fewer than MIN_BLOCKS blocks."""
    numerator, denominator = (np.asarray(numerator, dtype=np.float64),
                              np.asarray(denominator, dtype=np.float64))
    if numerator.size < MIN_BLOCKS:
        return None
    w = _weights(numerator.size, resamples, rng)
    den = w @ denominator
    with np.errstate(invalid="ignore", divide="ignore"):
        out = scale * (w @ numerator) / den
    out = out[np.isfinite(out)]
    return out if out.size >= 2 else None


def quantile_spread(values: np.ndarray, blocks: np.ndarray | None, q: float, resamples: int,
                    rng: np.random.Generator) -> np.ndarray | None:
    """Block-bootstrap replicates of the nearest-rank ``q`` quantile of ``values`` (blocks None: each
    value its own block). Log buckets (<= 0.5 %) carry the resampling; the spread is added to the
    exact quantile."""
    values = np.asarray(values, dtype=np.float64)
    if blocks is None:
        blocks = np.arange(values.size)
    _, cluster = np.unique(blocks, return_inverse=True)
    n_blocks = int(cluster.max()) + 1 if cluster.size else 0
    if n_blocks < MIN_BLOCKS:
        return None
    positive = np.maximum(values, 1e-9)
    uniques, codes = np.unique(bucket_keys(positive), return_inverse=True)
    sub, reps = bs.clustered_quantile_replicates(codes, cluster, n_blocks, bucket_values(uniques), (q,),
                                                 resamples, rng)
    point = bs.quantile(np.sort(values), q)
    return point + (reps[:, 0] - sub[0])


def combine(spreads: Sequence[Spread]) -> SideValue | None:
    """One side from its runs' spreads (see module docstring); None when no run has a value.

    With ``k >= 2`` runs the variance of the mean is ``(between + within) / k``, ``between =
    max(0, S² - within)``: when the runs spread more than their requests explain (``S² > within``) it
    is ``S² / k`` with ``k - 1`` degrees of freedom; otherwise the runs show no variance beyond their
    requests' and it is ``within / k``, with the degrees of freedom of the blocks behind it
    (Satterthwaite's for the two components, the between one truncated at 0)."""
    have = [s for s in spreads if s.value is not None and math.isfinite(s.value)]
    if not have:
        return None
    k = len(have)
    values = np.array([s.value for s in have], dtype=np.float64)
    within = [w for w in (s.within_var for s in have) if w is not None]
    within_mean = float(np.mean(within)) if within else None
    blocks_df = float(sum(max(s.blocks - 1, 1) for s in have if s.within_var is not None)) or math.inf
    value = float(values.mean())
    if k >= 2:
        s2 = float(values.var(ddof=1))
        if within_mean is not None and s2 <= within_mean:
            return SideValue(value, within_mean / k, blocks_df, k, True, 0.0, within_mean)
        between = s2 - within_mean if within_mean is not None else s2
        return SideValue(value, s2 / k, k - 1, k, True, between, within_mean)
    return SideValue(value, within_mean, blocks_df if within_mean is not None else 0.0, 1, False, None,
                     within_mean)


def lend_between(side: SideValue, other: SideValue) -> SideValue:
    """A one-run side with the between-run variance of an other side of >= 2 runs (both versions are
    assumed to vary alike between runs): its variance becomes the other's per-run variance."""
    if side.between_known or not other.between_known or other.var is None:
        return side
    per_run = other.var * other.runs
    var = max(per_run, side.within_var or 0.0) / side.runs
    return SideValue(side.value, var, other.df, side.runs, True, other.between_var, side.within_var)


def difference(baseline: SideValue, candidate: SideValue) -> Difference | None:
    """candidate - baseline, its standard error and Welch-Satterthwaite degrees of freedom."""
    if baseline.var is None or candidate.var is None:
        return None
    vb, vc = baseline.var, candidate.var
    se = math.sqrt(vb + vc)
    parts = sum(v * v / d for v, d in ((vb, baseline.df), (vc, candidate.df)) if v > 0 and math.isfinite(d))
    df = (vb + vc) ** 2 / parts if parts > 0 else math.inf
    return Difference(candidate.value - baseline.value, se, df)


def paired_difference(baseline: Sequence[Spread], candidate: Sequence[Spread]) -> Difference | None:
    """candidate - baseline over matched pairs of runs (the same seed: the same requests in the same order,
    run back to back by ``fourfold repeat``): the mean of the per-pair differences, their variance over
    the pairs with ``k - 1`` degrees of freedom, floored as :func:`combine` floors a side (a pair's
    within-run variance, the blocks' degrees of freedom when the floor holds). The request mix and a
    drift of the machine that both runs of a pair share cancel out. None without two complete pairs."""
    pairs = [(b, c) for b, c in zip(baseline, candidate, strict=True)
             if b.value is not None and c.value is not None
             and math.isfinite(b.value) and math.isfinite(c.value)]
    if len(pairs) < 2 or len(pairs) != len(baseline):
        return None
    k = len(pairs)
    d = np.array([c.value - b.value for b, c in pairs], dtype=np.float64)   # type: ignore[operator]
    s2 = float(d.var(ddof=1))
    within = [w for b, c in pairs for w in (b.within_var, c.within_var) if w is not None]
    floor = 2 * float(np.mean(within)) if len(within) == 2 * k else None     # a pair's: two runs' within
    if floor is not None and s2 <= floor:
        blocks = float(sum(max(x.blocks - 1, 1) for b, c in pairs for x in (b, c))) or math.inf
        return Difference(float(d.mean()), math.sqrt(floor / k), blocks)
    return Difference(float(d.mean()), math.sqrt(s2 / k), k - 1)


def runs_needed(effect: float, band: float, per_run_var: float, alpha: float, power: float = 0.8,
                max_runs: int = 50) -> int | None:
    """The fewest runs a side (both sides alike) for which a true change of ``effect`` gives an interval
    wholly beyond ``band`` with probability ``power``; None when even ``max_runs`` do not."""
    gap = abs(effect) - band
    if gap <= 0 or per_run_var < 0:
        return None
    for k in range(2, max_runs + 1):
        df = 2 * (k - 1)
        se = math.sqrt(2 * per_run_var / k)
        if se == 0 or gap / se >= t_quantile(1 - alpha / 2, df) + t_quantile(power, df):
            return k
    return None

"""The statistics of :mod:`reports.compare`, one run at a time: per metric kind, a run's value and its
within-run block-bootstrap replicates (:class:`reports.replication.Spread`); and the paired
per-item form of the quality rows. The table in compare's docstring says which is which."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from fourfold.measure.histogram import bucket_keys, bucket_values
from fourfold.measure.metrics import ratio
from fourfold.reports import bootstrap as bs
from fourfold.reports.replication import (
    MIN_BLOCKS,
    Spread,
    quantile_spread,
    ratio_spread,
    too_few_for_quantile,
)
from fourfold.reports.rows import (
    ITL_BOOTSTRAP_RECORDS,
    MIN_PAIRED_ITEMS,
    CompareSettings,
    GroupSample,
    PairedItems,
    PairedMeasure,
    SideMeasure,
)

__all__ = ["MIN_RATE_N", "goodput_total", "itl_quantile", "mean_of", "output_tps", "paired_items", "pairs",
           "pct", "penalty", "per_second", "per_user", "pulse_frequency", "quantile_of", "rate",
           "share_unpaired", "telemetry_max", "telemetry_mean", "tokens_total"]

MIN_RATE_N = 20        # a rate from fewer trials is no basis for a test ("too few")
MIN_MEAN_N = 5


def within_resamples(s: CompareSettings) -> int:
    """Replicates of the within-run bootstrap: a variance, not a tail, is read from them."""
    return max(100, s.resamples // 4)


def quantile_of(name: str, q: float) -> SideMeasure:
    """The nearest-rank ``q`` quantile of a per-request array; blocks of the run's requests."""
    def side(g: GroupSample, rng: np.random.Generator, s: CompareSettings) -> Spread | None:
        values = getattr(g, name)
        if not values.size:
            return None
        spread = Spread(bs.quantile(values, q), int(values.size),
                        too_few=too_few_for_quantile(q, values.size))
        if not spread.too_few:
            blocks = g.blocks_of.get(name)
            spread.blocks = int(np.unique(blocks).size) if blocks is not None else int(values.size)
            spread.replicates = quantile_spread(values, blocks, q, within_resamples(s), rng)
        return spread
    return side


def itl_quantile(q: float, per_token: bool = False) -> SideMeasure:
    """A quantile of the pooled chunk gaps (``per_token``: the per-token gaps, measure.tokentiming);
    blocks of consecutive requests of the run's gap sample (the spread scaled by sqrt(m/n) when m of
    n requests were sampled)."""
    def side(g: GroupSample, rng: np.random.Generator, s: CompareSettings) -> Spread | None:
        itl = g.itl_token if per_token else g.itl
        value = itl.quantiles((q,))[0] if itl is not None and itl.count else None
        if itl is None or value is None:
            return None
        spread = Spread(value, itl.count, too_few=too_few_for_quantile(q, itl.count))
        sample = itl.sample[:: max(1, -(-len(itl.sample) // ITL_BOOTSTRAP_RECORDS))]
        length = max(1, math.ceil(len(sample) ** (1 / 3)))
        n_blocks = -(-len(sample) // length)
        if spread.too_few or n_blocks < MIN_BLOCKS:
            return spread
        lengths = np.array([len(gaps) for gaps in sample])
        gaps = np.concatenate(sample).astype(np.float64)
        uniques, codes = np.unique(bucket_keys(np.maximum(gaps, 1e-9)), return_inverse=True)
        cluster = np.repeat(np.arange(len(sample)) // length, lengths)
        sub, reps = bs.clustered_quantile_replicates(codes, cluster, n_blocks, bucket_values(uniques), (q,),
                                                     within_resamples(s), rng)
        scale = math.sqrt(len(sample) / max(itl.records, len(sample)))
        spread.replicates = value + scale * (reps[:, 0] - sub[0])
        spread.blocks = n_blocks
        return spread
    return side


def per_second(total: Callable[[GroupSample], float | None],
               series: Callable[[GroupSample], np.ndarray | None]) -> SideMeasure:
    """A total per wall second (tokens/s, goodput); the spread of the steady 1-s series' mean,
    resampled in blocks of seconds, applied to the total."""
    def side(g: GroupSample, rng: np.random.Generator, s: CompareSettings) -> Spread | None:
        value = total(g)
        if value is None:
            return None
        steady_series = steady(series(g))
        spread = Spread(value, len(steady_series))
        mean = float(steady_series.mean()) if steady_series.size else 0.0
        if steady_series.size and mean > 0:
            length = max(1, math.ceil(steady_series.size ** (1 / 3)))
            ids = np.arange(steady_series.size) // length
            sums, counts = np.bincount(ids, weights=steady_series), np.bincount(ids).astype(float)
            reps = ratio_spread(sums, counts, within_resamples(s), rng)
            spread.replicates = None if reps is None else value * reps / mean
            spread.blocks = sums.size
        return spread
    return side


def steady(series: np.ndarray | None) -> np.ndarray:
    """Per-second counts without the first and last (partial) seconds when there are enough."""
    if series is None:
        return np.zeros(0)
    return series[1:-1] if len(series) >= 5 else series


def effective_size(values: np.ndarray) -> float:
    """``n (1 - r) / (1 + r)`` with ``r`` the lag-1 autocorrelation (>= 0): how many independent samples
    a serially correlated series is worth."""
    n = values.size
    if n < 3:
        return float(n)
    centred = values - values.mean()
    denom = float(centred @ centred)
    if denom == 0:
        return float(n)
    r = min(max(float(centred[1:] @ centred[:-1]) / denom, 0.0), 0.99)
    return n * (1 - r) / (1 + r)


def telemetry_mean(name: str) -> SideMeasure:
    """Mean of a server series without its first and last samples (:func:`steady`); blocks as long as
    the series decorrelates, and at least MIN_BLOCKS effective samples for a within-run interval:
    telemetry samples (one a second) follow each other, so they are worth fewer than their count.
    With fewer the run's mean still counts, as one replicate among a side's runs."""
    def side(g: GroupSample, rng: np.random.Generator, s: CompareSettings) -> Spread | None:
        values = steady(g.telemetry.get(name))
        if not values.size:
            return None
        spread = Spread(float(values.mean()), int(values.size))
        ess = effective_size(values)
        if ess < MIN_BLOCKS:
            spread.no_interval = f"{ess:.0f} effective samples of {values.size} (needs {MIN_BLOCKS})"
            return spread
        length = max(1, math.ceil(values.size / ess))
        ids = np.arange(values.size) // length
        spread.replicates = ratio_spread(np.bincount(ids, weights=values), np.bincount(ids).astype(float),
                                         within_resamples(s), rng)
        spread.blocks = int(ids[-1]) + 1
        return spread
    return side


def telemetry_max(name: str) -> SideMeasure:
    """The largest sample of a server series (every sample): values only, no test."""
    def side(g: GroupSample, rng: np.random.Generator, s: CompareSettings) -> Spread | None:
        values = g.telemetry.get(name, np.zeros(0))
        return Spread(float(values.max()), int(values.size)) if values.size else None
    return side


def cache_hit_planned(g: GroupSample, rng: np.random.Generator, s: CompareSettings) -> Spread | None:
    """The prefix-cache share the side's workload was built for (meta.json), in %: a plan, no test."""
    return Spread(100.0 * g.cache_hit_planned, g.requests) if g.cache_hit_planned is not None else None


def rate(count: str, total: str, scale: float = 100.0) -> SideMeasure:
    """``scale * count / total`` (in %): per-block counts when the sample has them, else a binomial."""
    def side(g: GroupSample, rng: np.random.Generator, s: CompareSettings) -> Spread | None:
        k, n = getattr(g, count), getattr(g, total)
        if not n:
            return None
        spread = Spread(scale * k / n, int(n))
        if n < MIN_RATE_N:
            spread.too_few = f"{n} trials (needs {MIN_RATE_N})"
            return spread
        numer, denom = g.block_counts.get(count), g.block_counts.get(total)
        if numer is not None and denom is not None:
            spread.replicates, spread.blocks = (
                ratio_spread(numer, denom, within_resamples(s), rng, scale), numer.size)
        else:
            spread.replicates, spread.blocks = (
                scale * bs.proportion_replicates(k, n, within_resamples(s), rng), n)
        return spread
    return side


def per_user(b: GroupSample, c: GroupSample) -> bool:
    """Two A/B arms with different numbers of users: their throughput is compared per user."""
    return bool(b.users and c.users and b.users != c.users)


def per_user_sample(g: GroupSample) -> GroupSample:
    users = float(g.users or 1)
    return GroupSample(output_tokens_total=g.output_tokens_total / users, wall_s=g.wall_s,
                       tokens_per_s=g.tokens_per_s / users)


def goodput_total(g: GroupSample) -> float | None:
    return ratio(g.good, g.wall_s) if g.good is not None else None


def tokens_total(g: GroupSample) -> float | None:
    return ratio(g.output_tokens_total, g.wall_s)


output_tps = per_second(tokens_total, lambda g: g.tokens_per_s)


def _mean_spread(values: np.ndarray, rng: np.random.Generator, s: CompareSettings) -> Spread | None:
    if not values.size:
        return None
    spread = Spread(float(values.mean()), int(values.size))
    if values.size < MIN_MEAN_N:
        spread.too_few = f"{values.size} values (needs {MIN_MEAN_N})"
    elif values.size >= MIN_BLOCKS:
        spread.replicates, spread.blocks = (bs.mean_replicates(values, within_resamples(s), rng),
                                            int(values.size))
    return spread


def penalty(g: GroupSample, rng: np.random.Generator, s: CompareSettings) -> Spread | None:
    """Mean TTFT of structured prompts - mean TTFT of plain ones."""
    if g.ttft_plain_ms is None or g.ttft_structured_ms is None:
        return None
    plain, structured = g.ttft_plain_ms, g.ttft_structured_ms
    if plain.size < 2 or structured.size < 2:
        return None
    spread = Spread(float(structured.mean() - plain.mean()), int(plain.size + structured.size))
    if min(plain.size, structured.size) < MIN_MEAN_N:
        spread.too_few = f"{plain.size} plain / {structured.size} structured (needs {MIN_MEAN_N} each)"
    else:
        r = within_resamples(s)
        spread.replicates = bs.mean_replicates(structured, r, rng) - bs.mean_replicates(plain, r, rng)
        spread.blocks = int(min(plain.size, structured.size))
    return spread


def mean_of(name: str, scale: float = 1.0) -> SideMeasure:
    def side(g: GroupSample, rng: np.random.Generator, s: CompareSettings) -> Spread | None:
        return _mean_spread(scale * getattr(g, name), rng, s)
    return side


def pairs(items_b: np.ndarray, values_b: np.ndarray, items_c: np.ndarray,
          values_c: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Per-item means of the items on both sides, in item order, when pairing applies: at least
    ``MIN_PAIRED_ITEMS`` common items holding at least half of each side's answers. Items are
    counted through one dict (a million answers in a fraction of a second)."""
    index: dict[object, int] = {}
    code_b, code_c = item_codes(items_b, index), item_codes(items_c, index)
    count_b, count_c = np.bincount(code_b, minlength=len(index)), np.bincount(code_c, minlength=len(index))
    common = np.flatnonzero((count_b > 0) & (count_c > 0))
    if common.size < MIN_PAIRED_ITEMS:
        return None
    if count_b[common].sum() / code_b.size < 0.5 or count_c[common].sum() / code_c.size < 0.5:
        return None
    names = np.empty(len(index), dtype=object)
    names[:] = list(index)
    common = common[np.argsort(names[common], kind="stable")]
    sums_b = np.bincount(code_b, weights=values_b, minlength=len(index))
    sums_c = np.bincount(code_c, weights=values_c, minlength=len(index))
    return sums_b[common] / count_b[common], sums_c[common] / count_c[common]


def item_codes(items: np.ndarray, index: dict[object, int]) -> np.ndarray:
    """Each item's number in ``index`` (new items are added)."""
    add = index.setdefault
    return np.fromiter((add(item, len(index)) for item in items.tolist()), dtype=np.int64, count=len(items))


def paired_items(values: str, items: str, scale: float = 1.0) -> PairedMeasure:
    """The item-balanced means of the items answered on both sides and their per-item differences;
    None when pairing does not apply (the unpaired side measure is used then)."""
    def measure(b: GroupSample, c: GroupSample) -> PairedItems | None:
        xb, xc = getattr(b, values), getattr(c, values)
        if not xb.size or not xc.size:
            return None
        found = pairs(getattr(b, items), xb, getattr(c, items), xc)
        if found is None:
            return None
        mb, mc = found
        return PairedItems(scale * float(mb.mean()), scale * float(mc.mean()), scale * (mc - mb))
    return measure


def share_unpaired(name: str, below: float | None = None, above: float | None = None) -> SideMeasure:
    """The share (in %) of a 1.0 / 0.0 per-answer array (compliance, fact errors, conflicts); with
    ``below`` / ``above``, of the answers whose value is under / over it (low groundedness, pulsing
    streams)."""
    def side(g: GroupSample, rng: np.random.Generator, s: CompareSettings) -> Spread | None:
        x = getattr(g, name)
        if not x.size:
            return None
        if below is not None:
            x = (x < below).astype(float)
        if above is not None:
            x = (x > above).astype(float)
        return rate("ok", "requests")(GroupSample(ok=int(x.sum()), requests=int(x.size)), rng, s)
    return side


def pulse_frequency(g: GroupSample, rng: np.random.Generator, s: CompareSettings) -> Spread | None:
    """The median pulse frequency of the *pulsing* streams, as summary.json's ``pulse_hz``; a run where
    no stream pulses keeps its zeros (0.0 over all of them)."""
    values = g.pulse_hz[g.pulse_hz > 0]
    return quantile_of("pulse_hz", 0.5)(GroupSample(pulse_hz=values if values.size else g.pulse_hz), rng, s)


def pct(q: float) -> str:
    return f"p{round(q * 100):d}"

"""The estimators of :mod:`reports.compare`: per metric kind, the two sides' values and the bootstrap
replicates of their difference (the table in compare's docstring says which test each uses)."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from fourfold.measure.histogram import bucket_keys, bucket_values
from fourfold.measure.metrics import ratio
from fourfold.reports import bootstrap as bs
from fourfold.reports.sample import (
    ITL_BOOTSTRAP_RECORDS,
    ITL_QUANTILES,
    MIN_PAIRED_ITEMS,
    Estimate,
    GroupSample,
    ItlSample,
    Measure,
    Settings,
)

__all__ = ["goodput_total", "itl_quantile", "mean_of", "means", "output_tps", "pairs", "pct", "penalty", "per_item",
           "per_second", "per_user", "pulse_frequency", "quantile_of", "rate", "share_unpaired", "telemetry_max",
           "telemetry_mean", "tokens_total"]


def quantile_of(name: str, q: float) -> Measure:
    def measure(b: GroupSample, c: GroupSample, rng: np.random.Generator, s: Settings) -> Estimate | None:
        xb, xc = getattr(b, name), getattr(c, name)
        if not xb.size and not xc.size:
            return None
        est = Estimate(bs.quantile(xb, q) if xb.size else None, bs.quantile(xc, q) if xc.size else None,
                       "bootstrap", int(xb.size), int(xc.size))
        if xb.size >= 2 and xc.size >= 2:
            est.deltas = (bs.quantile_replicates(xc, q, s.resamples, rng)
                          - bs.quantile_replicates(xb, q, s.resamples, rng))
        return est
    return measure


def itl_quantile(q: float) -> Measure:
    def measure(b: GroupSample, c: GroupSample, rng: np.random.Generator, s: Settings) -> Estimate | None:
        if b.itl is None and c.itl is None:
            return None
        vb = b.itl.quantiles((q,))[0] if b.itl is not None and b.itl.count else None
        vc = c.itl.quantiles((q,))[0] if c.itl is not None and c.itl.count else None
        est = Estimate(vb, vc, "bootstrap of requests", b.itl.count if b.itl else 0, c.itl.count if c.itl else 0)
        if vb is not None and vc is not None and b.itl and c.itl and len(b.itl.sample) >= 2 and len(c.itl.sample) >= 2:
            index = ITL_QUANTILES.index(q)
            est.deltas = (itl_spread(c.itl, s, rng)[:, index] - itl_spread(b.itl, s, rng)[:, index])
        return est
    return measure


def itl_spread(itl: ItlSample, s: Settings, rng: np.random.Generator) -> np.ndarray:
    """Replicates (resamples, len(ITL_QUANTILES)) of the ITL quantiles of one side:
    ``point + sqrt(m/n) * (replicate - sample statistic)``, m sampled of n requests. Computed once
    per side and settings (every ITL row shares it), from a generator seeded by the sample itself."""
    key = (s.resamples, s.seed)
    cached = itl.replicates.get(key)
    if cached is not None:
        return cached
    del rng     # the rows share one draw per side, so it cannot depend on the row's generator
    sample = itl.sample[:: max(1, -(-len(itl.sample) // ITL_BOOTSTRAP_RECORDS))]
    lengths = np.array([len(g) for g in sample])
    gaps = np.concatenate(sample).astype(np.float64)
    uniques, codes = np.unique(bucket_keys(gaps), return_inverse=True)
    cluster = np.repeat(np.arange(len(sample)), lengths)
    own = bs.row_rng(s.seed, "itl", str(itl.count), repr(itl.min), repr(itl.max))
    sub, reps = bs.clustered_quantile_replicates(codes, cluster, len(sample), bucket_values(uniques), ITL_QUANTILES,
                                                 s.resamples, own)
    scale = math.sqrt(len(sample) / max(itl.records, len(sample)))
    point = np.array(itl.quantiles(ITL_QUANTILES))
    itl.replicates[key] = out = point + scale * (reps - sub)
    return out


def per_second(total: Callable[[GroupSample], float | None], series: Callable[[GroupSample], np.ndarray | None],
                test: str) -> Measure:
    def measure(b: GroupSample, c: GroupSample, rng: np.random.Generator, s: Settings) -> Estimate | None:
        vb, vc = total(b), total(c)
        if vb is None and vc is None:
            return None
        sb, sc = steady(series(b)), steady(series(c))
        est = Estimate(vb, vc, test, len(sb), len(sc))
        if vb is not None and vc is not None and len(sb) >= 3 and len(sc) >= 3:
            est.deltas = ((vc + bs.mean_replicates(sc, s.resamples, rng) - sc.mean())
                          - (vb + bs.mean_replicates(sb, s.resamples, rng) - sb.mean()))
        return est
    return measure


def steady(series: np.ndarray | None) -> np.ndarray:
    """Per-second counts without the first and last (partial) seconds when there are enough."""
    if series is None:
        return np.zeros(0)
    return series[1:-1] if len(series) >= 5 else series


def telemetry_mean(name: str) -> Measure:
    """Mean of a server series (one sample per --sample-interval) without its first and last
    samples (:func:`steady`); interval: bootstrap of the samples (they are serially correlated, so
    the interval is narrower than a block bootstrap's would be)."""
    def measure(b: GroupSample, c: GroupSample, rng: np.random.Generator, s: Settings) -> Estimate | None:
        return means(steady(b.telemetry.get(name)), steady(c.telemetry.get(name)), "bootstrap of samples", rng, s)
    return measure


def telemetry_max(name: str) -> Measure:
    """The largest sample of a server series (every sample): values only, no test (verdict n/a)."""
    def measure(b: GroupSample, c: GroupSample, rng: np.random.Generator, s: Settings) -> Estimate | None:
        xb, xc = b.telemetry.get(name, np.zeros(0)), c.telemetry.get(name, np.zeros(0))
        if not xb.size and not xc.size:
            return None
        return Estimate(float(xb.max()) if xb.size else None, float(xc.max()) if xc.size else None,
                        "values only", int(xb.size), int(xc.size))
    return measure


def rate(count: str, total: str, scale: float = 100.0) -> Measure:
    def measure(b: GroupSample, c: GroupSample, rng: np.random.Generator, s: Settings) -> Estimate | None:
        kb, nb, kc, nc = getattr(b, count), getattr(b, total), getattr(c, count), getattr(c, total)
        if not nb and not nc:
            return None
        est = Estimate(scale * kb / nb if nb else None, scale * kc / nc if nc else None, "", nb, nc)
        if nb and nc:
            est.p_value, est.test = bs.two_proportion_p(kb, nb, kc, nc)
            est.deltas = scale * (bs.proportion_replicates(kc, nc, s.resamples, rng)
                                  - bs.proportion_replicates(kb, nb, s.resamples, rng))
        return est
    return measure


def per_user(b: GroupSample, c: GroupSample) -> bool:
    """Two A/B arms with different numbers of users: their throughput is compared per user."""
    return bool(b.users and c.users and b.users != c.users)


def output_tps(b: GroupSample, c: GroupSample, rng: np.random.Generator, s: Settings) -> Estimate | None:
    """Output tokens/s; per active user when the arms' user counts differ (an arm with 5 % of
    the users is not "worse" for streaming fewer tokens in all)."""
    def scaled(g: GroupSample) -> GroupSample:
        users = float(g.users or 1)
        return GroupSample(output_tokens_total=g.output_tokens_total / users, wall_s=g.wall_s,
                           tokens_per_s=g.tokens_per_s / users)

    measure = per_second(tokens_total, lambda g: g.tokens_per_s, "bootstrap of 1-s intervals")
    if not per_user(b, c):
        return measure(b, c, rng, s)
    est = measure(scaled(b), scaled(c), rng, s)
    if est is not None:
        est.label = f"output tokens/s per user ({b.users} vs {c.users} users)"
    return est


def goodput_total(g: GroupSample) -> float | None:
    return ratio(g.good, g.wall_s) if g.good is not None else None


def tokens_total(g: GroupSample) -> float | None:
    return ratio(g.output_tokens_total, g.wall_s)


def penalty(b: GroupSample, c: GroupSample, rng: np.random.Generator, s: Settings) -> Estimate | None:
    def split(g: GroupSample) -> tuple[np.ndarray, np.ndarray] | None:
        if g.ttft_plain_ms is None or g.ttft_structured_ms is None:
            return None
        if g.ttft_plain_ms.size < 2 or g.ttft_structured_ms.size < 2:
            return None
        return g.ttft_plain_ms, g.ttft_structured_ms

    pb, pc = split(b), split(c)
    if pb is None and pc is None:
        return None
    vb = float(pb[1].mean() - pb[0].mean()) if pb else None
    vc = float(pc[1].mean() - pc[0].mean()) if pc else None
    est = Estimate(vb, vc, "bootstrap of means", sum(map(len, pb)) if pb else 0, sum(map(len, pc)) if pc else 0)
    if pb and pc:
        def reps(pair: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
            return (bs.mean_replicates(pair[1], s.resamples, rng) - bs.mean_replicates(pair[0], s.resamples, rng))
        est.deltas = reps(pc) - reps(pb)
    return est


def means(xb: np.ndarray, xc: np.ndarray, test: str, rng: np.random.Generator, s: Settings) -> Estimate | None:
    """Each side's mean; the difference's replicates by a bootstrap of each side when both have two values."""
    if not xb.size and not xc.size:
        return None
    est = Estimate(float(xb.mean()) if xb.size else None, float(xc.mean()) if xc.size else None,
                   test, int(xb.size), int(xc.size))
    if xb.size >= 2 and xc.size >= 2:
        est.deltas = bs.mean_replicates(xc, s.resamples, rng) - bs.mean_replicates(xb, s.resamples, rng)
    return est


def mean_of(name: str, scale: float = 1.0) -> Measure:
    def measure(b: GroupSample, c: GroupSample, rng: np.random.Generator, s: Settings) -> Estimate | None:
        return means(scale * getattr(b, name), scale * getattr(c, name), "bootstrap of means", rng, s)
    return measure


def pairs(items_b: np.ndarray, values_b: np.ndarray, items_c: np.ndarray,
          values_c: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Per-item means of the items on both sides, in item order, when pairing applies (see module
    docstring). Items are counted through one dict (a million answers in a fraction of a second;
    sorting a million Python strings took seconds)."""
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


def per_item(values: str, items: str, unpaired: Measure, scale: float = 1.0) -> Measure:
    def measure(b: GroupSample, c: GroupSample, rng: np.random.Generator, s: Settings) -> Estimate | None:
        xb, xc = getattr(b, values), getattr(c, values)
        paired = pairs(getattr(b, items), xb, getattr(c, items), xc) if xb.size and xc.size else None
        if paired is None:
            return unpaired(b, c, rng, s)
        mb, mc = paired
        diffs = scale * (mc - mb)
        return Estimate(scale * float(mb.mean()), scale * float(mc.mean()), f"paired, {diffs.size} items",
                        int(xb.size), int(xc.size), deltas=bs.mean_replicates(diffs, s.resamples, rng),
                        p_value=bs.signflip_p(diffs, s.resamples, rng), paired=True)
    return measure


def share_unpaired(name: str, below: float | None = None, above: float | None = None) -> Measure:
    """A two-proportion comparison of a 1.0 / 0.0 per-answer array (compliance, fact errors,
    conflicts); with ``below`` / ``above``, of the share of a per-answer value under / over it (low
    groundedness, pulsing streams)."""
    def measure(b: GroupSample, c: GroupSample, rng: np.random.Generator, s: Settings) -> Estimate | None:
        xb, xc = getattr(b, name), getattr(c, name)
        if not xb.size and not xc.size:
            return None
        if below is not None:
            xb, xc = (xb < below).astype(float), (xc < below).astype(float)
        if above is not None:
            xb, xc = (xb > above).astype(float), (xc > above).astype(float)
        counts = GroupSample(ok=int(xb.sum()), requests=int(xb.size))
        other = GroupSample(ok=int(xc.sum()), requests=int(xc.size))
        return rate("ok", "requests")(counts, other, rng, s)
    return measure


def pulse_frequency(b: GroupSample, c: GroupSample, rng: np.random.Generator, s: Settings) -> Estimate | None:
    """The median pulse frequency of each side's *pulsing* streams, as summary.json's ``pulse_hz``;
    bootstrap of those streams. A side where no stream pulses keeps its zeros (0.0 over all of them)."""
    def pulsing(g: GroupSample) -> GroupSample:
        values = g.pulse_hz[g.pulse_hz > 0]
        return GroupSample(pulse_hz=values if values.size else g.pulse_hz)
    return quantile_of("pulse_hz", 0.5)(pulsing(b), pulsing(c), rng, s)


def pct(q: float) -> str:
    return f"p{round(q * 100):d}"


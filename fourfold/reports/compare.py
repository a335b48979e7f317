"""Baseline vs candidate, metric by metric, with a confidence interval and a verdict (pure numpy).

Input: one :class:`GroupSample` per side for a (level, scenario) group (built from run
directories by :mod:`reports.load`); output: :class:`Row` s. For every metric:

- ``delta = candidate - baseline`` and ``delta_pct = delta / |baseline|`` (rates are in %, so
  their delta is in percentage points);
- the 95% interval of delta: percentile bootstrap, seeded per row (:func:`reports.bootstrap.row_rng`);
- a p-value, and the verdict ``better`` / ``worse`` when ``p < alpha`` (direction-aware: lower
  is better for latencies, error/stall/interruption rates and rounds, higher for throughput,
  goodput, connection reuse, completion and quality), else ``no significant change``; ``n/a``
  when a side has no data.

How each kind of metric is tested:

| metric | statistic | interval and p-value |
|---|---|---|
| TTFT / E2E / TPOT percentiles | nearest-rank quantile of ok requests | bootstrap of requests (exact order-statistic draws) |
| ITL percentiles | quantile of the pooled chunk gaps of ok requests (log buckets, <= 0.5 %) | bootstrap resampling whole requests (at most 1,000 per side, the spread scaled by sqrt(m/n)) |
| output tokens/s, goodput | all tokens (good requests) / wall time | bootstrap of 1-second intervals |
| error, interruption, stall rate, reuse, completion, compliance | proportion | bootstrap CI; two-proportion z-test (Fisher exact for small counts) |
| TTFT structured - plain, rounds, similarity mean, L3 recall@k / precision@k | mean (difference of means) | bootstrap of means |
| similarity p5 | nearest-rank quantile | bootstrap (exact order-statistic draws) |
| similarity mean, compliance, recall / precision@k, same items on both sides | mean per-item difference | paired bootstrap over items; sign-flip permutation p |

Per-item metrics are paired when at least ``MIN_PAIRED_ITEMS`` items were answered on both sides
and those items hold at least half of each side's answers; the table then shows the item-balanced
means of the common items. Each row is tested on its own (no multiple-comparison correction).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from fourfold.measure.histogram import bucket_keys, bucket_quantiles, bucket_values
from fourfold.measure.metrics import ratio
from fourfold.reports import bootstrap as bs

__all__ = ["BETTER", "DEFAULT_SETTINGS", "METRICS", "GroupSample", "ItlSample", "Metric", "Row", "Settings", "compare_groups",
           "pairs"]

MIN_PAIRED_ITEMS = 5
ITL_QUANTILES = (0.50, 0.95, 0.99)
ITL_BOOTSTRAP_RECORDS = 1000     # requests per side resampled for the ITL intervals
BETTER, WORSE, SAME, NA = "better", "worse", "no significant change", "n/a"


@dataclass
class ItlSample:
    """Pooled ITL gaps of a group's ok requests: full log-bucket counts and a sample of requests."""

    keys: np.ndarray            # sorted bucket keys (measure.histogram.bucket_keys)
    counts: np.ndarray
    min: float
    max: float
    records: int                # ok requests with at least one gap (the population of ``sample``)
    sample: list[np.ndarray]    # the gaps of an evenly spread sample of those requests
    replicates: dict[tuple[int, int], np.ndarray] = field(default_factory=dict)   # cache of _itl_spread

    @property
    def count(self) -> int:
        return int(self.counts.sum())

    def quantiles(self, qs: tuple[float, ...]) -> list[float | None]:
        """Nearest-rank quantiles, as LogHistogram gives them (:func:`measure.histogram.bucket_quantiles`)."""
        return bucket_quantiles(self.keys, self.counts, qs, self.min, self.max)


@dataclass
class GroupSample:
    """One side of one group: plain arrays and counts (see reports.load.group_samples). A count or
    rate has the name summary.json gives the same metric (:mod:`fourfold.measure.metric_names`)."""

    requests: int = 0
    ok: int = 0
    failures: int = 0
    interrupted: int = 0
    requests_with_stall: int = 0
    conn_known: int = 0
    conn_reused: int = 0
    ttft_ms: np.ndarray = field(default_factory=lambda: np.zeros(0))     # ok requests, ascending
    e2e_ms: np.ndarray = field(default_factory=lambda: np.zeros(0))
    tpot_ms: np.ndarray = field(default_factory=lambda: np.zeros(0))
    ttft_plain_ms: np.ndarray | None = None       # ok requests by prompt kind (None: kind unknown)
    ttft_structured_ms: np.ndarray | None = None
    itl: ItlSample | None = None
    output_tokens_total: float = 0.0
    wall_s: float | None = None
    tokens_per_s: np.ndarray = field(default_factory=lambda: np.zeros(0))   # per 1-s interval
    good: int | None = None                       # None: no SLO known
    good_per_s: np.ndarray | None = None
    sessions_ended: int = 0
    sessions_completed: int = 0
    rounds: np.ndarray = field(default_factory=lambda: np.zeros(0))
    recall: np.ndarray = field(default_factory=lambda: np.zeros(0))          # L3 recall@k per request
    recall_items: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=object))
    precision: np.ndarray = field(default_factory=lambda: np.zeros(0))       # L3 context precision@k
    precision_items: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=object))
    similarity: np.ndarray = field(default_factory=lambda: np.zeros(0))
    similarity_items: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=object))
    groundedness: np.ndarray = field(default_factory=lambda: np.zeros(0))
    compliant: np.ndarray = field(default_factory=lambda: np.zeros(0))      # 1.0 / 0.0 per judged answer
    compliant_items: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=object))
    fact_error: np.ndarray = field(default_factory=lambda: np.zeros(0))     # L3: 1.0 / 0.0 per fact-checked answer
    fact_error_items: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=object))
    users: int | None = None                      # an A/B arm's users (None: not an arm)
    error_classes: dict[str, int] = field(default_factory=dict)   # failed requests per error class
    jitter_ms: np.ndarray = field(default_factory=lambda: np.zeros(0))      # per ok request (measure.metrics)
    pulse_hz: np.ndarray = field(default_factory=lambda: np.zeros(0))       # per ok request, 0 = smooth


@dataclass(frozen=True)
class Settings:
    resamples: int = 2000
    seed: int = 0
    confidence: float = 0.95
    alpha: float = 0.05


DEFAULT_SETTINGS = Settings()


@dataclass(frozen=True)
class Row:
    group: str
    metric: str
    label: str
    unit: str
    better: str                 # "lower" or "higher"
    baseline: float | None
    candidate: float | None
    delta: float | None
    delta_pct: float | None
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    verdict: str
    test: str
    n_baseline: int
    n_candidate: int
    paired: bool = False


@dataclass
class Estimate:
    baseline: float | None
    candidate: float | None
    test: str
    n_baseline: int
    n_candidate: int
    deltas: np.ndarray | None = None      # bootstrap replicates of the difference
    p_value: float | None = None          # when the test is not the bootstrap's
    paired: bool = False
    label: str = ""                       # the row's label when it is not the metric's


Measure = Callable[[GroupSample, GroupSample, np.random.Generator, Settings], "Estimate | None"]


@dataclass(frozen=True)
class Metric:
    key: str
    label: str
    unit: str
    better: str
    measure: Measure


# ---- estimators ----
def _quantile_of(name: str, q: float) -> Measure:
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


def _itl(q: float) -> Measure:
    def measure(b: GroupSample, c: GroupSample, rng: np.random.Generator, s: Settings) -> Estimate | None:
        if b.itl is None and c.itl is None:
            return None
        vb = b.itl.quantiles((q,))[0] if b.itl is not None and b.itl.count else None
        vc = c.itl.quantiles((q,))[0] if c.itl is not None and c.itl.count else None
        est = Estimate(vb, vc, "bootstrap of requests", b.itl.count if b.itl else 0, c.itl.count if c.itl else 0)
        if vb is not None and vc is not None and b.itl and c.itl and len(b.itl.sample) >= 2 and len(c.itl.sample) >= 2:
            index = ITL_QUANTILES.index(q)
            est.deltas = (_itl_spread(c.itl, s, rng)[:, index] - _itl_spread(b.itl, s, rng)[:, index])
        return est
    return measure


def _itl_spread(itl: ItlSample, s: Settings, rng: np.random.Generator) -> np.ndarray:
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


def _per_second(total: Callable[[GroupSample], float | None], series: Callable[[GroupSample], np.ndarray | None],
                test: str) -> Measure:
    def measure(b: GroupSample, c: GroupSample, rng: np.random.Generator, s: Settings) -> Estimate | None:
        vb, vc = total(b), total(c)
        if vb is None and vc is None:
            return None
        sb, sc = _steady(series(b)), _steady(series(c))
        est = Estimate(vb, vc, test, len(sb), len(sc))
        if vb is not None and vc is not None and len(sb) >= 3 and len(sc) >= 3:
            est.deltas = ((vc + bs.mean_replicates(sc, s.resamples, rng) - sc.mean())
                          - (vb + bs.mean_replicates(sb, s.resamples, rng) - sb.mean()))
        return est
    return measure


def _steady(series: np.ndarray | None) -> np.ndarray:
    """Per-second counts without the first and last (partial) seconds when there are enough."""
    if series is None:
        return np.zeros(0)
    return series[1:-1] if len(series) >= 5 else series


def _rate(count: str, total: str, scale: float = 100.0) -> Measure:
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


def _output_tps(b: GroupSample, c: GroupSample, rng: np.random.Generator, s: Settings) -> Estimate | None:
    """Output tokens/s; per active user when the arms' user counts differ (an arm with 5 % of
    the users is not "worse" for streaming fewer tokens in all)."""
    def scaled(g: GroupSample) -> GroupSample:
        users = float(g.users or 1)
        return GroupSample(output_tokens_total=g.output_tokens_total / users, wall_s=g.wall_s,
                           tokens_per_s=g.tokens_per_s / users)

    measure = _per_second(_tokens_total, lambda g: g.tokens_per_s, "bootstrap of 1-s intervals")
    if not per_user(b, c):
        return measure(b, c, rng, s)
    est = measure(scaled(b), scaled(c), rng, s)
    if est is not None:
        est.label = f"output tokens/s per user ({b.users} vs {c.users} users)"
    return est


def _goodput_total(g: GroupSample) -> float | None:
    return ratio(g.good, g.wall_s) if g.good is not None else None


def _tokens_total(g: GroupSample) -> float | None:
    return ratio(g.output_tokens_total, g.wall_s)


def _penalty(b: GroupSample, c: GroupSample, rng: np.random.Generator, s: Settings) -> Estimate | None:
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


def _mean_of(name: str, scale: float = 1.0) -> Measure:
    def measure(b: GroupSample, c: GroupSample, rng: np.random.Generator, s: Settings) -> Estimate | None:
        xb, xc = scale * getattr(b, name), scale * getattr(c, name)
        if not xb.size and not xc.size:
            return None
        est = Estimate(float(xb.mean()) if xb.size else None, float(xc.mean()) if xc.size else None,
                       "bootstrap of means", int(xb.size), int(xc.size))
        if xb.size >= 2 and xc.size >= 2:
            est.deltas = bs.mean_replicates(xc, s.resamples, rng) - bs.mean_replicates(xb, s.resamples, rng)
        return est
    return measure


def pairs(items_b: np.ndarray, values_b: np.ndarray, items_c: np.ndarray,
          values_c: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Per-item means of the items on both sides, in item order, when pairing applies (see module
    docstring). Items are counted through one dict (a million answers in a fraction of a second;
    sorting a million Python strings took seconds)."""
    index: dict[object, int] = {}
    code_b, code_c = _item_codes(items_b, index), _item_codes(items_c, index)
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


def _item_codes(items: np.ndarray, index: dict[object, int]) -> np.ndarray:
    """Each item's number in ``index`` (new items are added)."""
    add = index.setdefault
    return np.fromiter((add(item, len(index)) for item in items.tolist()), dtype=np.int64, count=len(items))


def _per_item(values: str, items: str, unpaired: Measure, scale: float = 1.0) -> Measure:
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


def _share_unpaired(name: str) -> Measure:
    """A two-proportion comparison of a 1.0 / 0.0 per-answer array (compliance, fact errors)."""
    def measure(b: GroupSample, c: GroupSample, rng: np.random.Generator, s: Settings) -> Estimate | None:
        xb, xc = getattr(b, name), getattr(c, name)
        counts = GroupSample(ok=int(xb.sum()), requests=int(xb.size))
        other = GroupSample(ok=int(xc.sum()), requests=int(xc.size))
        return _rate("ok", "requests")(counts, other, rng, s)
    return measure


def _pct(q: float) -> str:
    return f"p{round(q * 100):d}"


METRICS: tuple[Metric, ...] = (
    *(Metric(f"ttft_{_pct(q)}", f"TTFT {_pct(q)}", "ms", "lower", _quantile_of("ttft_ms", q)) for q in (.5, .95, .99)),
    *(Metric(f"e2e_{_pct(q)}", f"E2E {_pct(q)}", "ms", "lower", _quantile_of("e2e_ms", q)) for q in (.5, .95, .99)),
    *(Metric(f"itl_{_pct(q)}", f"ITL {_pct(q)}", "ms", "lower", _itl(q)) for q in ITL_QUANTILES),
    Metric("tpot_p50", "TPOT p50", "ms", "lower", _quantile_of("tpot_ms", 0.5)),
    Metric("jitter_p50", "stream jitter p50", "ms", "lower", _quantile_of("jitter_ms", 0.5)),
    Metric("pulse_hz", "pulse frequency (0 = smooth)", "Hz", "lower", _quantile_of("pulse_hz", 0.5)),
    Metric("output_tps", "output tokens/s", "tok/s", "higher", _output_tps),
    Metric("goodput_rps", "goodput", "req/s", "higher",
           _per_second(_goodput_total, lambda g: g.good_per_s, "bootstrap of 1-s intervals")),
    Metric("error_rate", "error rate", "%", "lower", _rate("failures", "requests")),
    Metric("interruption_rate", "interruption rate", "%", "lower", _rate("interrupted", "requests")),
    Metric("stall_rate", "stall rate", "%", "lower", _rate("requests_with_stall", "requests")),
    Metric("conn_reuse", "connection reuse", "%", "higher", _rate("conn_reused", "conn_known")),
    Metric("ttft_structured_penalty", "TTFT structured - plain", "ms", "lower", _penalty),
    Metric("completion_rate", "session completion", "%", "higher", _rate("sessions_completed", "sessions_ended")),
    Metric("rounds_mean", "rounds per session", "rounds", "lower", _mean_of("rounds")),
    Metric("recall_at_k", "retrieval recall@k", "%", "higher",
           _per_item("recall", "recall_items", _mean_of("recall", 100.0), scale=100.0)),
    Metric("precision_at_k", "context precision@k", "%", "higher",
           _per_item("precision", "precision_items", _mean_of("precision", 100.0), scale=100.0)),
    Metric("similarity_mean", "similarity mean", "cos", "higher",
           _per_item("similarity", "similarity_items", _mean_of("similarity"))),
    Metric("similarity_p5", "similarity p5", "cos", "higher", _quantile_of("similarity", 0.05)),
    Metric("groundedness_mean", "groundedness mean", "cos", "higher", _mean_of("groundedness")),
    Metric("structure_compliance", "structure compliance", "%", "higher",
           _per_item("compliant", "compliant_items", _share_unpaired("compliant"), scale=100.0)),
    Metric("fact_error_rate", "fact error rate", "%", "lower",
           _per_item("fact_error", "fact_error_items", _share_unpaired("fact_error"), scale=100.0)),
)


def _verdict(delta: float | None, p_value: float | None, better: str, alpha: float) -> str:
    if delta is None or p_value is None:
        return NA
    if p_value >= alpha or delta == 0:
        return SAME
    return BETTER if (delta < 0) == (better == "lower") else WORSE


def error_class_metrics(baseline: GroupSample, candidate: GroupSample) -> list[Metric]:
    """One error-rate row per failure class that occurred on either side (``error_rate.http_5xx``)."""
    def rate_of(name: str) -> Measure:
        def counts(g: GroupSample) -> GroupSample:
            return GroupSample(failures=g.error_classes.get(name, 0), requests=g.requests)
        return lambda b, c, rng, s: _rate("failures", "requests")(counts(b), counts(c), rng, s)
    names = sorted(set(baseline.error_classes) | set(candidate.error_classes))
    return [Metric(f"error_rate.{name}", f"errors: {name}", "%", "lower", rate_of(name)) for name in names]


def compare_groups(group: str, baseline: GroupSample, candidate: GroupSample,
                   settings: Settings = DEFAULT_SETTINGS) -> list[Row]:
    """Every metric of one group with data on a side: METRICS, then :func:`error_class_metrics`."""
    rows = []
    for metric in (*METRICS, *error_class_metrics(baseline, candidate)):
        rng = bs.row_rng(settings.seed, group, metric.key)
        est = metric.measure(baseline, candidate, rng, settings)
        if est is None:
            continue
        delta = None if est.baseline is None or est.candidate is None else est.candidate - est.baseline
        delta_pct = delta / abs(est.baseline) * 100 if delta is not None and est.baseline else None
        ci_low = ci_high = p_value = None
        if est.deltas is not None and delta is not None:
            ci_low, ci_high = bs.percentile_ci(est.deltas, settings.confidence)
            p_value = est.p_value if est.p_value is not None else bs.bootstrap_p(est.deltas)
        test = est.test or "bootstrap"
        rows.append(Row(group, metric.key, est.label or metric.label, metric.unit, metric.better, est.baseline, est.candidate,
                        delta, delta_pct, ci_low, ci_high, p_value,
                        _verdict(delta, p_value, metric.better, settings.alpha), test,
                        est.n_baseline, est.n_candidate, est.paired))
    return rows

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
| error, interruption, stall rate, reuse, completion, compliance, L3 conflict rate, low groundedness (< 0.6), low-confidence answers | proportion | bootstrap CI; two-proportion z-test (Fisher exact for small counts) |
| TTFT structured - plain, rounds, similarity mean, char-bigram F1 mean, L3 recall@k / precision@k | mean (difference of means) | bootstrap of means |
| server telemetry mean (`telemetry.<source>.<metric>.mean`) | mean of the samples, first and last dropped | bootstrap of samples (serially correlated: the interval is optimistic); the verdict is descriptive |
| server telemetry max | largest sample | values only: no test, verdict n/a |
| similarity p5 | nearest-rank quantile | bootstrap (exact order-statistic draws) |
| similarity mean, char-bigram F1 mean, compliance, recall / precision@k, same items on both sides | mean per-item difference | paired bootstrap over items; sign-flip permutation p |

Per-item metrics are paired when at least ``MIN_PAIRED_ITEMS`` items were answered on both sides
and those items hold at least half of each side's answers; the table then shows the item-balanced
means of the common items. Each row is tested on its own (no multiple-comparison correction).
"""
from __future__ import annotations

from fourfold.fingerprint.rag import LOW_GROUNDEDNESS
from fourfold.reports import bootstrap as bs
from fourfold.reports import telemetry as tm
from fourfold.reports.estimators import (
    goodput_total,
    itl_quantile,
    mean_of,
    output_tps,
    pairs,
    pct,
    penalty,
    per_item,
    per_second,
    pulse_frequency,
    quantile_of,
    rate,
    share_unpaired,
    telemetry_max,
    telemetry_mean,
)
from fourfold.reports.sample import (
    BETTER,
    DEFAULT_SETTINGS,
    ITL_QUANTILES,
    NA,
    SAME,
    WORSE,
    Estimate,
    GroupSample,
    ItlSample,
    Measure,
    Metric,
    Row,
    Settings,
)

__all__ = ["BETTER", "DEFAULT_SETTINGS", "METRICS", "NA", "SAME", "WORSE", "Estimate", "GroupSample", "ItlSample",
           "Metric", "Row", "Settings", "compare_groups", "pairs",
           "telemetry_metrics"]


METRICS: tuple[Metric, ...] = (
    *(Metric(f"ttft_{pct(q)}", f"TTFT {pct(q)}", "ms", "lower", quantile_of("ttft_ms", q)) for q in (.5, .95, .99)),
    *(Metric(f"e2e_{pct(q)}", f"E2E {pct(q)}", "ms", "lower", quantile_of("e2e_ms", q)) for q in (.5, .95, .99)),
    *(Metric(f"itl_{pct(q)}", f"ITL {pct(q)}", "ms", "lower", itl_quantile(q)) for q in ITL_QUANTILES),
    Metric("tpot_p50", "TPOT p50", "ms", "lower", quantile_of("tpot_ms", 0.5)),
    Metric("jitter_p50", "stream jitter p50", "ms", "lower", quantile_of("jitter_ms", 0.5)),
    Metric("pulse_hz", "pulse frequency of the pulsing streams", "Hz", "lower", pulse_frequency),
    Metric("pulse_share", "streams that pulse", "%", "lower", share_unpaired("pulse_hz", above=0.0)),
    Metric("output_tps", "output tokens/s", "tok/s", "higher", output_tps),
    Metric("goodput_rps", "goodput", "req/s", "higher",
           per_second(goodput_total, lambda g: g.good_per_s, "bootstrap of 1-s intervals")),
    Metric("error_rate", "error rate", "%", "lower", rate("failures", "requests")),
    Metric("interruption_rate", "interruption rate", "%", "lower", rate("interrupted", "requests")),
    Metric("stall_rate", "stall rate", "%", "lower", rate("requests_with_stall", "requests")),
    Metric("conn_reuse", "connection reuse", "%", "higher", rate("conn_reused", "conn_known")),
    Metric("ttft_structured_penalty", "TTFT structured - plain", "ms", "lower", penalty),
    Metric("completion_rate", "session completion", "%", "higher", rate("sessions_completed", "sessions_ended")),
    Metric("rounds_mean", "rounds per session", "rounds", "lower", mean_of("rounds")),
    Metric("recall_at_k", "retrieval recall@k", "%", "higher",
           per_item("recall", "recall_items", mean_of("recall", 100.0), scale=100.0)),
    Metric("precision_at_k", "context precision@k", "%", "higher",
           per_item("precision", "precision_items", mean_of("precision", 100.0), scale=100.0)),
    Metric("conflict_rate", "retrieval conflict rate", "%", "lower", share_unpaired("conflict")),
    Metric("similarity_mean", "similarity mean", "cos", "higher",
           per_item("similarity", "similarity_items", mean_of("similarity"))),
    Metric("similarity_p5", "similarity p5", "cos", "higher", quantile_of("similarity", 0.05)),
    Metric("low_confidence_share", "low-confidence answers (mostly [UNK])", "%", "lower",
           share_unpaired("low_confidence")),
    Metric("char_f1_mean", "char-bigram overlap mean", "F1", "higher",
           per_item("char_f1", "char_f1_items", mean_of("char_f1"))),
    Metric("groundedness_mean", "groundedness mean", "cos", "higher", mean_of("groundedness")),
    Metric("low_groundedness_rate", f"low groundedness (< {LOW_GROUNDEDNESS})", "%", "lower",
           share_unpaired("groundedness", below=LOW_GROUNDEDNESS)),
    Metric("structure_compliance", "structure compliance", "%", "higher",
           per_item("compliant", "compliant_items", share_unpaired("compliant"), scale=100.0)),
    Metric("fact_error_rate", "fact error rate", "%", "lower",
           per_item("fact_error", "fact_error_items", share_unpaired("fact_error"), scale=100.0)),
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
        return lambda b, c, rng, s: rate("failures", "requests")(counts(b), counts(c), rng, s)
    names = sorted(set(baseline.error_classes) | set(candidate.error_classes))
    return [Metric(f"error_rate.{name}", f"errors: {name}", "%", "lower", rate_of(name)) for name in names]


def telemetry_metrics(baseline: GroupSample, candidate: GroupSample) -> list[Metric]:
    """Two rows per server gauge either side sampled (``telemetry.server.mem_bw_util_pct.mean`` and
    ``.max``): the mean of the steady samples, tested; the max, values only (verdict n/a)."""
    return [Metric(f"telemetry.{name}.{stat}", tm.label_of(name, stat), tm.unit_of(name), tm.better_of(name),
                   (telemetry_mean if stat == "mean" else telemetry_max)(name))
            for name in tm.gauge_names(baseline.telemetry, candidate.telemetry) for stat in ("mean", "max")]


def compare_groups(group: str, baseline: GroupSample, candidate: GroupSample,
                   settings: Settings = DEFAULT_SETTINGS) -> list[Row]:
    """Every metric of one group with data on a side: METRICS, then :func:`error_class_metrics`,
    then :func:`telemetry_metrics`."""
    rows = []
    for metric in (*METRICS, *error_class_metrics(baseline, candidate), *telemetry_metrics(baseline, candidate)):
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

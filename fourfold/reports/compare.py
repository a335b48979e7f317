"""Baseline vs candidate, metric by metric: the value, an interval of the difference and a verdict.

Input: the runs of each side of one (level, scenario) group, one :class:`GroupSample` per run (built
from run directories by :mod:`reports.load`); output: :class:`Row` s. For every metric:

- each run's statistic and its within-run block-bootstrap replicates (:mod:`reports.estimators`);
- each side's value: the mean over its runs, with the variance of a two-level design in which
  *runs* are the replicates (:mod:`reports.replication`); ``delta = candidate - baseline``,
  ``delta_pct = delta / |baseline|`` (rates are in %, so their delta is in percentage points);
- the ``1 - alpha`` Student-t interval of delta (Welch-Satterthwaite degrees of freedom) and the
  verdict against the metric's minimum effect (:mod:`reports.verdict`): *better* / *worse* beyond
  the band, *equivalent* inside it, *inconclusive*, *no change* (an exact tie), *too few* (not data
  enough for the statistic) or *n/a* (a side has no data, or the row is values only).

What a row rests on (its unit of replication):

| rows | unit | verdict with one run a side |
|---|---|---|
| latency percentiles, ITL, TPOT, jitter, pulses, tokens/s, goodput, rates, means, telemetry means |
  runs (two-level: between runs, blocks within a run) | none: the between-run variance is unknown (a side of
  >= 2 runs lends its own to a lone run) |
| the same rows between the two A/B arms of one run (``--variants``) | blocks of time within the run
  (the arms ran side by side) | yes |
| similarity, char-bigram F1, compliance, recall / precision@k, fact errors, same items on both sides |
  items (mean per-item difference, paired) | yes |
| server telemetry max, answers that reasoned | values only | never |

How each statistic is computed on one run:

| metric | statistic | within-run replicates |
|---|---|---|
| TTFT / TTFO / E2E / TPOT / reasoning time / answer tokens/s percentiles | nearest-rank quantile of ok
  requests (TTFO: those with an answer token; reasoning: those that reasoned first) | blocks of
  consecutive requests (log buckets, <= 0.5 %) |
| ITL percentiles | quantile of the pooled chunk gaps of ok requests | blocks of consecutive sampled
  requests |
| output tokens/s, goodput | all tokens (good requests) / wall time | blocks of 1-s intervals |
| error, interruption, stall rate, reuse, completion, compliance, L3 conflict rate, low groundedness (< 0.6),
  low-confidence answers, answers that reasoned | proportion | blocks of requests (counts per block) |
| prompt tokens from the prefix cache | cached / prompt tokens of the requests the server said it for |
  blocks of requests (token sums per block) |
| TTFT structured - plain, rounds, similarity mean, char-bigram F1 mean, L3 recall@k / precision@k |
  mean | bootstrap of values |
| server telemetry mean (``telemetry.<source>.<metric>.mean``) | mean of the samples, first and last dropped |
  blocks as long as the series decorrelates; < 10 effective samples: too few |

A statistic needs data enough for itself: a quantile ``q`` at least ``10 / min(q, 1 - q)`` values
(p99: 1,000), a rate 20 trials. Rows are tested one by one here; :func:`adjust` then corrects the
gated rows by Holm and the others by Benjamini-Hochberg (``build_report`` calls it per comparison).
The TTFO and reasoning rows (``REASONING_ROWS``) are shown only where an answer of either side reasoned,
the per-token ITL rows (``TOKEN_ROWS``) where a chunk carried several tokens, the token count rows
(``DISCREPANCY_ROWS``) where a request's two counts disagreed.
"""
from __future__ import annotations

import dataclasses
import fnmatch
import math
from collections.abc import Sequence

import numpy as np

from fourfold.fingerprint.rag import LOW_GROUNDEDNESS
from fourfold.reports import bootstrap as bs
from fourfold.reports import telemetry as tm
from fourfold.reports.costrows import COST_METRICS
from fourfold.reports.embedrows import EMBED_METRICS, EMBED_ROWS
from fourfold.reports.estimators import (
    cache_hit_planned,
    goodput_total,
    itl_quantile,
    mean_of,
    output_tps,
    paired_items,
    pairs,
    pct,
    penalty,
    per_second,
    per_user,
    per_user_sample,
    pulse_frequency,
    quantile_of,
    rate,
    share_unpaired,
    telemetry_max,
    telemetry_mean,
)
from fourfold.reports.phaserows import PHASE_METRICS
from fourfold.reports.replication import (
    SideValue,
    Spread,
    combine,
    difference,
    lend_between,
    paired_difference,
    runs_needed,
)
from fourfold.reports.rows import (
    BETTER,
    DEFAULT_GATE,
    DEFAULT_SETTINGS,
    EQUIVALENT,
    INCONCLUSIVE,
    ITL_QUANTILES,
    NA,
    NO_CHANGE,
    TOO_FEW,
    WORSE,
    CompareSettings,
    GroupSample,
    ItlSample,
    Metric,
    PairedItems,
    Row,
    SideMeasure,
)
from fourfold.reports.tenants import is_tenant_group
from fourfold.reports.verdict import Decision, benjamini_hochberg, decide, holm, min_effect_for

__all__ = ["BETTER", "DEFAULT_GATE", "DEFAULT_SETTINGS", "DISCREPANCY_ROWS", "EQUIVALENT", "INCONCLUSIVE",
           "METRICS", "NA", "NO_CHANGE", "REASONING_ROWS", "TOKEN_ROWS", "TOOL_ROWS", "TOO_FEW", "WORSE",
           "GroupSample", "ItlSample", "Metric", "Row", "CompareSettings", "adjust", "compare_groups",
           "error_class_metrics", "group_flags", "hidden", "is_gated", "pairs", "row_of_spreads",
           "telemetry_metrics"]

# rows shown only for a group where an answer of either side reasoned (summary.json has them always)
REASONING_ROWS = ("ttfo_p50", "ttfo_p95", "ttfo_p99", "reasoning_p50", "reasoning_share", "answer_tps_p50",
                  "reasoning_tps_p50")
# ... where a chunk of either side carried several tokens (else per-token ITL is ITL), and where the two
# token counts of a request of either side disagreed
TOKEN_ROWS = tuple(f"itl_token_{pct(q)}" for q in ITL_QUANTILES) + ("multi_token_chunk_share",)
DISCREPANCY_ROWS = ("token_discrepancy_share", "token_count_ratio")
TOOL_ROWS = ("tool_call_share", "tool_call_valid_share")      # ... where an answer of either side made a call
ONE_RUN = "1 run a side: between-run variance unknown, no verdict (run >= 2 a side: fourfold repeat)"
# the effect the "runs needed" figure is for: 5 bands (TTFT 10 %, tokens/s 5 %, rates 2.5 points)
DETECT_BANDS = 5


METRICS: tuple[Metric, ...] = (
    *(Metric(f"ttft_{pct(q)}", f"TTFT {pct(q)}", "ms", "lower", quantile_of("ttft_ms", q))
      for q in (.5, .95, .99)),
    *(Metric(f"ttfo_{pct(q)}", f"TTFO {pct(q)} (first answer token)", "ms", "lower",
             quantile_of("ttfo_ms", q)) for q in (.5, .95, .99)),
    *(Metric(f"e2e_{pct(q)}", f"E2E {pct(q)}", "ms", "lower", quantile_of("e2e_ms", q))
      for q in (.5, .95, .99)),
    Metric("reasoning_p50", "reasoning time p50", "ms", "lower", quantile_of("reasoning_ms", 0.5)),
    Metric("reasoning_share", "answers that reasoned", "%", "lower", rate("requests_reasoning", "ok"),
           descriptive=True),
    Metric("answer_tps_p50", "answer tokens/s p50 (per request)", "tok/s", "higher",
           quantile_of("answer_tps", 0.5)),
    Metric("reasoning_tps_p50", "reasoning tokens/s p50 (per request)", "tok/s", "higher",
           quantile_of("reasoning_tps", 0.5)),
    Metric("cache_hit_share", "prompt tokens from the prefix cache", "%", "higher",
           rate("cached_tokens_total", "cache_input_tokens")),
    Metric("cache_hit_planned", "prompt tokens a prefix cache could serve (the workload's plan)", "%",
           "higher", cache_hit_planned, descriptive=True),
    *(Metric(f"itl_{pct(q)}", f"ITL {pct(q)}", "ms", "lower", itl_quantile(q)) for q in ITL_QUANTILES),
    *(Metric(f"itl_token_{pct(q)}", f"ITL {pct(q)} per token", "ms", "lower", itl_quantile(q, per_token=True))
      for q in ITL_QUANTILES),
    Metric("multi_token_chunk_share", "chunks carrying several tokens", "%", "lower",
           rate("multi_token_chunks", "content_chunks"), descriptive=True),
    Metric("tool_call_share", "answers that were tool calls", "%", "lower", rate("requests_tool_calls", "ok"),
           descriptive=True),
    Metric("tool_call_valid_share", "tool calls that fit the offered tools", "%", "higher",
           rate("tool_calls_valid", "tool_calls_judged")),
    Metric("token_discrepancy_share", "token count: server vs client > 10 % apart", "%", "lower",
           rate("tokens_discrepant", "tokens_compared")),
    Metric("token_count_ratio", "token count: server / client", "%", "lower",
           rate("tokens_server_total", "tokens_client_total"), descriptive=True),
    Metric("tpot_p50", "TPOT p50", "ms", "lower", quantile_of("tpot_ms", 0.5)),
    Metric("jitter_p50", "stream jitter p50", "ms", "lower", quantile_of("jitter_ms", 0.5)),
    Metric("pulse_hz", "pulse frequency of the pulsing streams", "Hz", "lower", pulse_frequency),
    Metric("pulse_share", "streams that pulse", "%", "lower", share_unpaired("pulse_hz", above=0.0)),
    Metric("output_tps", "output tokens/s", "tok/s", "higher", output_tps),
    *EMBED_METRICS,                               # embeddings / rerank groups only (reports.embedrows)
    *COST_METRICS,                                # where a side has prices or power (reports.costrows)
    Metric("goodput_rps", "goodput", "req/s", "higher", per_second(goodput_total, lambda g: g.good_per_s)),
    Metric("error_rate", "error rate", "%", "lower", rate("failures", "requests")),
    Metric("interruption_rate", "interruption rate", "%", "lower", rate("interrupted", "requests")),
    Metric("stall_rate", "stall rate", "%", "lower", rate("requests_with_stall", "requests")),
    Metric("conn_reuse", "connection reuse", "%", "higher", rate("conn_reused", "conn_known")),
    *PHASE_METRICS,                               # L2 groups (reports.phaserows)
    Metric("ttft_structured_penalty", "TTFT structured - plain", "ms", "lower", penalty),
    Metric("completion_rate", "session completion", "%", "higher",
           rate("sessions_completed", "sessions_ended")),
    Metric("rounds_mean", "rounds per session", "rounds", "lower", mean_of("rounds")),
    Metric("tool_calls_per_session", "tool calls per session", "calls", "lower",
           mean_of("tool_calls_per_session")),
    Metric("recall_at_k", "retrieval recall@k", "%", "higher", mean_of("recall", 100.0),
           paired_items("recall", "recall_items", 100.0)),
    Metric("precision_at_k", "context precision@k", "%", "higher", mean_of("precision", 100.0),
           paired_items("precision", "precision_items", 100.0)),
    Metric("conflict_rate", "retrieval conflict rate", "%", "lower", share_unpaired("conflict")),
    Metric("similarity_mean", "similarity mean", "cos", "higher", mean_of("similarity"),
           paired_items("similarity", "similarity_items")),
    Metric("similarity_p5", "similarity p5", "cos", "higher", quantile_of("similarity", 0.05)),
    Metric("low_confidence_share", "low-confidence answers (mostly [UNK])", "%", "lower",
           share_unpaired("low_confidence")),
    Metric("char_f1_mean", "char-bigram overlap mean", "F1", "higher", mean_of("char_f1"),
           paired_items("char_f1", "char_f1_items")),
    Metric("groundedness_mean", "groundedness mean", "cos", "higher", mean_of("groundedness")),
    Metric("low_groundedness_rate", f"low groundedness (< {LOW_GROUNDEDNESS})", "%", "lower",
           share_unpaired("groundedness", below=LOW_GROUNDEDNESS)),
    Metric("structure_compliance", "structure compliance", "%", "higher", share_unpaired("compliant"),
           paired_items("compliant", "compliant_items", 100.0)),
    Metric("fact_error_rate", "fact error rate", "%", "lower", share_unpaired("fact_error"),
           paired_items("fact_error", "fact_error_items", 100.0)),
)


def error_class_metrics(baseline: Sequence[GroupSample], candidate: Sequence[GroupSample]) -> list[Metric]:
    """One error-rate row per failure class that occurred on either side (``error_rate.http_5xx``)."""
    def rate_of(name: str) -> SideMeasure:
        def side(g: GroupSample, rng: np.random.Generator, s: CompareSettings) -> Spread | None:
            counts = GroupSample(failures=g.error_classes.get(name, 0), requests=g.requests)
            if "requests" in g.block_counts:
                counts.block_counts = {"requests": g.block_counts["requests"],
                                       "failures": g.block_counts.get(
                                           f"error.{name}", np.zeros_like(g.block_counts["requests"]))}
            return rate("failures", "requests")(counts, rng, s)
        return side
    names = sorted({name for g in (*baseline, *candidate) for name in g.error_classes})
    return [Metric(f"error_rate.{name}", f"errors: {name}", "%", "lower", rate_of(name)) for name in names]


def telemetry_metrics(baseline: Sequence[GroupSample], candidate: Sequence[GroupSample]) -> list[Metric]:
    """Two rows per server gauge either side sampled (``telemetry.server.mem_bw_util_pct.mean`` and
    ``.max``): the mean of the steady samples, tested; the max, values only (verdict n/a)."""
    names = tm.gauge_names(*(g.telemetry for g in (*baseline, *candidate)))
    return [Metric(f"telemetry.{name}.{stat}", tm.label_of(name, stat), tm.unit_of(name), tm.better_of(name),
                   (telemetry_mean if stat == "mean" else telemetry_max)(name), descriptive=stat == "max")
            for name in names for stat in ("mean", "max")]


def is_gated(key: str, settings: CompareSettings) -> bool:
    return any(fnmatch.fnmatchcase(key, pattern) for pattern in settings.gate)


def _runs(side: GroupSample | Sequence[GroupSample]) -> list[GroupSample]:
    return [side] if isinstance(side, GroupSample) else list(side)


def _pooled_items(runs: list[GroupSample]) -> GroupSample:
    """The per-answer arrays of a side's runs together (for the paired rows)."""
    if len(runs) == 1:
        return runs[0]
    pooled = GroupSample()
    for name in ("recall", "precision", "similarity", "char_f1", "compliant", "fact_error"):
        setattr(pooled, name, np.concatenate([getattr(g, name) for g in runs]))
        setattr(pooled, f"{name}_items", np.concatenate([getattr(g, f"{name}_items") for g in runs]))
    return pooled


def group_flags(samples: Sequence[GroupSample]) -> frozenset[str]:
    """What the samples hold that decides which rows :func:`hidden` leaves out: ``reasoned`` (an answer
    reasoned), ``multi`` (a chunk carried several tokens), ``discrepant`` (a request's two token counts
    disagreed), ``called`` (an answer was a tool call), ``embed`` (embeddings / rerank: inputs, no output
    tokens)."""
    found = {"reasoned": any(g.requests_reasoning for g in samples),
             "multi": any(g.multi_token_chunks for g in samples),
             "discrepant": any(g.tokens_discrepant for g in samples),
             "called": any(g.tool_calls for g in samples), "embed": any(g.inputs_total for g in samples)}
    return frozenset(name for name, present in found.items() if present)


def hidden(key: str, flags: frozenset[str]) -> bool:
    """A row left out of a group with these :func:`group_flags`: e.g. no answer reasoned: TTFO is TTFT,
    the reasoning rows have nothing to say."""
    embed = "embed" in flags
    if (key in EMBED_ROWS) != embed and (key in EMBED_ROWS or key == "output_tps"):
        return True
    return ((key in REASONING_ROWS and "reasoned" not in flags)
            or (key in TOKEN_ROWS and "multi" not in flags)
            or (key in DISCREPANCY_ROWS and "discrepant" not in flags)
            or (key in TOOL_ROWS and "called" not in flags))


def compare_groups(group: str, baseline: GroupSample | Sequence[GroupSample],
                   candidate: GroupSample | Sequence[GroupSample],
                   settings: CompareSettings = DEFAULT_SETTINGS, matched: bool = False) -> list[Row]:
    """Every metric of one group with data on a side: METRICS, then :func:`error_class_metrics`, then
    :func:`telemetry_metrics`. Each side is one run's sample or a list of them (one per run);
    ``matched``: the two lists are matched pairs of runs, in pair order (the same seed, run back to
    back: :func:`fourfold.reports.replication.paired_difference`). The verdicts are those of each row
    alone (:func:`adjust` corrects them for the number of rows)."""
    base, cand = _runs(baseline), _runs(candidate)
    if not base:
        base = [GroupSample()]
    if not cand:
        cand = [GroupSample()]
    rows = []
    flags = group_flags((*base, *cand))
    metrics = (*METRICS, *error_class_metrics(base, cand), *telemetry_metrics(base, cand))
    for metric in metrics:
        if hidden(metric.key, flags):
            continue
        row = _row(group, metric, base, cand, bs.row_rng(settings.seed, group, metric.key), settings, matched)
        if row is not None:
            rows.append(row)
    return rows


def _row(group: str, metric: Metric, base: list[GroupSample], cand: list[GroupSample],
         rng: np.random.Generator, s: CompareSettings, matched: bool = False) -> Row | None:
    label = metric.label
    if metric.key == "output_tps" and len(base) == len(cand) == 1 and per_user(base[0], cand[0]):
        label = f"output tokens/s per user ({base[0].users} vs {cand[0].users} users)"
        base, cand = [per_user_sample(base[0])], [per_user_sample(cand[0])]
    if metric.paired is not None:
        paired = metric.paired(_pooled_items(base), _pooled_items(cand))
        if paired is not None:
            return _paired_row(group, metric, paired, s, len(base), len(cand))
    spreads_b = [x for x in (metric.side(g, rng, s) for g in base) if x is not None]
    spreads_c = [x for x in (metric.side(g, rng, s) for g in cand) if x is not None]
    arms = all(g.unit == "arm" for g in (*base, *cand))
    return row_of_spreads(group, metric, spreads_b, spreads_c, s, label=label, arms=arms, matched=matched)


def row_of_spreads(group: str, metric: Metric, spreads_b: list[Spread], spreads_c: list[Spread],
                   s: CompareSettings, *, label: str | None = None, arms: bool = False,
                   matched: bool = False) -> Row | None:
    """A row from each side's runs' spreads (one per run; ``arms``: the two A/B arms of one run); None
    when neither side has one. ``fourfold history check`` calls it with the spreads a history keeps."""
    label = label or metric.label
    if not spreads_b and not spreads_c:
        return None
    side_b, side_c = combine(spreads_b), combine(spreads_c)
    vb = side_b.value if side_b else None
    vc = side_c.value if side_c else None
    band = min_effect_for(metric.key, metric.unit, s.min_effects).band(vb)
    n_b, n_c = sum(x.n for x in spreads_b), sum(x.n for x in spreads_c)

    def row(decision: Decision, test: str, why: str = "", per_run: float | None = None) -> Row:
        delta = None if vb is None or vc is None else vc - vb
        delta_pct = delta / abs(vb) * 100 if delta is not None and vb else None
        return Row(group, metric.key, label, metric.unit, metric.better, vb, vc, delta, delta_pct,
                   decision.ci_low, decision.ci_high, decision.p_value, decision.verdict, test, n_b, n_c,
                   band=band, runs_baseline=len(spreads_b), runs_candidate=len(spreads_c), why=why,
                   # a --mix tenant's own rows have verdicts but decide no --fail-on-worse (no Holm family)
                   gated=is_gated(metric.key, s) and not (metric.descriptive or is_tenant_group(group)),
                   per_run_var=per_run)

    nothing = Decision(NA, None, None, None)
    if side_b is None or side_c is None:
        return row(nothing, "", "a side has no data")
    if metric.descriptive:
        return row(nothing, "values only")
    test = _test_name(side_b, side_c, arms)
    delta = side_c.value - side_b.value
    tie = decide(delta, 0.0, math.inf, band, metric.better, s.alpha, side_b.value, side_c.value)
    if tie.verdict == NO_CHANGE:
        return row(tie, test, "the same value on both sides")
    few = next((x.too_few for x in (*spreads_b, *spreads_c) if x.too_few), "")
    if few:
        return row(Decision(TOO_FEW, None, None, None), test, few)
    side_b, side_c = lend_between(side_b, side_c), lend_between(side_c, side_b)
    by_pair = (paired_difference(spreads_b, spreads_c) if matched and len(spreads_b) == len(spreads_c)
               else None)
    if by_pair is not None:
        test = f"{len(spreads_b)} matched pairs of runs: paired t"
    diff = by_pair or difference(side_b, side_c)
    if diff is None:
        why = next((x.no_interval for x in (*spreads_b, *spreads_c) if x.no_interval), "")
        return row(Decision(TOO_FEW, None, None, None), test,
                   why or "too few blocks of requests for an interval")
    decision = decide(diff.delta, diff.se, diff.df, band, metric.better, s.alpha, side_b.value, side_c.value)
    # a run's variance, between + within (a lone run: within only, a lower bound): for adjust's runs_needed
    per_run = None if arms else float(np.mean([(x.var or 0.0) * x.runs for x in (side_b, side_c)]))
    if not arms and not (side_b.between_known and side_c.between_known):
        return row(Decision(INCONCLUSIVE, decision.ci_low, decision.ci_high, None), test, ONE_RUN, per_run)
    return row(decision, test, per_run=per_run)


def _test_name(b: SideValue, c: SideValue, arms: bool) -> str:
    if arms:
        return "A/B arms of one run: blocks of requests"
    if b.runs == c.runs == 1:
        return "1 vs 1 run: within-run blocks only"
    return f"{b.runs} vs {c.runs} runs: between-run t"


def _paired_row(group: str, metric: Metric, paired: PairedItems, s: CompareSettings, runs_b: int,
                runs_c: int) -> Row:
    diffs = paired.diffs
    m = diffs.size
    delta = paired.candidate - paired.baseline
    band = min_effect_for(metric.key, metric.unit, s.min_effects).band(paired.baseline)
    se = float(diffs.std(ddof=1) / math.sqrt(m)) if m >= 2 else math.inf
    decision = decide(delta, se, m - 1, band, metric.better, s.alpha, paired.baseline, paired.candidate)
    delta_pct = delta / abs(paired.baseline) * 100 if paired.baseline else None
    return Row(group, metric.key, metric.label, metric.unit, metric.better, paired.baseline, paired.candidate,
               delta, delta_pct, decision.ci_low, decision.ci_high, decision.p_value, decision.verdict,
               f"paired, {m} items", m, m, True, band=band, gated=is_gated(metric.key, s),
               runs_baseline=runs_b, runs_candidate=runs_c)


def adjust(rows: list[Row], alpha: float) -> list[Row]:
    """The rows with their p-values adjusted for multiplicity: Holm over the gated rows that have one
    (``--fail-on-worse``'s family), Benjamini-Hochberg over the others. A better / worse verdict whose
    adjusted p is not below ``alpha`` becomes inconclusive, and says why."""
    out = list(rows)
    for gated, method, correct in ((True, "Holm", holm), (False, "Benjamini-Hochberg", benjamini_hochberg)):
        index = [i for i, r in enumerate(out) if r.gated == gated and r.p_value is not None
                 and r.verdict in (BETTER, WORSE, EQUIVALENT, INCONCLUSIVE)]
        if not index:
            continue
        adjusted = correct([float(out[i].p_value or 0.0) for i in index])     # (index: rows with a p)
        for i, p in zip(index, adjusted, strict=True):
            r = out[i]
            changes: dict[str, object] = {"p_adjusted": p}
            if r.per_run_var is not None and r.band:     # at the family's strictest level (Bonferroni)
                changes["runs_needed"] = runs_needed(DETECT_BANDS * r.band, r.band, r.per_run_var,
                                                     alpha / len(index))
            if r.verdict in (BETTER, WORSE) and p >= alpha:
                changes.update(verdict=INCONCLUSIVE, why=f"{r.verdict} alone (p {r.p_value:.3g}), not after "
                                                         f"{method} over {len(index)} rows (p {p:.3g})")
            out[i] = dataclasses.replace(r, **changes)  # type: ignore[arg-type]
    return out

"""--prometheus-port's exposition (fourfold.measure.promexport): the exported buckets are exact unions
of the report's log buckets, the counts cumulative and exact, labels escaped, every family declared;
read back with fourfold's own Prometheus parser (fourfold.measure.prom)."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from fourfold.measure.histogram import DEFAULT_ALPHA, LogHistogram, bucket_keys
from fourfold.measure.prom import parse_prometheus
from fourfold.measure.promexport import (
    BOUND_STEP,
    CONTENT_TYPE,
    FAMILIES,
    HISTOGRAMS,
    Gauge,
    bounds_ms,
    escape,
    level_gauges,
    render,
    split_variant,
)
from fourfold.measure.stats import GroupStats, LLMStats

GAMMA = (1 + DEFAULT_ALPHA) / (1 - DEFAULT_ALPHA)


def stats_with(groups: dict[tuple[str, str], GroupStats]) -> LLMStats:
    stats = LLMStats()
    stats.groups = groups
    return stats


def samples_of(text: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {s.labels: s.value for s in parse_prometheus(text) if s.name == name}


def test_the_bounds_are_every_20th_log_bucket_boundary_from_1_ms_to_10_minutes() -> None:
    bounds = bounds_ms(DEFAULT_ALPHA)
    keys = [key for key, _ in bounds]
    assert keys == list(range(0, BOUND_STEP * len(bounds), BOUND_STEP))
    assert bounds[0] == (0, 1.0)
    assert bounds[-1][1] >= 600_000 > bounds[-2][1]
    assert len(bounds) == 68
    for key, bound in bounds:
        assert bound == GAMMA**key
    ratios = {round(b2 / b1, 9) for (_, b1), (_, b2) in zip(bounds, bounds[1:])}
    assert ratios == {round(GAMMA**20, 9)} and 1.22 < GAMMA**20 < 1.223


def test_cumulative_counts_are_exact_unions_of_the_internal_buckets() -> None:
    rng = random.Random(7)
    values = [math.exp(rng.uniform(math.log(1e-4), math.log(2e6))) for _ in range(3000)] + [0.0, 0.0005]
    hist = LogHistogram()
    hist.add_all(values)
    group = GroupStats()
    group.hists["ttft_ms"] = hist
    text = render(stats_with({("l1", "chat"): group}))
    buckets = samples_of(text, "fourfold_ttft_seconds_bucket")
    base = (("level", "l1"), ("scenario", "chat"), ("variant", ""))
    keys = bucket_keys(np.array([v for v in values if v >= 1e-3]))
    zeros = sum(v < 1e-3 for v in values)
    for key, bound in bounds_ms(DEFAULT_ALPHA):
        le = (*base, ("le", repr(bound / 1000)))
        by_key = zeros + int(np.count_nonzero(keys <= key))      # the internal buckets' union
        assert buckets[le] == by_key
        assert buckets[le] == sum(v <= bound for v in values)     # ... which is every value <= le
    assert buckets[(*base, ("le", "+Inf"))] == len(values) == hist.count
    counts = [buckets[(*base, ("le", repr(b / 1000)))] for _, b in bounds_ms(DEFAULT_ALPHA)]
    assert counts == sorted(counts)                               # cumulative
    assert samples_of(text, "fourfold_ttft_seconds_count")[base] == len(values)
    assert samples_of(text, "fourfold_ttft_seconds_sum")[base] == pytest.approx(sum(values) / 1000, rel=1e-12)


def histogram_quantile(q: float, uppers: list[float], cumulative: list[float]) -> float:
    """Prometheus' histogram_quantile over one series' buckets (promql/quantile.go, bucketQuantile):
    the rank q * count, the first bucket whose count reaches it, linear interpolation inside it."""
    rank = q * cumulative[-1]
    i = next(j for j, c in enumerate(cumulative) if c >= rank)
    if i == len(uppers) - 1:          # +Inf: the highest finite bound
        return uppers[-2]
    lower, below = (0.0, 0.0) if i == 0 else (uppers[i - 1], cumulative[i - 1])
    return lower + (uppers[i] - lower) * (rank - below) / (cumulative[i] - below)


@pytest.mark.parametrize("seed", range(5))
def test_histogram_quantile_of_the_export_lies_in_the_bucket_of_the_summarys_p95(seed: int) -> None:
    rng = np.random.default_rng(seed)
    values = rng.lognormal(math.log(300), 0.6, size=int(rng.integers(20, 2000)))
    hist = LogHistogram()
    hist.add_all(values)
    group = GroupStats()
    group.hists["ttft_ms"] = hist
    text = render(stats_with({("l1", "chat"): group}))
    found = sorted(((float(dict(labels)["le"]), value)
                    for labels, value in samples_of(text, "fourfold_ttft_seconds_bucket").items()))
    uppers, cumulative = [le for le, _ in found], [count for _, count in found]
    promql = histogram_quantile(0.95, uppers, cumulative)
    p95_s = group.summary("l1", "chat")["ttft_ms"]["p95"] / 1000
    i = next(j for j, upper in enumerate(uppers) if p95_s <= upper)
    assert (uppers[i - 1] if i else 0.0) <= promql <= uppers[i]
    assert abs(promql / p95_s - 1) < GAMMA**20 - 1


def test_counters_by_class_and_status_and_the_tokens() -> None:
    group = GroupStats()
    group.errors = {"ok": 7, "timeout": 2, "http_5xx": 1}
    group.statuses = {200: 9, 503: 1}
    group.counts.update(requests=10, failures=3, output_tokens_total=321, prompt_tokens_total=55, stalls=3,
                        good=6)
    text = render(stats_with({("l4", "chat@B"): group}))
    base = (("level", "l4"), ("scenario", "chat"), ("variant", "B"))
    assert samples_of(text, "fourfold_requests_total") == {(*base, ("class", "ok")): 7,
                                                           (*base, ("class", "timeout")): 2,
                                                           (*base, ("class", "http_5xx")): 1}
    assert samples_of(text, "fourfold_responses_total") == {(*base, ("status", "200")): 9,
                                                            (*base, ("status", "503")): 1}
    assert samples_of(text, "fourfold_failed_requests_total") == {base: 3}
    assert samples_of(text, "fourfold_output_tokens_total") == {base: 321}
    assert samples_of(text, "fourfold_input_tokens_total") == {base: 55}
    assert samples_of(text, "fourfold_stalls_total") == {base: 3}
    assert samples_of(text, "fourfold_good_requests_total") == {base: 6}


@pytest.mark.parametrize(("scenario", "expected"), [
    ("chat@B", ("chat", "B")), ("chat@A", ("chat", "A")), ("ladder@32", ("ladder@32", "")),
    ("plain", ("plain", "")), ("@B", ("@B", "")), ("a@b@A", ("a@b", "A"))])
def test_the_variant_is_split_off_the_scenario(scenario: str, expected: tuple[str, str]) -> None:
    assert split_variant(scenario) == expected


def test_label_values_are_escaped_and_read_back() -> None:
    odd = 'say "hi"\\ there\nnow'
    assert escape(odd) == 'say \\"hi\\"\\\\ there\\nnow'
    group = GroupStats()
    group.errors = {"ok": 1}
    text = render(stats_with({("l1", odd): group}))
    assert "\nnow" not in text                       # one sample, one line
    (labels,) = samples_of(text, "fourfold_requests_total")
    assert dict(labels)["scenario"] == odd


def test_each_family_once_with_help_and_type_and_every_sample_declared() -> None:
    group = GroupStats()
    group.hists["ttft_ms"].add(120.0)
    group.errors = {"ok": 1}
    gauges = level_gauges({"rag": {"k": 3, "recall_at_k": 0.5}}, users=4, finished=True)
    text = render(stats_with({("l1", "a"): group, ("l2", "b"): GroupStats()}), gauges)
    assert text.endswith("\n")
    helps = [line.split()[2] for line in text.splitlines() if line.startswith("# HELP")]
    types = {line.split()[2]: line.split()[3] for line in text.splitlines() if line.startswith("# TYPE")}
    assert len(helps) == len(set(helps)) and set(helps) == set(types) <= set(FAMILIES)
    assert all(types[name] == FAMILIES[name][0] for name in types)
    for sample in parse_prometheus(text):
        family = sample.name
        if family not in FAMILIES:
            family = family.rsplit("_", 1)[0]
            assert family in HISTOGRAMS and sample.name[len(family):] in ("_bucket", "_sum", "_count")
        assert family in types
    # every line is a comment or `name{labels} value`
    for line in text.splitlines():
        assert line.startswith("#") or len(line.rsplit(" ", 1)) == 2
    assert CONTENT_TYPE.startswith("text/plain; version=0.0.4")


def test_level_gauges_from_the_live_blocks() -> None:
    blocks = {"l2": {"knee_users": 32},
              "rag": {"k": 3, "recall_at_k": 0.75, "precision_at_k": 0.5, "conflict_rate": None},
              "sessions": {"by_variant": {"A": {"started": 5, "ended": 4, "completed": 3, "abandoned": 1,
                                                "max_turns": 0, "cut": 1, "completion_rate": 0.75},
                                          "B": {"started": 2, "ended": 0, "completed": 0, "abandoned": 0,
                                                "max_turns": 0, "cut": 2, "completion_rate": None}},
                           "total": {"started": 7}}}
    text = render(LLMStats(), level_gauges(blocks, users=16, ladder_step=16, finished=False))
    assert samples_of(text, "fourfold_users") == {(): 16}
    assert samples_of(text, "fourfold_test_finished") == {(): 0}
    assert samples_of(text, "fourfold_ladder_step_users") == {(("level", "l2"),): 16}
    assert samples_of(text, "fourfold_ladder_knee_users") == {(("level", "l2"),): 32}
    assert samples_of(text, "fourfold_rag_recall_at_k") == {(("level", "l3"), ("k", "3")): 0.75}
    assert samples_of(text, "fourfold_rag_precision_at_k") == {(("level", "l3"), ("k", "3")): 0.5}
    assert "fourfold_rag_conflict_ratio" not in text
    assert samples_of(text, "fourfold_sessions_started_total") == {
        (("level", "l4"), ("variant", "A")): 5, (("level", "l4"), ("variant", "B")): 2}
    ended = samples_of(text, "fourfold_sessions_ended_total")
    assert ended[(("level", "l4"), ("variant", "A"), ("outcome", "completed"))] == 3
    assert ended[(("level", "l4"), ("variant", "A"), ("outcome", "abandoned"))] == 1
    assert samples_of(text, "fourfold_sessions_cut_total")[(("level", "l4"), ("variant", "B"))] == 2
    a = (("level", "l4"), ("variant", "A"))
    assert samples_of(text, "fourfold_session_completion_ratio") == {a: 0.75}
    # without an A/B split the total is the one variant ""
    alone = level_gauges({"sessions": {"by_variant": {}, "total": {"started": 3, "completion_rate": 1.0}}})
    assert Gauge("fourfold_session_completion_ratio", (("level", "l4"), ("variant", "")), 1.0) in alone


def test_an_undeclared_gauge_is_refused() -> None:
    with pytest.raises(ValueError, match="no family"):
        render(LLMStats(), [Gauge("fourfold_made_up", (), 1.0)])

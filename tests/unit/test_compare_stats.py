"""The comparison statistics (reports.bootstrap, reports.replication, reports.verdict, reports.compare):
table-driven, pure."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fourfold.measure.histogram import bucket_keys, bucket_values
from fourfold.reports import bootstrap as bs
from fourfold.reports import replication as rp
from fourfold.reports import verdict as vd
from fourfold.reports.compare import (
    INCONCLUSIVE,
    NA,
    ONE_RUN,
    CompareSettings,
    GroupSample,
    ItlSample,
    adjust,
    compare_groups,
    pairs,
)


def test_quantile_is_nearest_rank():
    values = np.arange(1.0, 101.0)
    assert [bs.quantile(values, q) for q in (0.0, 0.5, 0.95, 0.99, 1.0)] == [1.0, 50.0, 95.0, 99.0, 100.0]


def test_mean_replicates_switch_to_the_normal_approximation():
    small = bs.mean_replicates(np.arange(10.0), 4000, np.random.default_rng(7))
    assert np.std(small) == pytest.approx(np.std(np.arange(10.0)) / math.sqrt(10), rel=0.1)
    big = np.random.default_rng(8).normal(5, 2, size=bs.EXACT_MEAN_N + 1)
    assert np.std(bs.mean_replicates(big, 4000, np.random.default_rng(9))) == pytest.approx(
        2 / math.sqrt(big.size), rel=0.1)


def test_clustered_quantiles_resample_whole_clusters():
    rng = np.random.default_rng(10)
    # 50 clusters: half with gaps around 10, half around 200 (a pulsing stream)
    gaps = [rng.normal(10, 0.5, 20) if c % 2 else rng.normal(200, 5, 20) for c in range(50)]
    values = np.concatenate(gaps)
    uniques, codes = np.unique(bucket_keys(values), return_inverse=True)
    cluster = np.repeat(np.arange(50), 20)
    point, reps = bs.clustered_quantile_replicates(codes, cluster, 50, bucket_values(uniques),
                                                   (0.5,), 2000, rng)
    # whole clusters move together, so the median jumps between the two modes across replicates
    assert (reps[:, 0] < 50).mean() > 0.3 and (reps[:, 0] > 150).mean() > 0.3
    assert point[0] == pytest.approx(np.quantile(values, 0.5, method="inverted_cdf"), rel=0.01)


def test_itl_sample_quantiles_clamp_to_min_and_max():
    values = np.array([10.0, 10.0, 20.0, 30.0])
    keys, counts = np.unique(bucket_keys(values), return_counts=True)
    itl = ItlSample(keys, counts, 10.0, 30.0, 2, [values])
    assert itl.quantiles((0.0, 0.5, 1.0)) == [10.0, pytest.approx(10.0, rel=0.01), 30.0]


def test_pairing_needs_enough_common_items():
    items = np.array([f"i{k}" for k in range(10)], dtype=object)
    values = np.arange(10.0)
    paired = pairs(items, values, items, values + 1)
    assert paired is not None and np.allclose(paired[1] - paired[0], 1.0)
    assert pairs(items[:4], values[:4], items[:4], values[:4]) is None                     # < 5 common items
    other = np.array([f"j{k}" for k in range(10)], dtype=object)
    mostly_other = np.concatenate([items[:5], other])
    assert pairs(items, values, mostly_other, np.arange(15.0)) is None                     # < half in common


def _sample(ttft: np.ndarray, failures: int = 0, unit: str = "run") -> GroupSample:
    return GroupSample(requests=ttft.size + failures, ok=ttft.size, failures=failures,
                       ttft_ms=np.sort(ttft), unit=unit)


@pytest.mark.parametrize("shift, failures, metric, verdict", [
    (30.0, 0, "ttft_p50", "worse"),
    (-30.0, 0, "ttft_p50", "better"),
    (0.5, 0, "ttft_p50", "equivalent"),       # inside the 2 % band, and the interval too
    (0.0, 40, "error_rate", "worse"),
])
def test_verdicts_follow_the_direction_of_each_metric(shift, failures, metric, verdict):
    """Two A/B arms of one run (within-run variance is their basis): direction-aware verdicts."""
    rng = np.random.default_rng(11)
    base = _sample(rng.normal(100, 10, 1600), unit="arm")
    cand = _sample(rng.normal(100 + shift, 10, 1600), failures=failures * 4, unit="arm")
    rows = {r.metric: r for r in compare_groups("l1:x", base, cand, CompareSettings(resamples=1000))}
    assert rows[metric].verdict == verdict


def test_one_run_a_side_shows_an_interval_and_no_verdict():
    rng = np.random.default_rng(12)
    rows = {r.metric: r for r in compare_groups("l1:x", _sample(rng.normal(100, 10, 400)),
                                                 _sample(rng.normal(160, 10, 400)),
                                                 CompareSettings(resamples=400))}
    row = rows["ttft_p50"]
    assert row.verdict == INCONCLUSIVE and row.why == ONE_RUN and row.p_value is None
    assert row.ci_low is not None and 50 < row.ci_low < row.delta < row.ci_high < 70


def test_runs_are_the_replicates():
    """Two runs a side whose values differ by far more than their requests suggest: the interval is
    the runs' (t with few degrees of freedom), so a shift smaller than the runs' spread is no verdict."""
    rng = np.random.default_rng(13)
    def runs(*centres: float) -> list[GroupSample]:
        return [_sample(rng.normal(c, 2, 600)) for c in centres]
    spread = {r.metric: r for r in compare_groups("l1:x", runs(100, 110), runs(104, 114),
                                                  CompareSettings(resamples=400))}
    row = spread["ttft_p50"]
    assert row.verdict == INCONCLUSIVE and row.runs_baseline == row.runs_candidate == 2
    assert row.ci_high - row.ci_low > 20                  # the between-run spread, not the 0.3 ms of requests
    clear = {r.metric: r for r in compare_groups("l1:x", runs(100, 101, 100.5), runs(130, 131, 130.5),
                                                 CompareSettings(resamples=400))}
    assert clear["ttft_p50"].verdict == "worse" and clear["ttft_p50"].test == "3 vs 3 runs: between-run t"


def test_a_lone_run_borrows_the_between_run_variance_of_a_side_of_runs():
    rng = np.random.default_rng(14)
    base = [_sample(rng.normal(c, 2, 600)) for c in (100, 101, 100.5)]
    rows = {r.metric: r for r in compare_groups("l1:x", base, _sample(rng.normal(130, 2, 600)),
                                                CompareSettings())}
    assert rows["ttft_p50"].verdict == "worse" and rows["ttft_p50"].runs_candidate == 1


def test_too_few_values_for_a_quantile():
    rows = {r.metric: r for r in compare_groups("l1:x", _sample(np.arange(1.0, 97.0), unit="arm"),
                                                 _sample(np.arange(2.0, 98.0), unit="arm"),
                                                 CompareSettings(resamples=200))}
    assert rows["ttft_p99"].verdict == "too few" and rows["ttft_p99"].why == "p99 of 96 values (needs 1000)"
    assert rows["ttft_p95"].verdict == "too few" and rows["ttft_p50"].verdict != "too few"


def test_identical_values_are_no_change_and_floating_point_noise_too():
    telemetry = {"server.gpu_util_pct": np.full(13, 12.12)}
    other = {"server.gpu_util_pct": np.full(18, 12.12)}
    rows = {r.metric: r for r in compare_groups("l1:x", [GroupSample(telemetry=telemetry)] * 2,
                                                 [GroupSample(telemetry=other)] * 2,
                                                 CompareSettings(resamples=200))}
    assert rows["telemetry.server.gpu_util_pct.mean"].verdict == "no change"
    assert vd.decide(1.8e-15, 0.0, 4, 0.0, "higher", 0.05, 12.12, 12.12).verdict == "no change"


def test_a_side_without_data_is_not_applicable():
    rows = compare_groups("l1:x", _sample(np.arange(1.0, 50.0)), GroupSample(),
                          CompareSettings(resamples=200))
    ttft = next(r for r in rows if r.metric == "ttft_p50")
    assert ttft.candidate is None and ttft.delta is None and ttft.verdict == NA


@pytest.mark.parametrize("delta, se, band, better, verdict", [
    (10.0, 1.0, 2.0, "lower", "worse"),           # interval [7.4, 12.6] beyond +2
    (-10.0, 1.0, 2.0, "lower", "better"),
    (10.0, 1.0, 2.0, "higher", "better"),
    (0.3, 0.5, 2.0, "lower", "equivalent"),      # 90 % interval [-0.53, 1.13] inside +-2
    (2.5, 1.0, 2.0, "lower", "inconclusive"),    # beyond the band, but the interval reaches inside
    (0.0, 1.0, 2.0, "lower", "no change"),
])
def test_decide_interval_against_band(delta, se, band, better, verdict):
    assert vd.decide(delta, se, math.inf, band, better, 0.05, 100.0, 100.0 + delta).verdict == verdict


def test_adjust_keeps_a_p_of_zero():
    rows = compare_groups("l1:x", [GroupSample(pulse_hz=np.full(30, 0.0))] * 2,
                          [GroupSample(pulse_hz=np.full(30, 3.0) + 0.01 * np.arange(30))] * 2,
                          CompareSettings(resamples=200))
    raw = next(r for r in rows if r.metric == "pulse_hz")
    adjusted = next(r for r in adjust(rows, 0.05) if r.metric == "pulse_hz")
    assert raw.verdict == adjusted.verdict == "worse" and adjusted.p_adjusted < 0.05


def test_holm_and_benjamini_hochberg():
    assert vd.holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert vd.benjamini_hochberg([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.04, 0.04])
    assert vd.holm([]) == [] and vd.holm([0.2]) == [0.2]


def test_adjust_downgrades_a_verdict_the_family_does_not_support():
    rng = np.random.default_rng(15)
    base = _sample(rng.normal(100, 10, 2000), unit="arm")
    cand = _sample(rng.normal(103.6, 10, 2000), unit="arm")      # p50 +3.6 %: just beyond the band alone
    rows = compare_groups("l1:x", base, cand,
                          CompareSettings(resamples=1000, gate=("ttft_*", "e2e_*", "error_rate",
                                                                "interruption_rate", "stall_rate")))
    raw = next(r for r in rows if r.metric == "ttft_p50")
    adjusted = next(r for r in adjust(rows, 0.05) if r.metric == "ttft_p50")
    assert raw.gated and adjusted.p_adjusted >= raw.p_value
    if raw.verdict == "worse" and adjusted.p_adjusted >= 0.05:
        assert adjusted.verdict == INCONCLUSIVE and "Holm" in adjusted.why


@pytest.mark.parametrize("text, key, unit, band", [
    ("ttft_p99=5%", "ttft_p99", "ms", 5.0),
    ("latency=3ms", "e2e_p50", "ms", 3.0),
    ("ttft_*=10%+4ms", "ttft_p50", "ms", 10.0),
    ("rate=1pp", "error_rate", "%", 1.0),
    ("", "ttft_p50", "ms", 2.0),                   # the default: 2 % of 100 ms, at least 1 ms
    ("", "output_tps", "tok/s", 1.0),
    ("", "similarity_mean", "cos", 0.01),
])
def test_min_effects(text, key, unit, band):
    effect = vd.min_effect_for(key, unit, vd.parse_min_effects([text] if text else []))
    assert effect.band(100.0) == pytest.approx(band)


@pytest.mark.parametrize("text", ["ttft_p99", "x=", "x=abc", "x=-1", "x=nan%", "x=1e300"])
def test_bad_min_effects_are_usage_errors(text):
    from fourfold.errors import UsageError

    with pytest.raises(UsageError):
        vd.parse_min_effects([text])


def test_blocks_hold_the_requests_in_flight_together():
    started = np.arange(100) * 0.1          # 10 requests a second, each 792 ms over 9.9 s: 8 in flight
    blocks = rp.block_ids(started, np.full(100, 792.0))
    assert blocks.max() == 99 // 8 and np.all(np.diff(blocks) >= 0)
    assert rp.block_ids(np.zeros(0), np.zeros(0)).size == 0


def test_runs_needed_grows_with_the_variance():
    few = rp.runs_needed(10.0, 2.0, per_run_var=4.0, alpha=0.05)
    many = rp.runs_needed(10.0, 2.0, per_run_var=40.0, alpha=0.05)
    assert few is not None and many is not None and 2 <= few < many
    assert rp.runs_needed(1.0, 2.0, 4.0, 0.05) is None         # an effect inside the band is never "detected"

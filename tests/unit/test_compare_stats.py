"""The comparison statistics (reports.bootstrap, reports.compare): table-driven, pure."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fourfold.measure.histogram import bucket_keys, bucket_values
from fourfold.reports import bootstrap as bs
from fourfold.reports.compare import NA, GroupSample, ItlSample, Settings, compare_groups, pairs


def brute_force_quantiles(values: np.ndarray, q: float, resamples: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    samples = np.sort(values[rng.integers(0, values.size, size=(resamples, values.size))], axis=1)
    rank = math.ceil(q * values.size)
    return samples[:, rank - 1]


@pytest.mark.parametrize("q", [0.5, 0.9, 0.99])
def test_order_statistic_draws_equal_the_resampling_bootstrap(q):
    values = np.sort(np.random.default_rng(1).lognormal(4, 0.5, size=300))
    fast = bs.quantile_replicates(values, q, 20_000, np.random.default_rng(2))
    slow = brute_force_quantiles(values, q, 4000, 3)
    assert np.mean(fast) == pytest.approx(np.mean(slow), rel=0.01)
    assert np.std(fast) == pytest.approx(np.std(slow), rel=0.08)
    assert set(np.unique(fast)) <= set(values)


def test_quantile_is_nearest_rank():
    values = np.arange(1.0, 101.0)
    assert [bs.quantile(values, q) for q in (0.0, 0.5, 0.95, 0.99, 1.0)] == [1.0, 50.0, 95.0, 99.0, 100.0]


@pytest.mark.parametrize("k1, n1, k2, n2, expected, test", [
    (30, 100, 50, 100, 0.003892, "two-proportion z"),      # erfc(2.8868 / sqrt 2)
    (2, 50, 9, 50, 0.0252726, "two-proportion z"),         # expected cell counts >= 5
    (1, 10, 6, 10, 0.0572755, "Fisher exact"),             # scipy.stats.fisher_exact
    (0, 20, 4, 20, 0.1060291, "Fisher exact"),
    (1, 100, 8, 100, 0.0348992, "Fisher exact"),
    (0, 100, 0, 100, 1.0, "two-proportion z"),
    (100, 100, 100, 100, 1.0, "two-proportion z"),
])
def test_two_proportion_tests(k1, n1, k2, n2, expected, test):
    p_value, name = bs.two_proportion_p(k1, n1, k2, n2)
    assert p_value == pytest.approx(expected, rel=1e-3) and name == test


@pytest.mark.parametrize("diffs, expected", [
    ([1.0, 2.0, 1.5, 0.5, 1.0], 2 / 32),       # all one sign: only the two extreme flips are as large
    ([1.0, -1.0, 1.0, -1.0], 1.0),
    ([0.0, 0.0, 0.0], 1.0),
    ([3.0], 1.0),
])
def test_sign_flip_is_exact_for_few_items(diffs, expected):
    assert bs.signflip_p(np.array(diffs), 1000, np.random.default_rng(0)) == pytest.approx(expected)


def test_sign_flip_random_for_many_items():
    diffs = np.random.default_rng(4).normal(0.5, 1.0, size=40)
    p_value = bs.signflip_p(diffs, 5000, np.random.default_rng(5))
    assert 0 < p_value < 0.05
    assert bs.signflip_p(diffs - diffs.mean(), 5000, np.random.default_rng(5)) > 0.5


def test_bootstrap_p_and_interval():
    deltas = np.random.default_rng(6).normal(1.0, 0.25, size=10_000)
    assert bs.bootstrap_p(deltas) < 0.001
    low, high = bs.percentile_ci(deltas)
    assert low == pytest.approx(0.51, abs=0.02) and high == pytest.approx(1.49, abs=0.02)
    assert bs.bootstrap_p(np.zeros(100)) == 1.0


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
    point, reps = bs.clustered_quantile_replicates(codes, cluster, 50, bucket_values(uniques), (0.5,), 2000, rng)
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


def _sample(ttft: np.ndarray, failures: int = 0) -> GroupSample:
    return GroupSample(requests=ttft.size + failures, ok=ttft.size, failures=failures, ttft_ms=np.sort(ttft))


@pytest.mark.parametrize("shift, failures, metric, verdict", [
    (30.0, 0, "ttft_p50", "worse"),
    (-30.0, 0, "ttft_p50", "better"),
    (0.5, 0, "ttft_p50", "no significant change"),
    (0.0, 40, "error_rate", "worse"),
])
def test_verdicts_follow_the_direction_of_each_metric(shift, failures, metric, verdict):
    rng = np.random.default_rng(11)
    base = _sample(rng.normal(100, 10, 400))
    cand = _sample(rng.normal(100 + shift, 10, 400), failures=failures)
    rows = {r.metric: r for r in compare_groups("l1:x", base, cand, Settings(resamples=1000))}
    assert rows[metric].verdict == verdict


def test_a_side_without_data_is_not_applicable():
    rows = compare_groups("l1:x", _sample(np.arange(1.0, 50.0)), GroupSample(), Settings(resamples=200))
    ttft = next(r for r in rows if r.metric == "ttft_p50")
    assert ttft.candidate is None and ttft.delta is None and ttft.verdict == NA

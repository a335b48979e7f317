from __future__ import annotations

import json
import math

import numpy as np
import pytest

from fourfold.measure.histogram import (
    ZERO_KEY,
    LogHistogram,
    bucket_keys,
    bucket_quantiles,
    bucket_values,
    exact_quantile,
    nearest_rank,
    nearest_ranks,
)

QS = (0.5, 0.9, 0.95, 0.99)


def _samples(kind: str, rng: np.random.Generator, n: int = 20_000) -> np.ndarray:
    if kind == "lognormal":
        return rng.lognormal(mean=3.0, sigma=1.0, size=n)
    if kind == "uniform":
        return rng.uniform(0.5, 2_000.0, size=n)
    if kind == "bimodal":  # fast tokens plus a cluster of stalls
        return np.concatenate([rng.normal(20.0, 2.0, size=int(n * 0.93)).clip(0.01),
                               rng.normal(1_200.0, 100.0, size=n - int(n * 0.93))])
    raise AssertionError(kind)


def _exact(sorted_values: np.ndarray, q: float) -> float:
    return float(sorted_values[nearest_rank(q, len(sorted_values)) - 1])


@pytest.mark.parametrize("kind", ["lognormal", "uniform", "bimodal"])
def test_quantiles_within_one_percent_of_exact_nearest_rank(kind: str) -> None:
    values = _samples(kind, np.random.default_rng(7))
    hist = LogHistogram()
    for v in values:
        hist.add(float(v))
    ordered = np.sort(values)
    for q in QS:
        exact = _exact(ordered, q)
        # our rank rule is numpy's inverted_cdf
        assert exact == pytest.approx(float(np.percentile(values, q * 100, method="inverted_cdf")))
        assert abs(hist.quantile(q) - exact) / exact <= 0.01, (kind, q)
        assert abs(hist.quantile(q) - exact) / exact <= hist.alpha + 1e-12
    assert hist.count == len(values)
    assert hist.min == ordered[0] and hist.max == ordered[-1]
    assert hist.mean == pytest.approx(float(values.mean()))
    assert hist.sum == pytest.approx(float(values.sum()))


@pytest.mark.parametrize(
    ("q", "n", "rank"),
    [(0.5, 10, 5), (0.9, 10, 9), (0.99, 10, 10), (0.07, 100, 7), (0.0, 5, 1), (1.0, 5, 5), (0.5, 1, 1)],
)
def test_nearest_rank(q: float, n: int, rank: int) -> None:
    assert nearest_rank(q, n) == rank


def test_quantile_bounds_and_clamping() -> None:
    hist = LogHistogram()
    hist.add_all([10.0, 10.0, 10.0, 1000.0])
    assert hist.quantile(0.0) == 10.0
    assert hist.quantile(1.0) == 1000.0
    assert hist.quantile(0.75) == pytest.approx(10.0, rel=0.005)
    assert hist.quantile(0.99) <= hist.max
    single = LogHistogram()
    single.add(123.456)
    assert [single.quantile(q) for q in (0, 0.5, 0.99, 1)] == [123.456] * 4
    with pytest.raises(ValueError):
        hist.quantile(1.5)


def test_p99_never_exceeds_max() -> None:
    rng = np.random.default_rng(3)
    for _ in range(50):
        hist = LogHistogram()
        hist.add_all([float(v) for v in rng.lognormal(2.0, 1.5, size=int(rng.integers(1, 300)))])
        assert hist.min <= hist.quantile(0.99) <= hist.max
        assert hist.min <= hist.quantile(0.5) <= hist.max


def test_empty_histogram() -> None:
    hist = LogHistogram()
    assert len(hist) == 0 and hist.count == 0 and hist.sum == 0.0
    assert hist.quantile(0.5) is None and hist.mean is None and hist.min is None and hist.max is None
    assert hist.quantiles(QS) == [None] * 4
    assert LogHistogram.from_wire(hist.to_wire()) == hist
    other = LogHistogram()
    other.merge(hist)
    assert other.count == 0 and other.min is None


def test_zero_and_tiny_values_share_the_zero_bucket() -> None:
    hist = LogHistogram()
    hist.add(0.0)
    hist.add(0.0004)
    hist.add(5.0)
    assert hist.zero_count == 2 and hist.buckets and sum(hist.buckets.values()) == 1
    assert hist.quantile(0.5) == 0.0  # zero bucket represents 0; min is 0
    only_tiny = LogHistogram()
    only_tiny.add(0.0004, count=3)
    assert only_tiny.quantile(0.5) == 0.0004  # clamped to [min, max]


def test_invalid_values_are_counted_not_added() -> None:
    hist = LogHistogram()
    for bad in (-1.0, math.nan, math.inf, -math.inf):
        hist.add(bad)
    hist.add(2.0)
    hist.add_all([3.0, -5.0])
    assert hist.invalid == 5
    assert hist.count == 2 and hist.min == 2.0 and hist.max == 3.0 and hist.sum == 5.0


def test_add_count_and_add_all_match_add() -> None:
    values = [0.0, 0.5e-3, 1.0, 17.3, 17.3, 250.0, 4e5]
    one, many = LogHistogram(), LogHistogram()
    for v in values:
        one.add(v)
    many.add_all(iter(values))
    assert one == many
    weighted = LogHistogram()
    weighted.add(17.3, count=2)
    pair = LogHistogram()
    pair.add_all([17.3, 17.3])
    assert weighted == pair and weighted.sum == pytest.approx(34.6)


def test_merge_is_exact() -> None:
    rng = np.random.default_rng(11)
    values = [float(v) for v in rng.lognormal(3.0, 1.2, size=5_000)] + [0.0, 0.0002]
    whole = LogHistogram()
    whole.add_all(values)
    parts = [LogHistogram() for _ in range(3)]
    for i, v in enumerate(values):
        parts[i % 3].add(v)
    merged = LogHistogram()
    for part in parts:
        merged.merge(part)
    assert merged.buckets == whole.buckets
    assert (merged.count, merged.zero_count, merged.min, merged.max) == (
        whole.count, whole.zero_count, whole.min, whole.max)
    assert merged.sum == pytest.approx(whole.sum, rel=1e-12)
    assert merged.quantiles(QS) == whole.quantiles(QS)
    with pytest.raises(ValueError):
        merged.merge(LogHistogram(alpha=0.01))


def test_wire_round_trip_msgpack_and_json_friendly() -> None:
    hist = LogHistogram()
    hist.add_all([0.0, 1.5, 2.5, 2.5, 900.0])
    hist.add(-3.0)
    wire = hist.to_wire()
    assert all(isinstance(k, int) for k in wire["b"])
    back = LogHistogram.from_wire(wire)
    assert back == hist and back.sum == hist.sum and back.invalid == 1
    via_json = LogHistogram.from_wire(json.loads(json.dumps(wire)))  # str keys after JSON
    assert via_json == hist
    target = LogHistogram()
    target.merge_wire(wire)
    assert target == hist


def test_copy_and_reset() -> None:
    hist = LogHistogram()
    hist.add_all([1.0, 2.0, 3.0])
    clone = hist.copy()
    hist.reset()
    assert clone.count == 3 and clone.quantile(1.0) == 3.0
    assert hist.count == 0 and hist.buckets == {} and hist.quantile(0.5) is None
    hist.add(7.0)
    assert hist.min == hist.max == 7.0


def test_the_array_forms_file_values_as_add_does() -> None:
    values = np.array([0.0, 0.0004, 0.001, 1.0, 9.99, 10.0, 10.01, 250.0, 1e6])
    hist = LogHistogram()
    hist.add_all(values.tolist())
    keys = bucket_keys(values)
    assert keys[:2].tolist() == [ZERO_KEY, ZERO_KEY]
    assert sorted(set(keys[2:].tolist())) == sorted(hist.buckets)
    assert bucket_values(keys)[:2].tolist() == [0.0, 0.0]
    assert bucket_values(keys[2:]).tolist() == \
        pytest.approx([hist.representative(int(k)) for k in keys[2:]], rel=1e-12)
    uniques, counts = np.unique(keys, return_counts=True)
    qs = (0.0, 0.1, 0.5, 0.9, 1.0)
    assert bucket_quantiles(uniques, counts, qs, 0.0, 1e6) == hist.quantiles(qs)
    assert bucket_quantiles(np.zeros(0, np.int64), np.zeros(0, np.int64), qs, 0.0, 0.0) == [None] * len(qs)


@pytest.mark.parametrize(("q", "n", "rank"),
                         [(0.5, 10, 5), (0.99, 10, 10), (0.07, 100, 7), (0.0, 5, 1), (0.5, 0, 1)])
def test_nearest_ranks_over_arrays(q: float, n: int, rank: int) -> None:
    assert nearest_ranks(q, np.array([n]))[0] == rank
    if n:
        assert nearest_rank(q, n) == rank
        assert exact_quantile(list(range(1, n + 1)), q) == rank

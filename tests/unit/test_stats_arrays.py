"""The load generator's array paths for long streams give what the per-value code gives.

A record of >= 32 chunks is aggregated with numpy (gaps, stalls, the ITL histogram, tokens per
second, the pulse's median and arrival series); these tests hold each against the plain
definition it replaces, on random streams (steady, pulsing, unsorted, uneven token shares).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from fourfold.measure import metrics, rhythm, stats
from fourfold.measure.histogram import LogHistogram, bucket_keys
from fourfold.measure.record import RequestRecord
from fourfold.measure.rhythm import chunk_tokens, waveform


def _stream(rng: np.random.Generator, n: int, kind: str) -> list[float]:
    if kind == "steady":
        gaps = rng.normal(10.0, 0.5, n - 1).clip(0.01)
    elif kind == "pulsing":         # 10 fast tokens, then a 200 ms pause, again and again
        gaps = np.where(np.arange(n - 1) % 10 == 9, 200.0, 2.0) + rng.normal(0, 0.2, n - 1).clip(-1.5)
    else:                           # arrival order not guaranteed (a clock step): unsorted offsets
        gaps = rng.normal(10.0, 8.0, n - 1)
    return [round(x, 3) for x in (50.0 + np.concatenate(([0.0], np.cumsum(gaps)))).tolist()]


def _record(offsets: list[float], tokens: int, started_at: float = 1_796_000_000.123) -> RequestRecord:
    return RequestRecord(level="l1", scenario="s", started_at=started_at, status=200,
                         chunk_offsets_ms=offsets, content_chunks=len(offsets), output_tokens=tokens,
                         ttft_ms=offsets[0], e2e_ms=max(offsets), terminal=True, finish_reason="length")


def _tokens_by_second_plain(record: RequestRecord) -> dict[int, int]:
    out: dict[int, int] = {}
    for offset_ms, share in zip(record.chunk_offsets_ms,
                                chunk_tokens(record.output_tokens, len(record.chunk_offsets_ms))):
        if share:
            sec = math.floor(record.started_at + offset_ms / 1000)
            out[sec] = out.get(sec, 0) + share
    return out


def _pulse_plain(offsets_ms: list[float]) -> float | None:
    """rhythm.pulse_frequency_hz as written before its array path (np.median, waveform, np.hanning)."""
    bin_ms, min_hz, max_hz = 10.0, 0.5, 20.0
    typical = float(np.median(np.diff(np.asarray(offsets_ms, dtype=np.float64))))
    if typical > 0:
        max_hz = min(max_hz, 1000.0 / (4 * typical))
    series, _ = waveform(offsets_ms, interval_ms=bin_ms, start_ms=offsets_ms[0])
    n = len(series)
    if n * bin_ms / 1000.0 < 2.0 / min_hz:
        min_hz = 2.0 / (n * bin_ms / 1000.0)
    series = series - series.mean()
    if not np.any(series):
        return None
    power = np.abs(np.fft.rfft(series * np.hanning(n))) ** 2
    freqs = np.fft.rfftfreq(n, d=bin_ms / 1000.0)
    band = (freqs >= min_hz) & (freqs <= max_hz)
    if not np.any(band) or power[1:].sum() <= 0 or power[band].sum() <= 0:
        return None
    k = int(np.argmax(power[band]))
    if power[band][k] / power[1:].sum() < 0.15:
        return None
    index = int(np.flatnonzero(band)[k])
    peak = freqs[index]
    if 0 < index < len(power) - 1:
        a, b, c = power[index - 1], power[index], power[index + 1]
        if a - 2 * b + c != 0:
            peak += 0.5 * (a - c) / (a - 2 * b + c) * (freqs[1] - freqs[0])
    return round(float(peak), 3)


CASES = [(n, kind, seed) for seed, (n, kind) in enumerate(
    [(n, kind) for n in (32, 33, 200, 997) for kind in ("steady", "pulsing", "unsorted")])]


@pytest.mark.parametrize(("n", "kind", "seed"), CASES)
def test_tokens_by_second_array_path_equals_the_per_chunk_sum(n: int, kind: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    offsets = _stream(rng, n, kind)
    for tokens in (n, 2 * n, n + 7, n // 3 + 1, 1):    # even shares, uneven ones, fewer tokens than chunks
        record = _record(offsets, tokens, started_at=1_796_000_000.0 + float(rng.uniform(0, 1)))
        assert metrics.tokens_by_second(record) == _tokens_by_second_plain(record)


@pytest.mark.parametrize(("n", "kind", "seed"), CASES)
def test_pulse_array_path_equals_the_plain_definition(n: int, kind: str, seed: int) -> None:
    offsets = _stream(np.random.default_rng(seed), n, kind)
    gaps = np.diff(np.asarray(offsets)).astype(np.float32)
    from_gaps = np.concatenate(([0.0], np.cumsum(gaps.astype(np.float64)))).tolist()
    assert rhythm.pulse_frequency_hz(from_gaps) == _pulse_plain(from_gaps)
    assert rhythm.pulse_frequency_hz(offsets) == _pulse_plain(offsets)
    if kind == "pulsing":
        assert rhythm.pulse_frequency_hz(offsets) == pytest.approx(1000 / (9 * 2.0 + 200.0), rel=0.1)


def test_median_is_numpys() -> None:
    rng = np.random.default_rng(7)
    for n in (1, 2, 3, 4, 31, 32, 200):
        values = rng.normal(10, 3, n)
        assert rhythm._median(values) == float(np.median(values))
    assert math.isnan(rhythm._median(np.array([1.0, np.nan, 3.0])))


def test_add_all_array_files_the_reports_buckets() -> None:
    values = np.random.default_rng(3).lognormal(2.0, 1.0, 500)
    by_array, by_list = LogHistogram(), LogHistogram()
    by_array.add_all(values)
    by_list.add_all(values.tolist())
    keys, counts = np.unique(bucket_keys(values), return_counts=True)
    assert by_array.buckets == dict(zip(keys.tolist(), counts.tolist()))
    assert (by_array.count, by_array.sum, by_array.min, by_array.max) == (
        by_list.count, by_list.sum, by_list.min, by_list.max)
    zeros = np.array([0.0] * 40 + [5.0])            # values outside the log buckets: the per-value path
    hist = LogHistogram()
    hist.add_all(zeros)
    assert (hist.zero_count, hist.count, hist.max) == (40, 41, 5.0)


@pytest.mark.parametrize("kind", ["steady", "pulsing", "unsorted"])
def test_group_stats_of_a_long_record_equal_the_per_value_path(kind: str,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(11)
    records = [_record(_stream(rng, int(rng.integers(32, 400)), kind), int(rng.integers(40, 600)))
               for _ in range(20)]
    fast = stats.GroupStats()
    for record in records:
        fast.add(record, 150.0, {"itl_ms": 50.0})
    monkeypatch.setattr(stats, "_ARRAY_MIN", 10**9)
    monkeypatch.setattr(metrics, "_ARRAY_MIN", 10**9)
    slow = stats.GroupStats()
    for record in records:
        slow.add(record, 150.0, {"itl_ms": 50.0})
    assert fast.counts == slow.counts and fast.per_second == slow.per_second
    assert fast.counts["stalls"] > 0 if kind == "pulsing" else True
    for name, hist in slow.hists.items():
        other = fast.hists[name]
        assert (other.count, other.min, other.max) == (hist.count, hist.min, hist.max), name
        assert other.sum == pytest.approx(hist.sum, rel=1e-12), name
        if name != "itl_ms":             # the ITL buckets: numpy's log (as the report's) vs math.log
            assert other.buckets == hist.buckets, name
        else:
            assert sum(other.buckets.values()) == sum(hist.buckets.values())


def test_tokens_by_second_of_offsets_far_apart() -> None:
    """A damaged record whose offsets span more than a day takes the per-value path, same result."""
    offsets = [50.0 + 10 * i for i in range(40)] + [3.0e8, 1.0e9]
    for tokens in (42, 100, 7):
        record = _record(offsets, tokens)
        assert metrics.tokens_by_second(record) == _tokens_by_second_plain(record)

"""Stream rhythm on synthetic timelines with known pulses and stalls."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest

from fourfold.measure.record import RequestRecord
from fourfold.measure.rhythm import (
    chunk_tokens,
    gaps_ms,
    is_stall,
    jitter_ms,
    pulse_frequency_hz,
    rhythm,
    stall_count,
    stalls,
    tokens_through,
    waveform,
)


def smooth(n: int, itl_ms: float = 20.0, jitter: float = 0.0, seed: int = 0) -> list[float]:
    rng = random.Random(seed)
    t, out = 50.0, []
    for _ in range(n):
        out.append(round(t, 3))
        t += max(0.1, rng.gauss(itl_ms, jitter))
    return out


def pulsing(n: int, burst: int = 10, burst_itl_ms: float = 5.0, pause_ms: float = 200.0) -> list[float]:
    """Bursts of ``burst`` tokens ``burst_itl_ms`` apart, then a pause: period = (burst-1)*itl + pause."""
    t, out = 50.0, []
    for i in range(n):
        out.append(t)
        t += pause_ms if (i + 1) % burst == 0 else burst_itl_ms
    return out


@pytest.mark.parametrize(("burst", "itl", "pause", "expected_hz"), [
    (10, 5.0, 200.0, 1000 / (9 * 5 + 200)),     # 4.08 Hz: the article's candidate
    (10, 5.0, 150.0, 1000 / (9 * 5 + 150)),     # 5.13 Hz
    (5, 10.0, 300.0, 1000 / (4 * 10 + 300)),    # 2.94 Hz
])
def test_pulse_frequency_is_recovered(burst, itl, pause, expected_hz):
    offsets = pulsing(300, burst, itl, pause)
    assert pulse_frequency_hz(offsets) == pytest.approx(expected_hz, rel=0.05)


def test_smooth_stream_has_no_pulse_and_low_jitter():
    offsets = smooth(300, itl_ms=20.0, jitter=1.5)
    assert pulse_frequency_hz(offsets) is None
    assert jitter_ms(offsets) == pytest.approx(1.5, rel=0.2)
    assert stalls(offsets) == []


def test_stalls_are_found_where_they_are():
    offsets = smooth(50, itl_ms=10.0)
    offsets = offsets[:20] + [o + 400.0 for o in offsets[20:35]] + [o + 700.0 for o in offsets[35:]]
    found = stalls(offsets, 150.0)
    assert [(s.after_chunk, round(s.gap_ms)) for s in found] == [(19, 410), (34, 310)]
    assert stalls(offsets, 350.0)[0].after_chunk == 19 and len(stalls(offsets, 350.0)) == 1
    summary = rhythm(offsets)
    assert summary.stalls == 2 and summary.longest_gap_ms == pytest.approx(410.0)


def test_waveform_counts_tokens_per_interval_and_keeps_pauses():
    offsets = [0.0, 10.0, 20.0, 30.0, 40.0, 260.0, 270.0]
    counts, edges = waveform(offsets, interval_ms=50.0)
    assert edges.tolist() == [0.0, 50.0, 100.0, 150.0, 200.0, 250.0, 300.0]
    assert counts.tolist() == [5, 0, 0, 0, 0, 2]
    counts, edges = waveform([])
    assert counts.tolist() == [0.0] and edges.tolist() == [0.0, 50.0]


@pytest.mark.parametrize(("offsets", "tokens", "start", "expected"), [
    ([60.0, 70.0, 120.0], 6, 0.0, [0, 4, 2]),          # usage tokens spread in integers: 2, 2, 2
    ([60.0, 70.0, 120.0], 7, 0.0, [0, 4, 3]),          # 2, 2, 3
    ([60.0, 70.0, 120.0], 2, 0.0, [0, 2, 1]),          # fewer tokens than chunks: one per chunk
    ([60.0, 70.0, 120.0], None, 60.0, [2, 1]),         # from the first chunk, chunks counted
    ([49.999, 50.0, 99.999, 100.0], 4, 0.0, [1, 2, 1]),
])
def test_waveform_spreads_the_record_tokens_over_its_chunks(offsets, tokens, start, expected):
    counts, edges = waveform(offsets, tokens, 50.0, start)
    assert counts.tolist() == expected
    assert len(edges) == len(counts) + 1 and edges[0] == start
    assert counts.sum() == max(tokens or 0, len(offsets))


@pytest.mark.parametrize(("tokens", "chunks"), [(8, 4), (7, 3), (5, 2), (1, 4), (0, 3), (100, 7), (3, 3)])
def test_chunk_tokens_are_integers_that_add_up(tokens, chunks):
    shares = chunk_tokens(tokens, chunks)
    assert len(shares) == chunks and sum(shares) == tokens
    assert max(shares) - min(shares) <= 1


def test_tokens_through_is_the_running_sum_of_chunk_tokens_over_arrays_too():
    rng = random.Random(3)
    for _ in range(200):
        tokens, chunks = rng.randint(0, 60), rng.randint(1, 20)
        shares = chunk_tokens(tokens, chunks)
        assert [tokens_through(k, tokens, chunks) for k in range(chunks + 1)] == \
            [0, *itertools.accumulate(shares)]
    k, t, n = np.array([0, 1, 2, 3]), np.array([7, 7, 7, 7]), np.array([3, 3, 3, 3])
    assert tokens_through(k, t, n).tolist() == [0, 2, 4, 7]


def test_gaps_and_stalls_are_the_record_s():
    offsets = [100.0, 120.0, 270.0, 420.5]
    assert gaps_ms(offsets) == [20.0, 150.0, 150.5] == RequestRecord(chunk_offsets_ms=offsets).itl_ms
    assert [is_stall(g, 150.0) for g in gaps_ms(offsets)] == [False, False, True]
    assert stall_count(gaps_ms(offsets), 150.0) == 1 and stall_count(gaps_ms(offsets), 20.0) == 2
    assert is_stall(np.array(gaps_ms(offsets)), 150.0).tolist() == [False, False, True]


def test_short_or_empty_streams():
    assert pulse_frequency_hz([1.0, 2.0]) is None
    assert jitter_ms([5.0]) == 0.0
    assert rhythm([]).chunks == 0

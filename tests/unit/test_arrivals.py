"""Open-loop arrival processes: seeded gap draws, their rate and CV, mergeable gap statistics."""

from __future__ import annotations

import itertools
import math

import pytest

from fourfold.levels.arrivals import ArrivalProcess, GapStats, arrival_offsets, dispatcher_seed, gaps_of


@pytest.mark.parametrize(("kind", "burstiness", "cv"), [
    ("constant", 1.0, 0.0),
    ("poisson", 1.0, 1.0),
    ("gamma", 1.0, 1.0),
    ("gamma", 0.25, 2.0),
    ("gamma", 4.0, 0.5),
])
def test_declared_cv(kind, burstiness, cv):
    assert ArrivalProcess(kind, 5.0, burstiness).cv == pytest.approx(cv)


def test_poisson_20_per_second_for_30_s_has_rate_and_cv_of_the_issue():
    """The acceptance numbers, on the pure generator with the default seed (0)."""
    offsets = arrival_offsets(ArrivalProcess("poisson", 20.0), 30.0, seed=0)
    stats = GapStats()
    stats.add_all(gaps_of([0.0, *offsets]))
    assert 19.0 <= len(offsets) / 30.0 <= 21.0
    assert stats.cv == pytest.approx(1.0, abs=0.15)


@pytest.mark.parametrize(("kind", "burstiness"), [("poisson", 1.0), ("gamma", 0.25), ("gamma", 4.0),
                                                  ("constant", 1.0)])
def test_long_run_mean_gap_and_cv_match_the_process(kind, burstiness):
    process = ArrivalProcess(kind, 50.0, burstiness)
    stats = GapStats()
    stats.add_all(itertools.islice(process.gaps(seed=7), 20_000))
    assert stats.mean == pytest.approx(1 / 50.0, rel=0.03)
    assert stats.cv == pytest.approx(process.cv, abs=0.05)


def test_same_seed_same_draws_and_dispatchers_draw_apart():
    process = ArrivalProcess("poisson", 10.0)
    first = list(itertools.islice(process.gaps(3), 50))
    assert first == list(itertools.islice(process.gaps(3), 50))
    assert first != list(itertools.islice(process.gaps(4), 50))
    assert dispatcher_seed(0, 0) != dispatcher_seed(0, 1) != dispatcher_seed(1, 0)


def test_share_splits_the_rate_across_dispatchers():
    process = ArrivalProcess("gamma", 30.0, 0.5)
    assert process.share(3) == ArrivalProcess("gamma", 10.0, 0.5)
    assert process.share(0) == process


def test_arrival_offsets_stop_at_the_duration():
    offsets = arrival_offsets(ArrivalProcess("constant", 4.0), 2.0)
    assert offsets == pytest.approx([0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0])


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"kind": "uniform"}, "unknown arrival process 'uniform'; valid: constant, poisson, gamma"),
    ({"rate_rps": 0.0}, "positive number"),
    ({"rate_rps": math.inf}, "positive number"),
    ({"kind": "gamma", "burstiness": 0.0}, "burstiness must be > 0"),
])
def test_bad_processes_say_what_is_wrong(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ArrivalProcess(**kwargs)


def test_gap_stats_merge_exactly_and_round_trip():
    a, b, both = GapStats(), GapStats(), GapStats()
    gaps = [0.1, 0.3, 0.05, 0.2, 0.9, 0.01]
    a.add_all(gaps[:2])
    b.add_all(gaps[2:])
    both.add_all(gaps)
    a.merge(b)
    assert (a.n, a.total) == (both.n, pytest.approx(both.total))
    assert a.cv == pytest.approx(both.cv)
    assert GapStats.from_wire(a.to_wire()) == a
    mean = sum(gaps) / len(gaps)
    sd = math.sqrt(sum((g - mean) ** 2 for g in gaps) / (len(gaps) - 1))
    assert both.cv == pytest.approx(sd / mean)
    assert GapStats().cv is None and GapStats().mean is None


def test_gaps_of_sorts_first():
    assert gaps_of([3.0, 1.0, 2.5]) == [1.5, 0.5]

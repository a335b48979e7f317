"""The offset that turns a kernel receive stamp (CLOCK_REALTIME) into perf_counter time
(client/reactor.py, ``realtime_offset_ns``): a try preempted between its clock reads is passed over.
And where the two clocks still disagree, no receive time reads before its request's send
(``reactor.not_before``, applied by client/stream.py; the reactor keeps a connection's reads in order:
tests/integration/test_reactor.py)."""

from __future__ import annotations

import time

from fourfold.client import reactor

TRUE_OFFSET = -1_000_000        # perf_counter_ns() - time_ns() on this made-up machine


def _clocks(monkeypatch, perf: list[int], real: list[int]) -> None:
    monkeypatch.setattr(reactor.time, "perf_counter_ns", iter(perf).__next__)
    monkeypatch.setattr(reactor.time, "time_ns", iter(real).__next__)


def test_a_try_preempted_between_its_reads_is_passed_over(monkeypatch):
    # try 1: preempted for 50 us after its first perf_counter read; try 2: 200 ns wide
    _clocks(monkeypatch, perf=[10_000, 60_100, 70_000, 70_200],
            real=[60_000 - TRUE_OFFSET, 70_100 - TRUE_OFFSET])
    assert reactor.realtime_offset_ns() == TRUE_OFFSET


def test_three_wide_tries_give_the_narrowest_midpoint(monkeypatch):
    _clocks(monkeypatch, perf=[0, 90_000, 100_000, 130_000, 200_000, 280_000],
            real=[80_000 - TRUE_OFFSET, 115_000 - TRUE_OFFSET, 270_000 - TRUE_OFFSET])
    assert reactor.realtime_offset_ns() == TRUE_OFFSET          # the second try: 30 us wide, centred


def test_on_this_machine_it_is_the_plain_difference_within_a_millisecond():
    plain = time.perf_counter_ns() - time.time_ns()
    assert abs(reactor.realtime_offset_ns() - plain) < 1_000_000


def test_receive_times_before_the_send_are_raised_to_it_and_counted():
    t0 = 5_000_000
    assert reactor.not_before([t0 - 39_000, t0 - 1, t0 + 700_000, t0 + 900_000], t0) == (
        [t0, t0, t0 + 700_000, t0 + 900_000], 2)
    assert reactor.not_before([t0 - 2, t0 - 1], t0) == ([t0, t0], 2)     # a head and its body, both early
    assert reactor.not_before([t0, t0 + 1], t0) == ([t0, t0 + 1], 0)

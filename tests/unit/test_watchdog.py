"""The hub watchdog's decision (fourfold.levels.watchdog.HubWatchdog.verdict), on given times."""

from __future__ import annotations

from fourfold.levels.watchdog import HubWatchdog


def dog(deadline: float | None, beat: float) -> HubWatchdog:
    watchdog = HubWatchdog(deadline, lambda reason: None, stuck_s=2.0, grace_s=2.0, long_stuck_s=30.0)
    watchdog.beat = beat
    return watchdog


def test_past_the_deadline_a_silent_hub_is_given_up_and_a_beating_one_is_not():
    assert dog(100.0, beat=101.0).verdict(104.5).startswith("the run passed its -t by 4.5 s and the event "
                                                            "loop has not answered for 3.5 s")
    assert dog(100.0, beat=103.0).verdict(104.5) == ""          # beat 1.5 s ago: the stop may be running
    assert dog(100.0, beat=90.0).verdict(101.5) == ""           # within the grace after -t


def test_without_a_deadline_only_a_long_silence_counts():
    assert dog(None, beat=0.0).verdict(29.0) == ""
    assert dog(None, beat=0.0).verdict(31.0) == ("the event loop has not answered for 31.0 s (a greenlet "
                                                 "that never yields)")
    assert dog(1000.0, beat=0.0).verdict(31.0).startswith("the event loop has not answered")   # before -t too


def test_a_sigterm_the_hub_does_not_take_is_given_up_two_seconds_later():
    watchdog = dog(None, beat=100.0)
    watchdog.term_at = 101.0
    assert watchdog.verdict(102.5) == ""                        # the stop may still be under way
    assert watchdog.verdict(103.5).startswith("a SIGTERM 2.5 s ago was not taken: the event loop has not "
                                              "answered for 3.5 s")
    watchdog.beat = 103.4                                       # the hub answers: the stop is running
    assert watchdog.verdict(103.5) == ""

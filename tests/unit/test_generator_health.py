"""The load generator's health: the starved verdict and its notes (pure), the mergeable samples,
and the hub sampler measured against a block of known length."""

from __future__ import annotations

import time

import gevent
import pytest

from fourfold.measure.histogram import LogHistogram
from fourfold.measure.loadgen import GeneratorHealth, HubSampler, console_line, cpu_pct
from fourfold.reports.health import health_notes, starved

SHAPE = {"cpu_pct_mean": float, "cpu_pct_max": float, "loop_lag_ms_p50": float, "loop_lag_ms_p99": float,
         "loop_lag_ms_max": float, "samples": int, "processes": int, "starved": bool, "why": str}


def block(cpu: float = 30.0, p99: float = 2.0, samples: int = 600, **extra) -> dict:
    return {"cpu_pct_mean": cpu, "cpu_pct_max": cpu + 5, "loop_lag_ms_p50": 0.4, "loop_lag_ms_p99": p99,
            "loop_lag_ms_max": p99 * 2, "samples": samples, "processes": 1, **extra}


@pytest.mark.parametrize(("given", "expected"), [
    (block(), (False, "CPU 30 % of a core, event-loop lag p99 2.0 ms: within the limits "
                      "(CPU < 90 %, lag p99 < 50 ms)")),
    (block(cpu=89.9, p99=49.9), (False, "CPU 90 % of a core, event-loop lag p99 50 ms: within the limits "
                                        "(CPU < 90 %, lag p99 < 50 ms)")),
    (block(cpu=90.0), (True, "CPU 90 % of a core")),
    (block(cpu=97.2, p99=120.0), (True, "CPU 97 % of a core, event-loop lag p99 120 ms")),
    (block(p99=50.0), (True, "event-loop lag p99 50 ms")),
    (block(p99=7.25, cpu=99.0), (True, "CPU 99 % of a core")),
    # 99 wake-ups: their p99 is the largest one (an import, a GC pass), so lag is not judged; CPU still is
    (block(p99=400.0, samples=99), (False, "CPU 30 % of a core, event-loop lag not judged (99 wake-ups, fewer "
                                           "than 100): within the limits (CPU < 90 %, lag p99 < 50 ms)")),
    (block(p99=400.0, samples=100), (True, "event-loop lag p99 400 ms")),
    (block(cpu=95.0, samples=12), (True, "CPU 95 % of a core")),
    ({"samples": 0, "cpu_pct_mean": 0.0}, (False, "no samples of the load generator's health")),
    ({}, (False, "no samples of the load generator's health")),
    # a damaged block: values that are no numbers count as missing
    (block() | {"cpu_pct_mean": "97", "loop_lag_ms_p99": None}, (False, "CPU 0 % of a core, event-loop lag p99 0.0 ms: within the limits "
                                        "(CPU < 90 %, lag p99 < 50 ms)")),
    (block() | {"cpu_pct_mean": float("nan"), "loop_lag_ms_p99": True}, (False, "CPU 0 % of a core, event-loop lag p99 0.0 ms: within the limits "
                                                "(CPU < 90 %, lag p99 < 50 ms)")),
])
def test_starved(given, expected):
    assert starved(given) == expected


@pytest.mark.parametrize(("summary", "expected"), [
    ({"generator": block(cpu=97.0, p99=120.0)},
     ["baseline: the load generator was starved (CPU 97 % of a core, event-loop lag p99 120 ms): its latencies "
      "include the client's own waiting, not only the target's"]),
    ({"generator": block(p99=64.0)},
     ["baseline: the load generator was starved (event-loop lag p99 64 ms): its latencies include the client's "
      "own waiting, not only the target's"]),
    ({"generator": block()}, []),                              # healthy
    ({"total": {"requests": 10}}, []),                         # an older run: no generator block
    (None, []),                                                # no summary at all
    ({"generator": "starved"}, []),                            # not a block
    # the verdict is today's over the figures, not the flag the run wrote
    ({"generator": {**block(), "starved": True, "why": "old thresholds"}}, []),
])
def test_health_notes(summary, expected):
    assert health_notes("baseline", summary) == expected


def test_console_line_only_for_a_starved_generator():
    sick = GeneratorHealth()
    for _ in range(3):
        sick.add_cpu_pct(95.0)
    sick.add_lag_ms(1.0)
    assert console_line(sick.block()) == (
        "fourfold: WARNING: the load generator was starved (CPU 95 % of a core): its latencies include its own "
        "waiting, not only the target's (summary.json: generator)")
    assert console_line(block() | {"starved": False}) is None
    assert console_line(None) is None


@pytest.mark.parametrize(("cpu_s", "wall_s", "expected"), [(0.5, 1.0, 50.0), (1.8, 1.0, 180.0), (0.0, 1.0, 0.0),
                                                          (0.3, 0.0, 0.0), (-0.1, 1.0, 0.0)])
def test_cpu_pct_is_percent_of_one_core(cpu_s, wall_s, expected):
    assert cpu_pct(cpu_s, wall_s) == pytest.approx(expected)


def test_workers_ship_deltas_and_the_master_merges_them_exactly():
    lags = {"w1": [0.2, 0.4, 3.0, 120.0], "w2": [0.3, 0.5, 0.6, 1.0, 9.0]}
    cpus = {"w1": [40.0, 60.0], "w2": [20.0, 95.0, 30.0]}
    master, alone = GeneratorHealth(), LogHistogram()
    for worker in ("w1", "w2"):
        health = GeneratorHealth()
        for i, lag in enumerate(lags[worker]):
            health.add_lag_ms(lag)
            alone.add(lag)
            if i == 1:                                          # two reports from each worker
                master.merge_wire(worker, health.take_wire())
        for cpu in cpus[worker]:
            health.add_cpu_pct(cpu)
        master.merge_wire(worker, health.take_wire())
        assert health.take_wire() == {}                         # nothing new: nothing shipped
        master.merge_wire("w3", health.take_wire())             # an empty delta names no process
    assert master.lag_ms == alone
    got = master.block()
    assert set(got) == set(SHAPE) and all(type(got[key]) is kind for key, kind in SHAPE.items())
    p50, p99 = alone.quantiles((0.5, 0.99))
    assert got == {"cpu_pct_mean": 49.0, "cpu_pct_max": 95.0, "loop_lag_ms_p50": round(p50, 3),
                   "loop_lag_ms_p99": 120.0, "loop_lag_ms_max": 120.0, "samples": 9, "processes": 2,
                   "starved": False, "why": got["why"]}
    assert got["why"].startswith("CPU 49 % of a core, event-loop lag not judged (9 wake-ups")


def test_an_empty_block_has_the_shape_and_is_not_starved():
    got = GeneratorHealth().block()
    assert set(got) == set(SHAPE) and all(type(got[key]) is kind for key, kind in SHAPE.items())
    assert (got["samples"], got["processes"], got["starved"]) == (0, 0, False)


def _hold_the_hub(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


@pytest.mark.parametrize(("interval_s", "least_ms"), [(0.01, 185.0), (0.1, 95.0)])
def test_the_sampler_measures_a_200_ms_block_of_the_hub(interval_s, least_ms):
    """A greenlet busy for 200 ms while the sampler sleeps ``interval_s``: it wakes 200 ms minus
    what was left of its sleep late (190-200 ms at 10 ms; 100-200 ms at 100 ms), the quiet
    wake-ups around it within a few ms."""
    health = GeneratorHealth()
    sampler = HubSampler(health, interval_s=interval_s).start()
    gevent.sleep(0.35)
    gevent.spawn(_hold_the_hub, 0.2).join()
    gevent.sleep(0.35)
    sampler.stop()
    got = health.block()
    assert least_ms <= got["loop_lag_ms_max"] <= 300.0, got
    assert got["loop_lag_ms_p50"] < 20.0, got
    assert got["samples"] >= 5 and got["processes"] == 1
    samples = got["samples"]
    gevent.sleep(2 * interval_s)
    assert health.block()["samples"] == samples                 # stopped: nothing more is recorded


def test_a_stopped_sampler_keeps_no_wake_up_the_stop_itself_delayed():
    """Locust's stop sequence holds the hub before ``test_stopping``: a wake-up that falls due in
    it comes after the stop and must not be recorded."""
    health = GeneratorHealth()
    sampler = HubSampler(health, interval_s=0.05).start()
    gevent.sleep(0.3)
    _hold_the_hub(0.3)                       # the sampler's timer falls due while nothing runs
    sampler.stop()                           # ... and the stop comes before the hub runs again
    gevent.sleep(0.1)
    assert health.block()["loop_lag_ms_max"] < 50.0


def test_the_sampler_reads_cpu_once_per_interval_as_percent_of_one_core():
    health = GeneratorHealth()
    sampler = HubSampler(health, interval_s=0.02, cpu_interval_s=0.25).start()
    gevent.sleep(0.3)
    for _ in range(8):                       # 0.4 s of work, yielding so the sampler can read
        _hold_the_hub(0.05)
        gevent.sleep(0)
    gevent.sleep(0.8)                        # then idle
    sampler.stop()
    got = health.block()
    assert health.cpu_n >= 3
    assert 60.0 <= got["cpu_pct_max"] <= 110.0, got            # the busy stretch: about one core
    assert got["cpu_pct_mean"] < got["cpu_pct_max"] - 20, got  # the idle ones pull the mean down

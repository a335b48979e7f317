"""The load generator's health: the starved verdict and its notes, and the mergeable samples (pure;
the hub sampler against a block of known length is in tests/integration/test_hub_sampler.py)."""

from __future__ import annotations

import pytest

from fourfold.measure.histogram import LogHistogram
from fourfold.measure.loadgen import GeneratorHealth, GeneratorWatch, console_line, cpu_pct
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
    (block(p99=400.0, samples=99),
     (False, "CPU 30 % of a core, event-loop lag not judged (99 wake-ups, fewer "
             "than 100): within the limits (CPU < 90 %, lag p99 < 50 ms)")),
    (block(p99=400.0, samples=100), (True, "event-loop lag p99 400 ms")),
    (block(cpu=95.0, samples=12), (True, "CPU 95 % of a core")),
    ({"samples": 0, "cpu_pct_mean": 0.0}, (False, "no samples of the load generator's health")),
    ({}, (False, "no samples of the load generator's health")),
    # a damaged block: values that are no numbers count as missing
    (block() | {"cpu_pct_mean": "97", "loop_lag_ms_p99": None},
     (False, "CPU 0 % of a core, event-loop lag p99 0.0 ms: within the limits "
             "(CPU < 90 %, lag p99 < 50 ms)")),
    (block() | {"cpu_pct_mean": float("nan"), "loop_lag_ms_p99": True},
     (False, "CPU 0 % of a core, event-loop lag p99 0.0 ms: within the limits "
             "(CPU < 90 %, lag p99 < 50 ms)")),
])
def test_starved(given, expected):
    assert starved(given) == expected


@pytest.mark.parametrize(("summary", "expected"), [
    ({"generator": block(cpu=97.0, p99=120.0)},
     ["baseline: the load generator was starved (CPU 97 % of a core, event-loop lag p99 120 ms): "
      "its latencies include the client's own waiting, not only the target's"]),
    ({"generator": block(p99=64.0)},
     ["baseline: the load generator was starved (event-loop lag p99 64 ms): its latencies include the "
      "client's own waiting, not only the target's"]),
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
        "fourfold: WARNING: the load generator was starved (CPU 95 % of a core): its latencies include its "
        "own waiting, not only the target's (summary.json: generator)")
    assert console_line(block() | {"starved": False}) is None
    assert console_line(None) is None


@pytest.mark.parametrize(("cpu_s", "wall_s", "expected"),
                         [(0.5, 1.0, 50.0), (1.8, 1.0, 180.0), (0.0, 1.0, 0.0),
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


def test_the_watch_samples_only_when_asked_and_each_test_gets_fresh_samples():
    watch = GeneratorWatch()
    watch.start(sample=False)                      # a master: its block is its workers'
    assert not watch.sampling
    watch.start()
    assert watch.sampling
    watch.start()                                  # a second start replaces the sampler, never adds one
    assert watch.sampling
    watch.stop()
    watch.stop()                                   # idempotent: test_stopping, then test_stop
    assert not watch.sampling
    first = watch.health
    first.add_cpu_pct(40.0)
    watch.new_test()
    assert watch.health is not first and watch.health.block()["samples"] == 0
    assert watch.health.cpu_n == 0 and first.cpu_n == 1

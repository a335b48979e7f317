"""The load generator's hub sampler (fourfold.measure.loadgen.HubSampler) against the real gevent hub:
a block of known length is measured as event-loop lag, a wake-up delayed by the stop is not
recorded, and CPU is read as percent of one core. These wait on the wall clock (a few seconds in
all), so they are timing tests, run again under CPU hogs by .ci/run; the verdicts over the samples
are in tests/unit/test_generator_health.py."""

from __future__ import annotations

import time

import gevent
import pytest

from fourfold.measure.loadgen import GeneratorHealth, HubSampler

pytestmark = pytest.mark.timing


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
    """0.4 s of work between idle stretches: the sampler's busiest reading is this process's real CPU
    share over the work (``process_time`` over wall time), about one core on a quiet machine and less
    when the process waits for a core; a 0.25 s reading covers at least ~0.2 s of the work."""
    health = GeneratorHealth()
    sampler = HubSampler(health, interval_s=0.02, cpu_interval_s=0.25).start()
    gevent.sleep(0.3)
    wall_s, cpu_s = time.perf_counter(), time.process_time()
    for _ in range(8):                       # 0.4 s of work, yielding so the sampler can read
        _hold_the_hub(0.05)
        gevent.sleep(0)
    busy_pct = (time.process_time() - cpu_s) / (time.perf_counter() - wall_s) * 100
    gevent.sleep(0.8)                        # then idle
    sampler.stop()
    got = health.block()
    assert health.cpu_n >= 3
    assert 0.6 * busy_pct <= got["cpu_pct_max"] <= 110.0, (busy_pct, got)    # the busy stretch, as measured
    assert got["cpu_pct_mean"] < 0.7 * got["cpu_pct_max"], got              # the idle ones pull the mean down

"""The load generator's own health: its CPU use and its event-loop lag, and the starved verdict.

A latency the client measures includes the client's own waiting: a greenlet whose token arrived
(or whose request fell due) waits for the gevent hub until every greenlet ahead of it has run.
Kernel receive stamps hide part of that (:mod:`fourfold.client.reactor`), not all of it: sends,
open-loop arrivals and the first read of a busy process are late too. Each process that sends
load (a local runner or a worker) therefore watches itself while a test runs:

- **Event-loop lag.** :class:`HubSampler`'s greenlet sleeps ``LAG_INTERVAL_S`` (100 ms) and
  measures how late it woke (``perf_counter`` after minus before minus the sleep, at least 0):
  the time a ready greenlet waited for the hub. An idle hub wakes it within about 1 ms (libev's
  poll timeout has millisecond resolution); a process busy parsing, collecting garbage or sharing
  its core wakes it late. Each lag (ms) goes into a :class:`LogHistogram`, so workers' lags merge
  exactly on the master.
- **CPU.** At the first wake-up at least ``CPU_INTERVAL_S`` (1 s) after the last reading, the
  process's CPU time (``time.process_time()``: user + system, every thread) over the wall time
  since then: percent of one core, as Locust's own ``cpu_percent`` warning reads it.

Cheap beside the load: ten wake-ups a second, each two clock reads and one histogram add. The
sampler stops at ``test_stopping``, before Locust's stop sequence (whose ``inspect.stack()``
holds the hub for up to a few hundred ms on a busy machine) and the users' cancellation: what it
measured is the test while it ran.

:class:`GeneratorHealth` holds the samples (a worker's, shipped as deltas by :meth:`take_wire`;
the master's, merged from each worker's with :meth:`merge_wire`); :meth:`GeneratorHealth.block`
is summary.json's ``generator`` block, whose ``starved`` / ``why`` are :func:`starved`'s verdict.
"""

from __future__ import annotations

import math
import time
from typing import Any

import gevent

from fourfold.measure.histogram import LogHistogram

LAG_INTERVAL_S = 0.1
CPU_INTERVAL_S = 1.0
CPU_STARVED_PCT = 90.0         # Locust's CPU_WARNING_THRESHOLD (locust/runners.py)
LAG_P99_STARVED_MS = 50.0
MIN_LAG_SAMPLES = 100          # a p99 needs 100 wake-ups (10 s of one process) to be other than the max


def starved(block: dict[str, Any]) -> tuple[bool, str]:
    """Was the load generator starved? ``(verdict, why)`` for a ``generator`` block.

    Starved when either holds:

    - **CPU mean >= 90 % of one core** (``CPU_STARVED_PCT``). A gevent process runs its
      greenlets on one core; near 100 % every ready greenlet queues for it, so reads, sends and
      arrivals are late by the queue. 90 is Locust's own threshold (``CPU_WARNING_THRESHOLD``,
      "may even give inconsistent response time measurements"), here over the whole test's
      one-second samples rather than one 10-s window. The mean, not the max: one busy second
      (start-up, a garbage collection) is not starvation.
    - **Event-loop lag p99 >= 50 ms** (``LAG_P99_STARVED_MS``), judged from at least 100 wake-ups
      (``MIN_LAG_SAMPLES``; below that the p99 is the single largest lag, one import or GC pass).
      A healthy hub wakes a sleeper within ~1 ms; 50 ms is a decode step of a slow engine (the
      simulator's ITL is 10-50 ms) and the lag at which fourfold's own tests saw tokens of one
      stream merged into one read (a 30-100 ms GC pass, docs/architecture.md). Then 1 in 100
      wake-ups waited longer than a token gap: a TTFT or E2E p99 includes the client's waiting.
      CPU may be below 90 % then (a neighbour process takes the core; a long blocking call):
      L1, 128 streams of 200 tokens on a 2-core machine measured CPU 28 %, lag p99 9 ms, TTFT
      p99 55 ms alone, and CPU 22 %, lag p99 88 ms, TTFT p99 82 ms pinned to one core beside a
      busy loop (docs/statistics.md).

    A block with no samples (a test under a second, an older run's summary without lag data) is
    not starved: nothing says it was.
    """
    samples = int(_number(block, "samples"))
    cpu_mean = _number(block, "cpu_pct_mean")
    lag_p99 = _number(block, "loop_lag_ms_p99")
    if samples <= 0:
        return False, "no samples of the load generator's health"
    reasons = []
    if cpu_mean >= CPU_STARVED_PCT:
        reasons.append(f"CPU {cpu_mean:.0f} % of a core")
    lag_judged = samples >= MIN_LAG_SAMPLES
    if lag_judged and lag_p99 >= LAG_P99_STARVED_MS:
        reasons.append(f"event-loop lag p99 {_ms(lag_p99)} ms")
    if reasons:
        return True, ", ".join(reasons)
    lag = (f"event-loop lag p99 {_ms(lag_p99)} ms" if lag_judged
           else f"event-loop lag not judged ({samples} wake-ups, fewer than {MIN_LAG_SAMPLES})")
    return False, (f"CPU {cpu_mean:.0f} % of a core, {lag}: within the limits "
                   f"(CPU < {CPU_STARVED_PCT:.0f} %, lag p99 < {LAG_P99_STARVED_MS:.0f} ms)")


def _number(block: dict[str, Any], key: str) -> float:
    """``block[key]`` as a finite float; 0 when missing or not a number (a damaged or older block)."""
    value = block.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return 0.0
    return float(value)


def _ms(value: float) -> str:
    return f"{value:.0f}" if value >= 10 else f"{value:.1f}"


def cpu_pct(cpu_s: float, wall_s: float) -> float:
    """CPU time over wall time, in percent of one core (0 for no wall time)."""
    return 100.0 * max(0.0, cpu_s) / wall_s if wall_s > 0 else 0.0


class GeneratorHealth:
    """Lag samples (ms, a LogHistogram) and one-second CPU samples (count, sum, max) of one
    process, or merged from several (``workers``: the ids whose samples were merged)."""

    def __init__(self) -> None:
        self.lag_ms = LogHistogram()
        self.cpu_n = 0
        self.cpu_sum = 0.0
        self.cpu_max = 0.0
        self.own = False                      # this process sampled itself (a local runner or a worker)
        self.workers: set[str] = set()

    def add_lag_ms(self, lag_ms: float) -> None:
        self.own = True
        self.lag_ms.add(lag_ms)

    def add_cpu_pct(self, pct: float) -> None:
        self.own = True
        self.cpu_n += 1
        self.cpu_sum += pct
        self.cpu_max = max(self.cpu_max, pct)

    def take_wire(self) -> dict[str, Any]:
        """The samples since the last call (``{}`` when none), for a worker's report; resets them."""
        if not self.lag_ms.count and not self.cpu_n:
            return {}
        wire = {"lag_ms": self.lag_ms.to_wire(), "cpu_n": self.cpu_n, "cpu_sum": self.cpu_sum,
                "cpu_max": self.cpu_max}
        self.lag_ms = LogHistogram()
        self.cpu_n, self.cpu_sum, self.cpu_max = 0, 0.0, 0.0
        return wire

    def merge_wire(self, worker: str, wire: dict[str, Any]) -> None:
        """Add a worker's delta (exact: histogram buckets, CPU count and sum add, max combines)."""
        if not wire:
            return
        self.workers.add(worker)
        self.lag_ms.merge_wire(wire.get("lag_ms") or {})
        self.cpu_n += int(wire.get("cpu_n") or 0)
        self.cpu_sum += float(wire.get("cpu_sum") or 0.0)
        self.cpu_max = max(self.cpu_max, float(wire.get("cpu_max") or 0.0))

    @property
    def processes(self) -> int:
        return len(self.workers) + (1 if self.own else 0)

    def block(self) -> dict[str, Any]:
        """summary.json's ``generator`` block (see docs/running.md)."""
        p50, p99 = self.lag_ms.quantiles((0.5, 0.99))
        block: dict[str, Any] = {
            "cpu_pct_mean": round(self.cpu_sum / self.cpu_n, 1) if self.cpu_n else 0.0,
            "cpu_pct_max": round(self.cpu_max, 1),
            "loop_lag_ms_p50": round(p50 or 0.0, 3),
            "loop_lag_ms_p99": round(p99 or 0.0, 3),
            "loop_lag_ms_max": round(self.lag_ms.max or 0.0, 3),
            "samples": self.lag_ms.count,
            "processes": self.processes,
        }
        block["starved"], block["why"] = starved(block)
        return block


def console_line(block: dict[str, Any] | None) -> str | None:
    """The end-of-run line for a starved generator; None otherwise."""
    if not block or not block.get("starved"):
        return None
    return (f"fourfold: WARNING: the load generator was starved ({block.get('why')}): its latencies include "
            f"its own waiting, not only the target's (summary.json: generator)")


class HubSampler:
    """One greenlet that measures the hub's lag every ``interval_s`` and the process's CPU every
    ``cpu_interval_s`` into ``health`` (see the module docstring). ``start()`` / ``stop()``."""

    def __init__(self, health: GeneratorHealth, interval_s: float = LAG_INTERVAL_S,
                 cpu_interval_s: float = CPU_INTERVAL_S) -> None:
        self.health = health
        self.interval_s = interval_s
        self.cpu_interval_s = cpu_interval_s
        self._greenlet: Any = None
        self._running = False

    def start(self) -> HubSampler:
        self._running = True
        self._greenlet = gevent.spawn(self._loop)
        return self

    def stop(self) -> None:
        """Stop sampling now; a wake-up already due (a hub blocked by the stop itself) is not kept."""
        self._running = False
        if self._greenlet is not None:
            self._greenlet.kill(block=False)
            self._greenlet = None

    def _loop(self) -> None:
        loop = gevent.get_hub().loop
        sleep, clock, cpu_clock = gevent.sleep, time.perf_counter, time.process_time
        interval, health = self.interval_s, self.health
        cpu_at, cpu_then = clock(), cpu_clock()
        while True:
            loop.update_now()             # the timer counts from now, not from the loop's cached time
            before = clock()
            sleep(interval)
            now = clock()
            if not self._running:
                return
            health.add_lag_ms(max(0.0, (now - before - interval) * 1000.0))
            if now - cpu_at >= self.cpu_interval_s:
                cpu_now = cpu_clock()
                health.add_cpu_pct(cpu_pct(cpu_now - cpu_then, now - cpu_at))
                cpu_at, cpu_then = now, cpu_now


class GeneratorWatch:
    """One process's watch over its own health, test by test: ``health`` (this process's samples,
    or on a master its workers' merged ones) and the sampler that fills it while a test runs."""

    def __init__(self) -> None:
        self.health = GeneratorHealth()
        self._sampler: HubSampler | None = None

    def start(self, *, sample: bool = True) -> None:
        """At a test's start: sample this process until :meth:`stop` (``sample=False``, a master,
        which sends no load: its block is its workers')."""
        self.stop()
        if sample:
            self._sampler = HubSampler(self.health).start()

    def stop(self) -> None:
        """Before Locust's stop sequence holds the hub, and at the test's stop (idempotent)."""
        if self._sampler is not None:
            self._sampler.stop()
            self._sampler = None

    @property
    def sampling(self) -> bool:
        return self._sampler is not None

    def new_test(self) -> None:
        """A new test in the same process: its own samples."""
        self.health = GeneratorHealth()


__all__ = ["CPU_STARVED_PCT", "LAG_P99_STARVED_MS", "MIN_LAG_SAMPLES", "GeneratorHealth", "GeneratorWatch",
           "HubSampler", "console_line", "cpu_pct", "starved"]

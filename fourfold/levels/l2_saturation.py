"""``--stop-on-saturation``: each step's series, kept where the records arrive, judged by
:mod:`fourfold.gates.saturation`.

A record listener (``runtime.extras``, on the local runner or the master: workers' records reach
the master's run directory, and its listeners, with their stats reports) keeps, per ladder step
(``ladder@32``) and sweep step (``sweep@12.5/s``), each ok request's arrival (its send, or its
intended arrival in an open loop), its latency (TTFT, plus the client queue in an open loop), its
end and its output tokens: a bounded series (:data:`MAX_POINTS` per step, :data:`MAX_STEPS` steps).
Other scenarios (the interference probe's ``probe``, ``--direct-host``'s ``ladder@8@direct``) are
not the ladder's or the sweep's and are left out.

- The ladder (:func:`check_ladder`, from ``LadderShape.tick`` each second): the step's TTFT trend
  (:func:`~fourfold.gates.saturation.judge_trend`) and, from a quarter of the hold on, Little's law
  against the step below over the same length of time
  (:func:`~fourfold.gates.saturation.judge_steps`); the first verdict stops the run.
- The sweep (:func:`judge_sweep_step`, when the controller judges a step): the trend of TTFT from
  the intended arrival and of the requests in flight (counted from the records: arrived and not yet
  ended at each arrival).

Times are the records' wall clocks (``started_at``) against this process's ``time.time()``: on a
master with workers on other machines their clocks' offset shifts where a step begins, by as much.
"""

from __future__ import annotations

import bisect
import logging
import statistics
import time
from collections import deque
from collections.abc import Sequence
from typing import Any

from fourfold.gates.saturation import (
    Saturation,
    StepFigures,
    judge_steps,
    judge_trend,
    min_compare_s,
    min_judge_s,
)
from fourfold.levels.state import state_of
from fourfold.measure.record import RequestRecord

log = logging.getLogger("fourfold")
MAX_POINTS = 50_000        # per step: its most recent requests
MAX_STEPS = 64             # steps kept: the oldest go first
Point = tuple[float, float, float, int]   # (arrival, latency ms, end: Unix seconds; output tokens)


class SaturationWatch:
    """The steps' series and, once the ladder stopped, why (module docstring)."""

    def __init__(self) -> None:
        self.enabled = False
        self.series: dict[str, deque[Point]] = {}
        self.stopped: dict[str, Any] | None = None

    def reset(self, enabled: bool) -> None:
        """A test starts: keep series only when a verdict will be asked for."""
        self.enabled, self.series, self.stopped = enabled, {}, None

    def on_record(self, record: RequestRecord) -> None:
        if (not self.enabled or record.warmup or not record.ok or record.ttft_ms is None
                or "@" not in record.scenario or record.scenario.count("@") > 1):
            return
        points = self.series.get(record.scenario)
        if points is None:
            while len(self.series) >= MAX_STEPS:
                del self.series[next(iter(self.series))]
            points = self.series[record.scenario] = deque(maxlen=MAX_POINTS)
        arrival = record.started_at - record.queue_ms / 1000
        points.append((arrival, record.queue_ms + record.ttft_ms,
                       record.started_at + (record.e2e_ms or record.ttft_ms) / 1000, record.output_tokens))

    def bases(self, users: int) -> list[str]:
        """The ladder bases (``ladder``, ``h1``...) with records at ``users``."""
        return sorted(head for head, _, tail in (key.rpartition("@") for key in self.series)
                      if tail == str(users))


def watch_of(environment: Any) -> SaturationWatch:
    found = state_of(environment).get(SaturationWatch)
    return found if found is not None else state_of(environment).put(SaturationWatch())


def step_figures(points: Sequence[Point], t0: float, window_s: float, users: int) -> StepFigures:
    """Output tokens/s of the requests that ended in ``[t0, t0 + window_s]`` and the TTFT p50 of those
    that arrived in it."""
    end = t0 + window_s
    ended = [p for p in points if t0 <= p[2] <= end]
    started = [p[1] for p in points if t0 <= p[0] <= end]
    return StepFigures(users, len(ended), sum(p[3] for p in ended) / window_s if window_s > 0 else 0.0,
                       statistics.median(started) if started else 0.0)


def in_flight_samples(points: Sequence[Point], t0: float) -> list[tuple[float, float]]:
    """At each arrival: the requests arrived and not yet ended (seconds since ``t0``, count)."""
    arrivals = sorted(p[0] for p in points)
    ends = sorted(p[2] for p in points)
    return [(a - t0, float(i + 1 - bisect.bisect_right(ends, a))) for i, a in enumerate(arrivals)]


def check_ladder(environment: Any, steps: Sequence[int], hold_s: float,
                 elapsed_s: float) -> dict[str, Any] | None:
    """``LadderShape.tick``'s question each second: has the step now running saturated? The first
    verdict is kept (``stopped``: base, step, at_s, reason) and returned; None while none."""
    watch = watch_of(environment)
    if watch.stopped is not None:
        return watch.stopped
    index = int(elapsed_s // hold_s)
    if index >= len(steps):
        return None
    users, in_step = steps[index], elapsed_s - index * hold_s
    t0 = time.time() - in_step
    for base in watch.bases(users):
        points = list(watch.series.get(f"{base}@{users}") or ())
        verdict = judge_trend([(p[0] - t0, p[1]) for p in points], in_step, min_judge_s(hold_s))
        below = watch.series.get(f"{base}@{steps[index - 1]}") if index else None
        if not verdict.saturated and below and in_step >= min_compare_s(hold_s):
            verdict = judge_steps(step_figures(list(below), t0 - hold_s, in_step, steps[index - 1]),
                                  step_figures(points, t0, in_step, users))
        if verdict.saturated:
            watch.stopped = {"base": base, "step": users, "at_s": round(elapsed_s, 1),
                             "in_step_s": round(in_step, 1), "reason": verdict.reason}
            log.warning("fourfold: ladder '%s' stopped at %d users, %.1f s into the step "
                        "(--stop-on-saturation): %s", base, users, in_step, verdict.reason)
            return watch.stopped
    return None


def judge_sweep_step(environment: Any, scenario: str, started_wall: float, duration_s: float) -> Saturation:
    """A ``--sweep`` step's trend of TTFT from arrival and of the requests in flight."""
    points = list(watch_of(environment).series.get(scenario) or ())
    return judge_trend([(p[0] - started_wall, p[1]) for p in points], duration_s, min_judge_s(duration_s),
                       in_flight=in_flight_samples(points, started_wall), what="TTFT from arrival")


def stopped_lines(stopped: dict[str, Any] | None) -> list[str]:
    if not stopped:
        return []
    return [f"L2 ladder '{stopped['base']}' stopped early at {stopped['step']} users, "
            f"{stopped['in_step_s']:g} s into the step ({stopped['at_s']:g} s into the run; "
            f"--stop-on-saturation): {stopped['reason']}"]


__all__ = ["SaturationWatch", "check_ladder", "in_flight_samples", "judge_sweep_step", "step_figures",
           "stopped_lines", "watch_of"]

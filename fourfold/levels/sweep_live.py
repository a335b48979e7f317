"""``--sweep``: the capacity sweep inside one open-loop run (``l2_open_loop.py``), live in the web UI.

One test steps the offered rate through the rates :func:`fourfold.gates.sweep.next_rate` picks,
starting at ``--arrival-rate``. Each *step* offers one rate for ``--sweep-step-s`` seconds under
its own scenario name (``sweep@12.5/s``; a rate run again ``sweep@12.5/s#2``), so LLMStats keeps the
steps apart; then no arrival comes until the step's requests are back (at most one more
``--sweep-step-s``: whatever is still in flight then is cancelled, and the step counts as
saturated; with ``--stop-on-saturation`` also a step whose TTFT from arrival and requests in
flight kept growing, :func:`fourfold.levels.l2_saturation.judge_sweep_step`, with that reason).
The step is judged from its own records only (:func:`step_summary` ->
:func:`fourfold.gates.sweep.rate_point`), the next rate is chosen, and when the search is done
the test stops (headless: the run ends; web UI: Stop).

Who does what, in every runner (Locust custom messages; a local runner delivers them in-process):

- the :class:`Controller` (local runner or master) decides each step and sends it to the
  dispatchers with ``fourfold_sweep_step``;
- each dispatcher (:func:`run_dispatcher`, the open-loop user's task) offers its share of the rate
  (``rate / dispatchers``, as with ``--arrival-rate``), waits for its requests, ships its records
  (a worker sends its stats report at once) and answers ``fourfold_sweep_done`` with what it sent
  and what it had to cut;
- the controller judges the step once every dispatcher answered (the records arrived first, on
  the same connection).
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, replace
from typing import Any

import gevent
import gevent.event
import gevent.pool
from locust.runners import STATE_RUNNING, MasterRunner, WorkerRunner

from fourfold.adapters.locust import send_stats_now
from fourfold.errors import OptionError
from fourfold.gates.gate import load_slo
from fourfold.gates.sweep import (
    RatePoint,
    SearchPlan,
    format_table,
    knee_metric,
    next_rate,
    rate_point,
    result_of,
)
from fourfold.levels.arrivals import ArrivalProcess, dispatcher_seed
from fourfold.levels.base import selected_items
from fourfold.levels.l2_saturation import judge_sweep_step
from fourfold.levels.l2_stats import SWEEP_BASE as STEP_BASE
from fourfold.levels.runtime import get_runtime
from fourfold.workloads.trace import is_trace

log = logging.getLogger("fourfold")
STEP_MSG, DONE_MSG = "fourfold_sweep_step", "fourfold_sweep_done"
QUEUE_P99_LIMIT_MS = 100.0      # a step whose client queue p99 is above this: the generator fell behind


@dataclass(frozen=True)
class Step:
    seq: int
    scenario: str
    rate_rps: float
    duration_s: float
    drain_s: float


# ---- pure parts ----
def round_rate(rate_rps: float) -> float:
    """Four significant digits: the rate in the step's name is the rate offered."""
    return float(f"{rate_rps:.4g}")


def step_scenario(rate_rps: float, points: list[RatePoint]) -> str:
    """``sweep@12.5/s``; the n-th run of a rate already run ``sweep@12.5/s#n`` (the unit keeps a
    whole rate, ``sweep@6/s``, from reading as a ladder step of 6 users)."""
    runs = sum(1 for p in points if p.offered_rps == rate_rps)
    return f"{STEP_BASE}@{rate_rps:g}/s" + (f"#{runs + 1}" if runs else "")


def step_summary(group: dict[str, Any] | None, sent: int, cut: int, duration_s: float,
                 missing: int = 0) -> dict[str, Any]:
    """One step as a summary.json-like dict for :func:`fourfold.gates.sweep.rate_point`: ``total``
    (and ``groups``) its LLMStats group, ``l2.open_loop`` its rates and whether target and load
    generator kept up. ``cut``: requests still in flight a drain after the step (cancelled);
    ``missing``: dispatchers that never answered."""
    total = dict(group or {})
    queue_p99 = (total.get("queue_ms") or {}).get("p99")
    loop = {"sent_rps": sent / duration_s, "completed_rps": int(total.get("requests") or 0) / duration_s,
            "target_kept_up": cut == 0,
            "generator_kept_up": missing == 0 and (queue_p99 is None or queue_p99 <= QUEUE_P99_LIMIT_MS)}
    return {"total": total, "groups": [total] if group else [], "l2": {"open_loop": loop}}


def sweep_slo_text(slo: str, slo_ttft_p95_ms: float) -> str:
    """The run's ``--slo``; without one, the L2 ladder's ``--slo-ttft-p95-ms``."""
    return slo or f"ttft_p95<={slo_ttft_p95_ms:g}ms"


# ---- the controller (local runner or master) ----
class Controller:
    def __init__(self, environment: Any, settings: Any, slo_text: str, dispatchers: int) -> None:
        self.environment, self.settings = environment, settings
        self.slo_text, self.slos = slo_text, load_slo(slo_text)
        self.plan = SearchPlan(tolerance=settings.sweep_tolerance, max_runs=settings.sweep_max_steps)
        self.start_rps = settings.arrivals.rate_rps
        self.dispatchers = dispatchers
        self.points: list[RatePoint] = []
        self.current: Step | None = None
        self.answers: list[dict[str, Any]] = []
        self.answered = gevent.event.Event()
        self.stopped = ""
        self.finished = False
        self.greenlet: gevent.Greenlet | None = None
        self.step_started = 0.0          # time.time() when the current step was sent

    def start(self) -> None:
        self.greenlet = gevent.spawn(self._run)

    def cancel(self, why: str) -> None:
        if self.greenlet is not None and not self.finished:
            self.greenlet.kill(block=False)
            self.stopped, self.finished, self.current = why, True, None

    def on_done(self, environment: Any = None, msg: Any = None, **_kw: Any) -> None:
        data = getattr(msg, "data", None) or {}
        if self.current is not None and data.get("seq") == self.current.seq:
            self.answers.append(data)
            if len(self.answers) >= self.dispatchers:
                self.answered.set()

    def _run(self) -> None:
        runner = self.environment.runner
        deadline = time.monotonic() + 60
        while runner.state != STATE_RUNNING and time.monotonic() < deadline:    # every dispatcher spawned
            gevent.sleep(0.1)
        seq = 0
        while True:
            rate, why = next_rate(self.points, self.start_rps, self.plan)
            if rate is None:
                self.stopped = why
                break
            rate, seq = round_rate(rate), seq + 1
            step = Step(seq, step_scenario(rate, self.points), rate, self.settings.sweep_step_s,
                        self.settings.sweep_step_s)
            self.current, self.answers = step, []
            self.answered.clear()
            log.info("fourfold sweep: offering %g/s for %g s (%s)", rate, step.duration_s, step.scenario)
            self.step_started = time.time()
            runner.send_message(STEP_MSG, asdict(step))
            self.answered.wait(timeout=step.duration_s + step.drain_s + 10)
            self.points.append(self.judge(step))
        self.finished, self.current = True, None
        log.info("fourfold sweep: done (%s); the test stops", self.stopped)
        headless = getattr(self.environment.parsed_options, "headless", False)
        gevent.spawn_later(0.05, runner.quit if headless else runner.stop)

    def judge(self, step: Step) -> RatePoint:
        group = get_runtime(self.environment).stats.groups.get(("l2", step.scenario))
        answers = self.answers
        summary = step_summary(group.summary("l2", step.scenario) if group is not None else None,
                               sum(int(a.get("sent", 0)) for a in answers),
                               sum(int(a.get("cut", 0)) for a in answers),
                               step.duration_s, missing=max(0, self.dispatchers - len(answers)))
        point = replace(rate_point(step.rate_rps, summary, self.slos), scenario=step.scenario)
        if self.settings.stop_on_saturation:      # the step's latency and requests in flight kept growing
            verdict = judge_sweep_step(self.environment, step.scenario, self.step_started, step.duration_s)
            if verdict.saturated:
                point = replace(point, passed=False, saturated=True,
                                reason="; ".join(r for r in (point.reason, verdict.reason) if r))
        log.info("fourfold sweep: %g/s offered, %.2f/s achieved: %s", step.rate_rps,
                 point.achieved_rps or 0.0, "meets the SLO" if point.passed else f"MISSES ({point.reason})")
        return point

    def result(self) -> Any:
        stopped = self.stopped or "still searching"
        return result_of(self.points, self.plan, stopped, knee_metric(self.slos))

    def block(self) -> dict[str, Any]:
        """``summary.json``'s ``l2.sweep``: ``fourfold sweep``'s ``sweep`` block, plus the step now
        running."""
        current = self.current
        return {"slo": self.slo_text, "tolerance": self.plan.tolerance, "step_s": self.settings.sweep_step_s,
                "start_rps": self.start_rps, "arrival_process": self.settings.arrivals.kind,
                "dispatchers": self.dispatchers, "finished": self.finished,
                "current_rps": current.rate_rps if current else None, **self.result().to_dict()}

    def lines(self) -> list[str]:
        return format_table(self.result(), self.slo_text)


# ---- the dispatchers (local runner or workers) ----
class StepBox:
    """The step a dispatcher is to offer next (set by the ``fourfold_sweep_step`` message)."""

    def __init__(self) -> None:
        self.step: Step | None = None
        self.changed = gevent.event.Event()

    def on_step(self, environment: Any = None, msg: Any = None, **_kw: Any) -> None:
        self.step = Step(**msg.data)
        self.changed.set()

    def wait(self, after: int) -> Step:
        while self.step is None or self.step.seq <= after:
            self.changed.clear()
            self.changed.wait()
        return self.step


def run_dispatcher(user: Any, box: StepBox, dispatchers: int, index: int) -> None:
    """The open-loop user's task under ``--sweep`` (see the module docstring); never returns."""
    gateway = user.gateway
    pool = gevent.pool.Pool(gateway.max_in_flight)
    runner = user.environment.runner
    now, seen = time.perf_counter_ns, 0
    try:
        while True:
            step = box.wait(seen)
            seen = step.seq
            process = ArrivalProcess(gateway.arrivals.kind, step.rate_rps, gateway.arrivals.burstiness)
            gaps = process.share(dispatchers).gaps(dispatcher_seed(gateway.arrival_seed, index) + step.seq)
            due = now()
            end, sent, dropped = due + int(step.duration_s * 1e9), 0, 0
            while True:
                due += int(next(gaps) * 1e9)
                if due > end:
                    break
                delay_s = (due - now()) / 1e9
                if delay_s > 0:
                    gevent.sleep(delay_s)
                if pool.full():
                    if gateway.max_in_flight_policy == "drop":
                        dropped += 1
                        continue
                    pool.wait_available()
                pool.spawn(user.send_item, user.next_item(), scenario=step.scenario, intended_ns=due)
                sent += 1
            gevent.sleep(max(0.0, (end - now()) / 1e9))
            pool.join(timeout=step.drain_s)
            cut = len(pool)
            pool.kill(block=True, timeout=5)       # in flight a drain later: cancelled, the step saturated
            send_stats_now(runner)                  # a worker: this step's records reach the master first
            runner.send_message(DONE_MSG, {"seq": step.seq, "sent": sent, "cut": cut, "dropped": dropped})
    finally:
        pool.kill(block=True, timeout=5)


def check_inputs(open_loop: bool, gateway: Any, settings: Any) -> None:
    """At ``init``: ``--sweep`` needs the open-loop dispatcher and offers rates, not a trace (OptionError)."""

    if not gateway.sweep:
        return
    if not open_loop:
        raise OptionError("--sweep steps an open-loop rate: run it with locustfiles/l2_open_loop.py")
    if is_trace(selected_items(settings.dataset, settings)):
        raise OptionError("--sweep offers rates of its own choosing: it does not replay a trace (--dataset)")


def register(environment: Any, state: Any) -> None:
    """At ``init``: the custom messages on this runner (a worker takes steps, a master answers, a
    local runner both); ``state`` (L2State) holds the StepBox and, per test, the Controller."""

    runner = environment.runner
    if runner is None:
        return
    if not isinstance(runner, MasterRunner):
        runner.register_message(STEP_MSG,
                                lambda environment, msg, **kw: state.step_box.on_step(environment, msg))
    if not isinstance(runner, WorkerRunner):
        runner.register_message(DONE_MSG, lambda environment, msg, **kw: state.sweep and state.sweep.on_done(
            environment, msg))


def begin(environment: Any, state: Any, run_slo: str, dispatchers: int) -> None:
    """A test starts (local runner or master): a new Controller when ``--sweep`` is on."""
    old = getattr(state, "sweep", None)
    if old is not None:
        old.cancel("a new test started")
    state.sweep = None
    settings = state.settings
    if settings.sweep:
        state.sweep = Controller(environment, settings, sweep_slo_text(run_slo, settings.slo_ttft_p95_ms),
                                 dispatchers)
        state.sweep.start()


def end(state: Any) -> None:
    """The test's end: a search still running stops where it is."""
    sweep = getattr(state, "sweep", None)
    if sweep is not None and not sweep.finished:
        sweep.cancel("the test stopped before the search was done (-t, or Stop)")


__all__ = ["Controller", "Step", "StepBox", "begin", "check_inputs", "end", "register", "round_rate",
           "run_dispatcher", "step_scenario", "step_summary", "sweep_slo_text"]

"""L2 API gateway: request scheduling in front of the model.

Users (concrete classes; the locustfiles import them):

- :class:`GatewayUser`: closed loop (each user sends, waits ``--think-time-s``, sends again).
  With :class:`fourfold.levels.ladder.LadderShape` in the locustfile it climbs the concurrency ladder and
  tags every record with its step (scenario ``ladder@32``).
- :class:`H1User` / :class:`H2User`: the same closed loop over HTTP/1.1 (fourfold's transport)
  and over HTTP/2 (httpx + h2; h2c prior knowledge on ``http://``), scenarios ``h1`` / ``h2``,
  so one run compares the protocols side by side.
- :class:`OpenLoopUser`: one dispatcher (``fixed_count = 1``) that draws arrival gaps
  (:mod:`fourfold.levels.arrivals`) and spawns a greenlet per arrival into a pool capped at
  ``--max-in-flight``; ``queue_ms`` is the time from each intended arrival to its send. In a
  distributed run the master gives every worker one dispatcher and each draws
  ``--arrival-rate / workers`` from its own seed. With a trace as ``--dataset``
  (:mod:`fourfold.workloads.trace`) it sends each entry at its own time instead (``--trace-speed``;
  dispatcher i of D takes entries i, i + D, ...), puts the scheduled time in ``extra.scheduled_at``,
  and stops when its share is done (a local run then ends).

Every request records its connection facts (new or reused, reconnect after an idle close, HTTP
version, connect time). ``--honour-retry-after`` makes a closed-loop user wait out a 429/503's
``Retry-After`` (capped) before its next request. At the end of a run (local runner or master)
the ladder with its knee, the connection facts per scenario and the open-loop report go into
``summary.json`` (key ``l2``) and are printed under the LLM summary.
"""

from __future__ import annotations

import logging
import sys
import time
from dataclasses import replace
from typing import Any, ClassVar, NoReturn

import gevent
import gevent.pool
from locust import task
from locust.exception import StopUser
from locust.runners import LocalRunner, MasterRunner, WorkerRunner

from fourfold.client.factory import make_http_client
from fourfold.client.reactor import realtime_offset_ns
from fourfold.errors import OptionError
from fourfold.levels import hooks, sweep_live
from fourfold.levels.arrivals import arrivals_until, dispatcher_seed, trace_gaps, trace_share
from fourfold.levels.base import LLMUser, selected_items
from fourfold.levels.l2_direct import DirectArm
from fourfold.levels.l2_options import GatewaySettings
from fourfold.levels.l2_options import register as register_options
from fourfold.levels.l2_probe import PROBE_SCENARIO, PROBE_SEED_OFFSET, ProbeSource
from fourfold.levels.l2_saturation import SaturationWatch, watch_of
from fourfold.levels.l2_stats import DispatcherReport, GatewayStats, quarter_means
from fourfold.levels.l2_summary import OPEN_SCENARIO, l2_report
from fourfold.levels.ladder import STEP_ATTR, step_scenario
from fourfold.levels.options import Settings
from fourfold.levels.runtime import find_runtime, get_runtime
from fourfold.levels.state import state_of
from fourfold.measure.record import RequestRecord
from fourfold.workloads.trace import arrival_offsets_s, is_trace

log = logging.getLogger("fourfold")
DISPATCHERS_ATTR = "fourfold_dispatchers"    # parsed_options: open-loop dispatchers in the whole run


class L2State:
    """Per-environment L2 state: the settings of the current run and the GatewayStats."""

    def __init__(self, settings: GatewaySettings) -> None:
        self.settings = settings
        self.stats = GatewayStats()
        self.sweep: sweep_live.Controller | None = None  # --sweep: this test's search (local runner, master)
        self.step_box = sweep_live.StepBox()              # --sweep: the step a dispatcher offers next
        self.probe: ProbeSource | None = None             # --probe-request-rate: this process's source
        self.saturation = SaturationWatch()               # --stop-on-saturation: the steps' series

    def on_report_to_master(self, client_id: str, data: dict[str, Any]) -> None:
        data["fourfold_l2"] = self.stats.take_wire()

    def on_worker_report(self, client_id: str, data: dict[str, Any]) -> None:
        payload = data.get("fourfold_l2")
        if payload:
            self.stats.merge_wire(payload)


def get_state(environment: Any) -> L2State:
    state = state_of(environment).get(L2State)
    if state is None:
        state = state_of(environment).put(L2State(_settings_or_exit(environment.parsed_options)))
        state.saturation = watch_of(environment)
        environment.events.report_to_master.add_listener(state.on_report_to_master)
        environment.events.worker_report.add_listener(state.on_worker_report)
    return state


def _settings_or_exit(options: Any) -> GatewaySettings:
    try:
        return GatewaySettings.from_options(options)
    except ValueError as exc:
        print(f"fourfold: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


def add_arguments(parser: Any, **_kw: Any) -> None:
    """``init_command_line_parser`` listener: the shared options, then L2's (once per parser)."""
    hooks.add_arguments(parser)
    if hooks.first_time(parser, "l2"):
        _on_parser(parser)


def register(environment: Any, **_kw: Any) -> None:
    """``init`` listener: the shared listeners, then L2's (its ``l2`` block: a finish listener)."""
    hooks.register_level(environment, "l2", _on_init, finish=_on_finish, block=l2_block,
                         test_start=_on_test_start, test_stop=_on_test_stop)


# ---- users ----
class GatewayBase(LLMUser):
    """Abstract: L2 settings, client choice (HTTP/1.1 or HTTP/2), Retry-After, think time."""

    abstract = True
    level = "l2"
    force_http2: ClassVar[bool | None] = None      # None: --http2 decides
    level_listeners = (add_arguments, register)

    @classmethod
    def check_inputs(cls, options: Any, settings: Settings) -> None:
        """At ``init`` (:mod:`fourfold.levels.inputs`): the prompts and L2's options."""
        super().check_inputs(options, settings)
        sweep_live.check_inputs(hasattr(cls, "dispatch"), GatewaySettings.from_options(options), settings)

    def __init__(self, environment: Any) -> None:
        super().__init__(environment)
        self.l2 = get_state(environment)
        self.gateway = self.l2.settings
        http2 = self.settings.http2 if self.force_http2 is None else self.force_http2
        pool = self.pool_size()
        if http2 != self.settings.http2 or pool != 4:
            self.client.close()
            s = self.settings
            self.client = make_http_client(self.host or "", headers=s.request_headers(), http2=http2,
                                           insecure=s.insecure, read_timeout_s=s.read_timeout_s,
                                           connect_timeout_s=s.connect_timeout_s, max_connections=pool)
        self._pause_s = 0.0

    def pool_size(self) -> int:
        """Idle connections kept per origin (a closed-loop user needs one)."""
        return 4

    def wait_time(self) -> float:  # type: ignore[override]
        pause, self._pause_s = self._pause_s, 0.0
        return self.gateway.think_time_s + pause

    def send_item(self, item: Any, *, scenario: str | None = None, intended_ns: int | None = None,
                  extra: dict[str, Any] | None = None) -> RequestRecord:
        from_arrival = intended_ns is not None

        def account(record: RequestRecord) -> None:
            # before the record reaches the sinks, so a stop that interrupts them loses nothing here
            if not record.warmup:
                self.l2.stats.add(record, from_arrival=from_arrival)
            retry_after = record.extra.get("retry_after_s")
            if self.gateway.honour_retry_after and retry_after is not None and record.status in (429, 503):
                wait_s = min(max(float(retry_after), 0.0), self.gateway.retry_after_cap_s)
                self._pause_s = max(self._pause_s, wait_s)
                if not record.warmup:
                    self.l2.stats.add_retry_after_wait(record.scenario, wait_s)

        return self.request(item, scenario=scenario, intended_ns=intended_ns, annotate=account, extra=extra)


class ClosedLoopBase(GatewayBase):
    abstract = True
    step_base: ClassVar[str] = "ladder"   # records of a ladder step are "<step_base>@<users>"

    def __init__(self, environment: Any) -> None:
        super().__init__(environment)
        direct = self.gateway.direct_host        # --direct-host: pairs through the gateway and direct
        self.direct = DirectArm(self.settings, direct, self.user_index) if direct else None

    @task
    def send_next(self) -> None:
        step = getattr(self.environment.parsed_options, STEP_ATTR, None)
        scenario = step_scenario(self.step_base, step) if step else None
        if self.direct is None:
            self.send_item(self.next_item(), scenario=scenario)
        else:
            self.direct.send(self, scenario or self.scenario)

    def on_stop(self) -> None:
        if self.direct is not None:
            self.direct.close()
        super().on_stop()


class GatewayUser(ClosedLoopBase):
    """Closed loop through the gateway; climbs the ladder when LadderShape is in the locustfile."""

    scenario = "closed"
    step_base = "ladder"


class H1User(ClosedLoopBase):
    """Closed loop over HTTP/1.1 (scenario ``h1``), whatever ``--http2`` says."""

    scenario = "h1"
    step_base = "h1"
    force_http2 = False


class H2User(ClosedLoopBase):
    """Closed loop over HTTP/2 (scenario ``h2``): ALPN over https, prior knowledge (h2c) over http."""

    scenario = "h2"
    step_base = "h2"
    force_http2 = True


class ProbeUser(GatewayBase):
    """The interference probe's sender (:mod:`fourfold.levels.l2_probe`); never spawned by Locust."""

    abstract = True
    scenario = PROBE_SCENARIO

    def __init__(self, environment: Any) -> None:
        super().__init__(environment)
        self.options = replace(self.options, max_tokens=self.gateway.probe_max_tokens)


def _probe_user(environment: Any) -> ProbeUser:
    ProbeUser.host = environment.host or next((c.host for c in environment.user_classes if c.host), None)
    return ProbeUser(environment)


class OpenLoopUser(GatewayBase):
    """The open-loop dispatcher (see the module docstring); ``-u`` beyond 1 adds nothing."""

    fixed_count = 1
    scenario = OPEN_SCENARIO

    def __init__(self, environment: Any) -> None:
        super().__init__(environment)
        self._pool: gevent.pool.Pool | None = None
        self._report: DispatcherReport | None = None
        self._gaps: Any = None
        self._start_ns = 0
        self._due_ns = 0
        self._due_counted = True
        self._last_send_ns = 0
        self._in_flight: list[tuple[float, int]] = []     # (seconds into the window, requests in flight)
        self._start_wall = 0.0
        self._trace_end_ns = 0        # a trace replay: when its last arrival was due (the window's end)

    @classmethod
    def check_inputs(cls, options: Any, settings: Settings) -> None:
        """A trace dataset is replayed in its own order at its own times: ``--shuffle`` is refused."""
        super().check_inputs(options, settings)
        if settings.shuffle and is_trace(selected_items(settings.dataset, settings)):
            raise OptionError("--shuffle does not apply to a trace: its entries are replayed in their own "
                              "order at their own times (--dataset-sample and --dataset-filter do apply)")

    def pool_size(self) -> int:
        return self.gateway.max_in_flight

    def wait_time(self) -> float:  # type: ignore[override]
        return 0.0

    @task
    def dispatch(self) -> None:
        dispatchers = max(1, int(getattr(self.environment.parsed_options, DISPATCHERS_ATTR, 1) or 1))
        process = self.gateway.arrivals.share(dispatchers)
        index = max(0, int(getattr(self.environment.runner, "worker_index", 0) or 0))
        if self.gateway.sweep:       # the rates come from the sweep's controller (fourfold.levels.sweep_live)
            sweep_live.run_dispatcher(self, self.l2.step_box, dispatchers, index)
        entries: Any = None
        if is_trace(self.items):      # this dispatcher's share of the trace, each entry at its own time
            share = trace_share(arrival_offsets_s(self.items, self.settings.trace_speed), dispatchers, index)
            self._gaps = gaps = trace_gaps(share)
            entries = iter([self.items[i] for _, i in share])
            rate = len(share) / share[-1][0] if share and share[-1][0] > 0 else 0.0
        else:
            self._gaps = gaps = process.gaps(dispatcher_seed(self.gateway.arrival_seed, index))
            rate = process.rate_rps
        pool = self._pool = gevent.pool.Pool(self.gateway.max_in_flight)
        report = self._report = DispatcherReport(rate_rps=rate)
        drop = self.gateway.max_in_flight_policy == "drop"
        now = time.perf_counter_ns
        due = self._start_ns = now()
        # by the tightest clock offset: time.time() after now() was late by a preemption (sends read early)
        self._start_wall, self._trace_end_ns = (due - realtime_offset_ns()) / 1e9, 0
        self._last_send_ns = 0
        while True:
            gap_s = next(gaps, None)
            if gap_s is None:         # the trace's end: its requests finish, then this dispatcher stops
                self._end_trace(pool, due)
            due += int(gap_s * 1e9)
            self._due_ns, self._due_counted = due, False
            report.scheduled_gaps.add(gap_s)
            delay_s = (due - now()) / 1e9
            if delay_s > 0:
                gevent.sleep(delay_s)
            report.arrivals += 1
            self._due_counted = True
            if pool.full():
                if drop:
                    report.dropped += 1
                    if delay_s <= 0:
                        gevent.sleep(0)     # behind schedule: let the stop and the requests run
                    continue
                report.waited += 1
                pool.wait_available()
            pool.spawn(self._arrive, due, next(entries) if entries is not None else None)
            in_flight = len(pool)
            report.in_flight_max = max(report.in_flight_max, in_flight)
            self._in_flight.append(((due - self._start_ns) / 1e9, in_flight))

    def _end_trace(self, pool: gevent.pool.Pool, last_due_ns: int) -> NoReturn:
        self._trace_end_ns = max(last_due_ns, self._start_ns + 1)
        pool.join()
        log.info("fourfold: trace replayed (%d arrivals); the dispatcher stops", self._report.arrivals
                 if self._report else 0)
        runner = self.environment.runner
        if isinstance(runner, LocalRunner):      # the run ends with the trace (workers: the master's -t)
            gevent.spawn_later(0.05, runner.quit)
        raise StopUser()

    def _arrive(self, due_ns: int, item: Any = None) -> None:
        report = self._report
        if report is not None:       # counted when the request really starts: a greenlet spawned
            t = time.perf_counter_ns()  # but never run before the stop sent nothing
            if self._last_send_ns:
                report.send_gaps.add((t - self._last_send_ns) / 1e9)
            self._last_send_ns = t
            report.sent += 1
        if item is None:
            self.send_item(self.next_item(), intended_ns=due_ns)
        else:       # a trace entry: its scheduled time (Unix seconds) goes into the record
            scheduled_at = self._start_wall + (due_ns - self._start_ns) / 1e9
            self.send_item(item, intended_ns=due_ns, extra={"scheduled_at": round(scheduled_at, 6)})
        if report is not None:
            report.completed += 1

    def on_stop(self) -> None:
        report, pool = self._report, self._pool
        if report is not None and pool is not None:
            stop = self._trace_end_ns or time.perf_counter_ns()
            report.window_s = (stop - self._start_ns) / 1e9
            due = self._due_ns
            if not self._due_counted and due <= stop:
                report.arrivals += 1            # due while the stop was already under way
            if self._gaps is not None:          # arrivals due before the stop that never got their turn
                report.arrivals += arrivals_until(self._gaps, due, stop, report.rate_rps)
            report.in_flight_at_stop = report.sent - report.completed
            report.unstarted_at_stop = max(0, len(pool) - report.in_flight_at_stop)
            report.in_flight_q2, report.in_flight_q4 = quarter_means(self._in_flight, report.window_s)
            pool.kill(block=True, timeout=5)        # requests in flight are recorded as cancelled
            self.l2.stats.dispatchers.append(report)
            self._report = None
        super().on_stop()


# ---- listeners ----
def _on_parser(parser: Any, **_kw: Any) -> None:
    register_options(parser)


def _on_init(environment: Any, **_kw: Any) -> None:
    sweep_live.register(environment, get_state(environment))
    get_runtime(environment).extras.meta["l2"] = get_state(environment).settings.meta_block(
        bool(_open_loop_classes(environment)))
    get_runtime(environment).extras.on_record(watch_of(environment).on_record)
    options = environment.parsed_options
    if (options is not None and getattr(options, "fourfold_embedded", False)
            and getattr(options, "http2", False)):
        log.warning("fourfold: --http2 against the embedded simulator: it speaks HTTP/1.1 only, and over "
                    "http:// HTTP/2 means h2c prior knowledge, so requests will fail; point --host at an "
                    "HTTP/2 server")


def _open_loop_classes(environment: Any) -> list[Any]:
    return [cls for cls in environment.user_classes if issubclass(cls, OpenLoopUser)]


def _on_test_start(environment: Any, **_kw: Any) -> None:
    state = get_state(environment)
    options = environment.parsed_options
    try:
        state.settings = GatewaySettings.from_options(options)
    except ValueError as exc:
        log.error("fourfold: %s (keeping the previous L2 settings)", exc)
    state.step_box = sweep_live.StepBox()   # --sweep: no step of a previous test (web UI) is offered again
    runner = environment.runner
    _start_probe(environment, state)
    if isinstance(runner, WorkerRunner) or options is None:
        return
    state.saturation.reset(state.settings.stop_on_saturation)
    state.stats = GatewayStats()             # each test its own (web UI: Stop, then New)
    dispatchers = 1
    if isinstance(runner, MasterRunner):
        users = int(getattr(options, "num_users", 0) or 0)
        dispatchers = max(1, min(runner.worker_count, users) if users else runner.worker_count)
        if _open_loop_classes(environment) and users and users < runner.worker_count:
            log.warning("fourfold: open loop on %d workers with -u %d: only %d dispatchers (-u >= workers "
                        "gives each worker one)", runner.worker_count, users, dispatchers)
    for cls in _open_loop_classes(environment):
        cls.fixed_count = dispatchers
    setattr(options, DISPATCHERS_ATTR, dispatchers)     # forwarded to workers with the spawn message
    sweep_live.begin(environment, state, str(getattr(options, "slo", "") or ""), dispatchers)


def _start_probe(environment: Any, state: L2State) -> None:
    """The interference probe's one source: the local runner or worker 0 (:mod:`fourfold.levels.l2_probe`)."""
    _on_test_stop(environment)
    runner, rate = environment.runner, state.settings.probe_request_rate
    worker_index = int(getattr(runner, "worker_index", 0) or 0)
    if rate > 0 and not isinstance(runner, MasterRunner) and worker_index == 0:
        state.probe = ProbeSource(lambda: _probe_user(environment), rate,
                                  state.settings.arrival_seed + PROBE_SEED_OFFSET)
        state.probe.start()


def _on_test_stop(environment: Any, **_kw: Any) -> None:
    state = state_of(environment).get(L2State)
    if state is not None and state.probe is not None:
        state.probe.stop()
        state.probe = None


def _on_finish(environment: Any, **_kw: Any) -> None:
    """Each test's end (``hooks.finish_test``, users stopped): the ``l2`` block of its summary."""

    runtime = find_runtime(environment)
    state = state_of(environment).get(L2State)
    if runtime is None or state is None or runtime.is_worker or runtime.finished:
        return
    sweep_live.end(state)
    report, notes = l2_report(get_runtime(environment).stats.summary(), state, environment.parsed_options)
    runtime.extras.summary["l2"] = report
    runtime.extras.summary.setdefault("notes", []).extend(notes)


def l2_block(environment: Any) -> dict[str, Any]:
    """``{"l2": report}`` over the data so far (:func:`l2_report`, as at the test's end): the web UI."""
    runtime = find_runtime(environment)
    state = state_of(environment).get(L2State)
    if runtime is None or state is None or runtime.is_worker:
        return {}
    return {"l2": l2_report(runtime.stats.summary(), state, environment.parsed_options)[0]}


__all__ = ["GatewayUser", "H1User", "H2User", "OpenLoopUser", "l2_block", "l2_report"]

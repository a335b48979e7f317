"""The per-Environment plumbing behind every level: stats, run directory, worker shipping.

``register(environment)`` attaches one :class:`Runtime` to a Locust environment (explicitly, from
the ``init`` event; nothing happens on import). The runtime owns the three sinks of a record:

1. :class:`fourfold.measure.stats.LLMStats` (our own mergeable histograms; TTFT/ITL are *not* fake Locust
   requests, so Locust's Aggregated row stays honest);
2. one Locust request event per LLM request (``response_time`` = E2E), so Locust's own table,
   failure ratio and ``--exit-code-on-error`` stay meaningful;
3. the run directory (``records.jsonl`` + ``meta.json`` + ``summary.json``), written by the
   local runner or the master through :class:`fourfold.levels.recorder.RunRecorder`, one a test.
   Workers ship their records and stats deltas to the master in ``report_to_master`` (every 3 s
   and once at quit) and keep nothing.

Beside them, the counts of :mod:`fourfold.levels.ledger`: connect-error backoff (``backoff``) and,
on a master, which worker stopped reporting with how many of its requests unaccounted for
(``workers``: each worker sends its count of requests started every second, and with each report).
Both are each test's own: after a web-UI Stop, New starts them afresh (a worker's count, kept per
process, is taken from where the last test left it), as it does the statistics and the run directory.
"""

from __future__ import annotations

import logging
import platform
import sys
import time
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import gevent
from locust import events
from locust.env import Environment
from locust.runners import MasterRunner, WorkerRunner

from fourfold.levels.extras import Extras
from fourfold.levels.ledger import PROGRESS_MESSAGE, Backoff
from fourfold.levels.options import Settings, redacted
from fourfold.levels.recorder import RunRecorder
from fourfold.levels.shipping import Shipping
from fourfold.levels.state import state_of
from fourfold.measure.cost import Prices, cost_block
from fourfold.measure.loadgen import GeneratorWatch
from fourfold.measure.record import RequestRecord
from fourfold.measure.stats import LLMStats
from fourfold.rundir.runlog import RunWriter

log = logging.getLogger("fourfold")


class Runtime:
    def __init__(self, environment: Environment, settings: Settings) -> None:
        self.environment = environment
        self.settings = settings
        self.stats = LLMStats(stall_threshold_ms=settings.stall_ms)
        self.recorder = RunRecorder(settings.run_dir)   # this test's run directory (local runner, master)
        self.records_seen = 0                          # this process's measured + warm-up records
        self.requests_started = 0                      # sent or sending (one stopped unsent is taken back)
        self.backoff = Backoff()
        self.shipping = Shipping(self, self._write)    # worker <-> master (levels/shipping.py)
        self.level = ""
        self.extras = Extras()                         # the levels' blocks, finishers, record listeners
        self.finished = False
        self.quitting = False                          # the process is shutting down (``quitting`` fired)
        self.tests = 0                                 # tests begun in this process (web UI: Start, New)
        self.sampler: Any = None                       # the server's telemetry (levels/telemetry_sampler.py)
        self.background: set[gevent.Greenlet] = set()   # e.g. mirror requests in flight
        self.generator = GeneratorWatch()              # this process's CPU and hub lag (master: its workers')

    # ---- roles ----
    @property
    def is_worker(self) -> bool:
        return isinstance(self.environment.runner, WorkerRunner)

    @property
    def is_master(self) -> bool:
        return isinstance(self.environment.runner, MasterRunner)

    def spawn_background(self, fn: Any) -> gevent.Greenlet:
        """Run ``fn`` on its own greenlet; it is stopped (and so records ``cancelled``) at test stop."""
        greenlet = gevent.spawn(fn)
        self.background.add(greenlet)
        greenlet.link(self.background.discard)
        return greenlet

    def stop_background(self) -> None:
        if self.background:
            gevent.killall(list(self.background), block=True, timeout=5)

    # ---- the record sinks ----
    def observe(self, record: RequestRecord) -> None:
        """Hand one finished record to every sink (called on the greenlet that sent it)."""
        cancelled = record.error_class == "cancelled"
        stopped: BaseException | None = None
        if not cancelled:
            try:
                gevent.sleep(0)   # let pending reads of other streams be timestamped before this work
            except gevent.GreenletExit as exc:   # the run stopped right now: the request did complete,
                stopped = exc                     # so record it first, then let the greenlet end
        self.records_seen += 1
        if not self.settings.record_text:
            record.text = ""
        if not record.warmup and not cancelled:
            self.stats.add_record(record)
            self.environment.events.request.fire(
                request_type="LLM",
                name=f"{record.level}:{record.scenario}",
                response_time=record.e2e_ms or 0.0,
                response_length=record.response_bytes,     # Locust: "Average size (bytes)"
                exception=None if record.ok else _RequestFailed(record.error_class, record.error_detail),
                context={"item_id": record.item_id},
            )
        if self.is_worker:
            self.shipping.pending.append(record.to_dict())
        else:
            self._write(record)
        if stopped is not None:
            raise stopped

    def _write(self, record: RequestRecord) -> None:
        """To the run directory (never raises: a record that cannot be written is a counted loss),
        then to the record listeners."""
        if self.recorder.write(record, self._label(), self.meta):
            self.extras.record(record)                  # e.g. --score-live's sampler (never blocks)

    def _label(self) -> str:
        return self.settings.label or self.level or "run"

    @property
    def writer(self) -> RunWriter | None:
        """This test's run directory, once made."""
        return self.recorder.writer

    @property
    def left_out(self) -> dict[str, int]:
        return self.recorder.left_out

    @property
    def started_at(self) -> float | None:
        return self.recorder.started_at

    @property
    def records_lost(self) -> int:
        return self.recorder.records_lost

    # ---- one test after another (web UI: Stop, then New) ----
    def begin_test(self) -> None:
        """At ``test_start``: after a finished test, a fresh one: new statistics, counts and run
        directory (opened by :meth:`open_run`), so no figure of one test reaches another's summary."""
        self.tests += 1
        if not self.finished:
            return
        self.stats = LLMStats(stall_threshold_ms=self.stats.stall_threshold_ms,
                              slo_ms=dict(self.stats.slo_ms), alpha=self.stats.alpha)
        self.recorder = RunRecorder(self.settings.run_dir)
        self.backoff = Backoff()
        self.shipping.new_test()
        self.extras.new_test()
        self.generator.new_test()
        self.finished = False

    # ---- run directory (local runner or master) ----
    def open_run(self) -> RunWriter:
        """The run directory, made on first use (:meth:`RunRecorder.open`); OSError when it cannot be."""
        return self.recorder.open(self._label(), self.meta)

    def meta(self) -> dict[str, Any]:
        env = self.environment
        options = env.parsed_options
        return {
            "level": self.level,
            "target": env.host or "",
            "dialect": self.settings.dialect,
            "model": self.settings.model,
            "settings": redacted(self.settings),
            "locust": {
                "users": getattr(options, "num_users", None),
                "spawn_rate": getattr(options, "spawn_rate", None),
                "run_time": getattr(options, "run_time", None),
                "distributed": self.is_master,
            },
            "versions": _versions(),
            "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            **self.extras.meta,
        }

    def summary(self) -> dict[str, Any]:
        out = {
            "level": self.level,
            "target": self.environment.host or "",
            "started_at": self.started_at,
            "finished_at": time.time(),
            **self.recorder.counts(),          # records written, lost, and left out of every figure below
            **self.stats.summary(),
            "backoff": self.backoff.summary(),
            **({"workers": self.shipping.ledger.summary(time.time(), self.shipping.missing_workers())}
               if self.is_master else {}),
            "generator": self.generator.health.block(),
            **self.extras.summary,
        }
        block = cost_block(out, Prices.of(self.settings))       # prices given or power measured
        return {**out, "cost": block} if block is not None else out

    def finish(self) -> dict[str, Any] | None:
        """Write summary.json and close the run directory (idempotent; not on workers)."""
        if self.is_worker or self.finished:
            return None
        self.finished = True
        return self.recorder.close(self._label(), self.meta, self.summary)


class _RequestFailed(Exception):
    def __init__(self, error_class: str, detail: str) -> None:
        super().__init__(f"{error_class}: {detail[:200]}" if detail else error_class)
        self.error_class = error_class


def _versions() -> dict[str, str]:
    found = {"python": sys.version.split()[0], "platform": platform.platform()}
    for name in ("fourfold", "locust", "httpx", "gevent"):
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            pass
    return found


def find_runtime(environment: Any) -> Runtime | None:
    """The environment's Runtime, or None before :func:`register`."""
    return state_of(environment).get(Runtime)


def get_runtime(environment: Environment) -> Runtime:
    runtime = find_runtime(environment)
    if runtime is None:
        raise RuntimeError("fourfold's runtime is not registered on this environment: "
                           "import the level's User from levels/ so its init listener runs")
    return runtime


def register(environment: Environment, settings: Settings | None = None) -> Runtime:
    """Create the environment's Runtime and attach its listeners (idempotent)."""
    existing = find_runtime(environment)
    if existing is not None:
        return existing
    runtime = state_of(environment).put(Runtime(environment, settings or
                                                Settings.from_options(environment.parsed_options)))
    ev = environment.events
    ev.report_to_master.add_listener(runtime.shipping.on_report_to_master)
    ev.worker_report.add_listener(runtime.shipping.on_worker_report)
    if isinstance(environment.runner, MasterRunner):
        environment.runner.register_message(PROGRESS_MESSAGE, runtime.shipping.on_progress)
    elif runtime.is_worker:
        gevent.spawn(runtime.shipping.send_progress)
    return runtime


__all__ = ["Runtime", "events", "find_runtime", "get_runtime", "live_blocks", "register"]


def live_blocks(environment: Any) -> dict[str, Any]:
    """The levels' summary blocks over the data so far (local runner or master: the workers' merged
    data), from the same functions that write them into summary.json; a finished test's blocks as
    written. ``server_metrics``: the sampler's summary so far."""
    runtime = find_runtime(environment)
    if runtime is None or runtime.is_worker:
        return {}
    blocks = runtime.extras.live(environment)
    sampler = runtime.sampler
    if sampler is not None:
        blocks["server_metrics"] = sampler.summary()
    if runtime.finished:
        written = runtime.extras.summary
        blocks.update({key: written[key] for key in (*blocks, "server_metrics") if key in written})
    return blocks

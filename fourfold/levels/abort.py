"""``--abort-on-error-rate``: a run whose requests all fail ends itself, with one clear line.

A target that went away, or a wrong key behind a preflight that passed, turns a load test into a
flood of failures that measures nothing (and, against a shared target, hurts). On the process that
writes the records (a standalone run or the master, from every worker's shipped records), each
written record enters a window of the last ``--abort-window-s`` seconds (10). When the run has sent
for at least that long, the window holds at least ``MIN_REQUESTS`` finished requests and the share
that failed (any failure class; ``cancelled`` and ``truncated`` are no failures) reaches
``--abort-on-error-rate`` (1.0 by default: every one of them), the run stops as ``-t`` would stop it:
records kept, summary.json written, with its ``aborted`` block (``reason``, ``at_s``, ``window_s``,
``requests``, ``failed``, ``classes``), and exit code 1. ``--abort-on-error-rate 0`` turns it off.
"""

from __future__ import annotations

import collections
import logging
import time
from typing import Any

import gevent

from fourfold.measure.record import FAILURE_CLASSES, RequestRecord

log = logging.getLogger("fourfold")

MIN_REQUESTS = 10          # finished requests in the window before it may decide


class ErrorWatch:
    """The window of recent outcomes and the decision (pure but for the clock and ``stop``)."""

    def __init__(self, rate: float, window_s: float, stop: Any, clock: Any = time.monotonic) -> None:
        self.rate, self.window_s, self.stop, self.clock = rate, window_s, stop, clock
        self.started: float | None = None
        self.window: collections.deque[tuple[float, str]] = collections.deque()
        self.aborted: dict[str, Any] | None = None

    def observe(self, record: RequestRecord) -> None:
        if self.rate <= 0 or self.aborted is not None or record.warmup or record.error_class == "cancelled":
            return
        now = self.clock()
        if self.started is None:
            self.started = now
        self.window.append((now, record.error_class))
        while self.window and self.window[0][0] < now - self.window_s:
            self.window.popleft()
        if now - self.started < self.window_s or len(self.window) < MIN_REQUESTS:
            return
        failed = [cls for _, cls in self.window if cls in FAILURE_CLASSES]
        if len(failed) / len(self.window) < self.rate:
            return
        classes = dict(collections.Counter(failed).most_common())
        n, bad = len(self.window), len(failed)
        shown = ", ".join(f"{cls} {count}" for cls, count in classes.items())
        share = "every request" if bad == n else f"{bad} of {n} requests"
        reason = f"{share} failed in the last {self.window_s:g} s ({bad} of {n}: {shown})"
        self.aborted = {"reason": reason, "at_s": round(now - self.started, 3), "window_s": self.window_s,
                        "requests": n, "failed": bad, "classes": classes}
        log.error("fourfold: %s; the run stops, records kept (--abort-on-error-rate 0 keeps it going)",
                  reason)
        self.stop()


def register(environment: Any, runtime: Any) -> None:
    """Watch the records this process writes (not on workers: the master sees all of theirs)."""
    settings = runtime.settings
    if runtime.is_worker or settings.abort_on_error_rate <= 0:
        return

    def stop() -> None:              # headless: the run ends; web UI: as Stop (a New test starts afresh)
        runner = environment.runner
        if runner is not None:
            headless = getattr(environment.parsed_options, "headless", False)
            gevent.spawn(runner.quit if headless else runner.stop)

    watch = ErrorWatch(settings.abort_on_error_rate, settings.abort_window_s, stop)
    runtime.extras.on_record(watch.observe)

    def new_test(**_kw: Any) -> None:
        watch.started, watch.aborted = None, None
        watch.window.clear()

    environment.events.test_start.add_listener(new_test)

    def finish(_environment: Any) -> None:
        if watch.aborted is not None:
            runtime.extras.summary["aborted"] = watch.aborted

    runtime.extras.on_finish(finish)


__all__ = ["MIN_REQUESTS", "ErrorWatch", "register"]

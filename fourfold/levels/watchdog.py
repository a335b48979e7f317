"""A run always ends: a watchdog outside the gevent hub (fourfold#32 item 1).

Every stop Locust knows (``-t``, Ctrl-C, SIGTERM, a master's quit) runs on the gevent hub. A
greenlet that never yields (a decoder looping on a hostile answer, a dispatcher whose option makes
it spin) holds the hub, and with it every stop: the process would run until SIGKILL and its
queued records would be lost. The watchdog is an operating-system thread started with each test:

- a greenlet beats every 0.25 s while the hub turns;
- a headless run or a worker takes SIGTERM with a Python handler (it runs between two bytecodes of
  whatever the main thread runs, a spinning greenlet included): it notes the time and asks the hub
  to stop the run as Ctrl-C does (KeyboardInterrupt in the main greenlet: Locust's own shutdown,
  its HTML report too);
- the thread looks every 0.25 s. When the run is past its ``-t`` by ``GRACE_S``, or a SIGTERM is
  ``STUCK_S`` old, and the hub has not beaten for ``STUCK_S``; or the hub has not beaten for
  ``LONG_STUCK_S`` at any time (a worker, which has no ``-t`` of its own, a run without one, a hub
  held in C code where no Python handler runs), the thread gives up for the run: it writes the
  records still queued, writes ``summary.json`` as ``{"incomplete": true, "reason": ...,
  "exit_code": 4}`` (no figures: the statistics live on the stuck hub), prints one line and ends the
  process with exit code 4 (:data:`EXIT_CODE`).

It stands down when the orderly stop begins (``test_stopping``, ``quitting``): writing a large run's
summary may hold the hub for seconds, and that is no hang.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import time
from typing import Any

import gevent
from gevent import monkey

from fourfold.rundir.runlog import SUMMARY_FILE, write_json_atomic

log = logging.getLogger("fourfold")

BEAT_S = 0.25
STUCK_S = 2.0          # past -t: the hub silent this long is stuck
GRACE_S = 2.0          # past -t: the time the orderly stop gets to begin
LONG_STUCK_S = 10.0    # any time: the hub silent this long is stuck (workers; runs without -t)
EXIT_CODE = 4

_start_thread = monkey.get_original("_thread", "start_new_thread")
_thread_sleep = monkey.get_original("time", "sleep")


class HubWatchdog:
    """One test's watchdog (module docstring). ``deadline``: the ``time.monotonic()`` of ``-t``'s end,
    or None; ``give_up(reason)`` runs on the watchdog thread."""

    def __init__(self, deadline: float | None, give_up: Any, *, stuck_s: float = STUCK_S,
                 grace_s: float = GRACE_S, long_stuck_s: float = LONG_STUCK_S) -> None:
        self.deadline, self.give_up = deadline, give_up
        self.stuck_s, self.grace_s, self.long_stuck_s = stuck_s, grace_s, long_stuck_s
        self.beat = time.monotonic()
        self.armed = False
        self.term_at: float | None = None      # when a SIGTERM arrived
        self._ticker: Any = None

    def start(self) -> None:
        self.armed, self.beat = True, time.monotonic()
        self._ticker = gevent.spawn(self._tick)
        _start_thread(self._watch, ())

    def stand_down(self) -> None:
        self.armed = False
        if self._ticker is not None:
            self._ticker.kill(block=False)
            self._ticker = None

    def _tick(self) -> None:
        while self.armed:
            self.beat = time.monotonic()
            gevent.sleep(BEAT_S)

    def verdict(self, now: float) -> str:
        """Why the run is given up at ``now`` ("" while it is not)."""
        silent = now - self.beat
        if self.term_at is not None and now > self.term_at + self.stuck_s and silent > self.stuck_s:
            return (f"a SIGTERM {now - self.term_at:.1f} s ago was not taken: the event loop has not "
                    f"answered for {silent:.1f} s (a greenlet that never yields)")
        if self.deadline is not None and now > self.deadline + self.grace_s and silent > self.stuck_s:
            return (f"the run passed its -t by {now - self.deadline:.1f} s and the event loop has not "
                    f"answered for {silent:.1f} s (a greenlet that never yields)")
        if silent > self.long_stuck_s:
            return f"the event loop has not answered for {silent:.1f} s (a greenlet that never yields)"
        return ""

    def _watch(self) -> None:
        while self.armed:
            _thread_sleep(BEAT_S)
            reason = self.verdict(time.monotonic()) if self.armed else ""
            if reason:
                self.give_up(reason)
                return


def give_up(runtime: Any, reason: str) -> None:
    """On the watchdog thread: keep what can be kept, say why, end the process (exit 4)."""
    lost = ""
    writer = runtime.writer if not runtime.is_worker else None
    try:
        if writer is not None:
            writer.flush()
            write_json_atomic(writer.run_dir / SUMMARY_FILE, {
                "incomplete": True, "reason": reason, "exit_code": EXIT_CODE,
                "records_written": runtime.records_seen, "records_lost": runtime.records_lost})
        elif runtime.is_worker:
            lost = f"; {len(runtime.shipping.pending)} records not yet shipped to the master are lost"
    except Exception as exc:  # noqa: BLE001 - the process ends either way: say what could not be kept
        lost = f"; the run directory could not be completed ({exc})"
    sys.stderr.write(f"fourfold: error: {reason}: the run is ended, exit code {EXIT_CODE}"
                     f"{' (summary.json marked incomplete)' if writer is not None else ''}{lost}\n")
    sys.stderr.flush()
    os._exit(EXIT_CODE)


def take_sigterm(dog: HubWatchdog) -> None:
    """SIGTERM through a Python handler that notes it for ``dog`` and stops the run as Ctrl-C does."""
    hub = gevent.get_hub()
    main = hub.parent

    def interrupt_main() -> None:
        log.info("fourfold: got SIGTERM; the run stops as on Ctrl-C")
        gevent.spawn(main.throw, KeyboardInterrupt)

    def on_sigterm(_signum: int, _frame: Any) -> None:
        if dog.term_at is None:               # once: a second SIGTERM must not interrupt the shutdown
            dog.term_at = time.monotonic()
            hub.loop.run_callback_threadsafe(interrupt_main)

    signal.signal(signal.SIGTERM, on_sigterm)


def arm(environment: Any, runtime: Any) -> HubWatchdog:
    """At ``test_start``: a watchdog for this test (``-t`` from the options, counted from now); a
    headless run or a worker also takes SIGTERM (:func:`take_sigterm`; with the web UI, Locust's
    own handler stays: a SIGTERM there ends the web UI too)."""
    options = environment.parsed_options
    run_time = getattr(options, "run_time", None) if not runtime.is_worker else None
    deadline = time.monotonic() + float(run_time) if run_time else None
    dog = HubWatchdog(deadline, lambda reason: give_up(runtime, reason))
    if runtime.is_worker or getattr(options, "headless", False):
        take_sigterm(dog)
    dog.start()
    return dog


__all__ = ["EXIT_CODE", "HubWatchdog", "arm", "give_up", "take_sigterm"]

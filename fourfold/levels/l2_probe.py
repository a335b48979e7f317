"""``--probe-request-rate``: the interference probe (vLLM's ``--probe-request-rate``).

Small fixed requests (:data:`PROBE_ITEM`, ``--probe-max-tokens`` each, 8 by default) at a low Poisson
rate, sent beside the main load (ladder, closed loop, open loop or sweep) on a greenlet of their
own, each at its intended time on a greenlet of its own (so a slow answer does not delay the next:
open loop, ``queue_ms`` from the intended arrival). Their records carry scenario ``probe``, so they
are their own group (``l2:probe``) in LLMStats, summary.json, the LLM tab and ``fourfold compare``:
what the gateway and the server under load do to a short request shows apart from the main load,
whose groups (``ladder@N``, ``sweep@R/s``, ``open``) never hold a probe, so the knee, the sweep's
verdicts and ``--stop-on-saturation`` never see one. The run's ``total`` does count them.

One source per run: the local runner, or on a master with workers the worker of index 0 only
(the master sends nothing itself; each worker drawing the rate would multiply it by the workers).
It starts with the test (``test_start``) and stops with it (``test_stop``); a probe in flight then
is recorded as cancelled, like any request.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import gevent
import gevent.pool

from fourfold.levels.arrivals import ArrivalProcess
from fourfold.workloads.items import Item

log = logging.getLogger("fourfold")
PROBE_SCENARIO = "probe"
PROBE_ITEM = Item(id="fourfold-probe", messages=({"role": "user", "content": "Reply with one word: ready."},))
PROBE_SEED_OFFSET = 7919       # the probe's draws: --arrival-seed + this (apart from the main load's)
MAX_PROBES_IN_FLIGHT = 64      # beyond it a probe is dropped (counted): the probe never floods the target


class ProbeSource:
    """The probe's arrivals (module docstring). ``make_user()`` builds the user that sends them (an
    L2 user whose options carry ``--probe-max-tokens``); ``sent``/``dropped`` count this test's."""

    def __init__(self, make_user: Callable[[], Any], rate_rps: float, seed: int) -> None:
        self.make_user, self.rate_rps, self.seed = make_user, rate_rps, seed
        self.sent = self.dropped = 0
        self.pool = gevent.pool.Pool(MAX_PROBES_IN_FLIGHT)
        self.greenlet: gevent.Greenlet | None = None

    def start(self) -> None:
        self.greenlet = gevent.spawn(self._run)

    def stop(self) -> None:
        if self.greenlet is not None:
            self.greenlet.kill(block=True, timeout=5)
            self.greenlet = None
        self.pool.kill(block=True, timeout=5)       # probes in flight: recorded as cancelled

    def _run(self) -> None:
        user = self.make_user()
        gaps = ArrivalProcess("poisson", self.rate_rps).gaps(self.seed)
        now = time.perf_counter_ns
        due = now()
        log.info("fourfold: interference probe at %g/s (scenario %s)", self.rate_rps, PROBE_SCENARIO)
        try:
            while True:
                due += int(next(gaps) * 1e9)
                delay_s = (due - now()) / 1e9
                if delay_s > 0:
                    gevent.sleep(delay_s)
                if self.pool.full():
                    self.dropped += 1
                    continue
                self.pool.spawn(user.send_item, PROBE_ITEM, scenario=PROBE_SCENARIO, intended_ns=due)
                self.sent += 1
        finally:
            self.pool.kill(block=True, timeout=5)


__all__ = ["PROBE_ITEM", "PROBE_SCENARIO", "ProbeSource"]

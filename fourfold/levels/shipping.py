"""Worker <-> master: what a worker ships and what the master merges, for one Runtime.

With each ``report_to_master`` (every 3 s and once at quit) a worker ships its records not yet
shipped, its statistics' and backoff's deltas, its generator health and its count of requests
started; every second it also tells the master that count alone (``fourfold_progress``). The
master merges the deltas into its own statistics, writes the records to its run directory and
keeps, per worker, started against received (:class:`fourfold.levels.ledger.WorkerLedger`): a
worker that stops reporting leaves its unaccounted requests in summary.json's ``workers`` block.
A worker's count is per process; each test takes its share from where the last test left it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol

import gevent

from fourfold.levels.ledger import PROGRESS_INTERVAL_S, PROGRESS_MESSAGE, WorkerLedger
from fourfold.measure.loadgen import GeneratorWatch
from fourfold.measure.record import RequestRecord

__all__ = ["WIRE_KEY", "Shipping"]

log = logging.getLogger("fourfold")
WIRE_KEY = "fourfold"


class Sinks(Protocol):
    """What shipping reads from and writes to: the Runtime's current sinks (new ones each test)."""

    stats: Any
    backoff: Any
    generator: GeneratorWatch
    requests_started: int
    environment: Any


class Shipping:
    """The worker's outbox and the master's per-worker ledger of one Runtime."""

    def __init__(self, sinks: Sinks, write: Callable[[RequestRecord], None]) -> None:
        self.sinks = sinks
        self.write = write
        self.pending: list[dict[str, Any]] = []       # worker: records not yet shipped
        self.records_shipped = 0
        self.ledger = WorkerLedger()                   # master: per worker, started vs. records received
        self.started_told: dict[str, int] = {}         # master: each worker's started requests, as last told
        self.started_before: dict[str, int] = {}       # ... and as it stood when this test began

    def new_test(self) -> None:
        """A new test on the master: a new ledger; each worker's count so far is the last test's."""
        self.started_before = dict(self.started_told)   # a worker counts per process, not per test
        self.ledger = WorkerLedger()

    def on_report_to_master(self, client_id: str, data: dict[str, Any]) -> None:
        """Worker: this report's payload."""
        records, self.pending = self.pending, []
        self.records_shipped += len(records)
        sinks = self.sinks
        data[WIRE_KEY] = {"stats": sinks.stats.take_wire(), "records": records,
                          "started": sinks.requests_started, "backoff": sinks.backoff.take_wire(),
                          "health": sinks.generator.health.take_wire()}

    def on_worker_report(self, client_id: str, data: dict[str, Any]) -> None:
        """Master: a worker's report merged, its records written."""
        payload = data.get(WIRE_KEY)
        if not payload:
            return
        sinks = self.sinks
        sinks.stats.merge_wire(payload.get("stats") or {})
        sinks.backoff.merge_wire(payload.get("backoff") or {})
        sinks.generator.health.merge_wire(client_id, payload.get("health") or {})
        records = payload.get("records") or ()
        for raw in records:
            self.write(RequestRecord.from_dict(raw))
        self.ledger.received(client_id, len(records))
        self._heard(client_id, payload.get("started"))

    def _heard(self, worker: str, started: Any) -> None:
        """A worker's count of requests started, since its process began: this test's share to the ledger."""
        if isinstance(started, int):
            self.started_told[worker] = started        # the last word, requests stopped unsent taken back
            started = max(0, started - self.started_before.get(worker, 0))
        self.ledger.heard(worker, started)

    def on_progress(self, environment: Any = None, msg: Any = None, **_kw: Any) -> None:
        """Master: a worker's ``fourfold_progress`` message (its count of requests started)."""
        data = getattr(msg, "data", None)
        if isinstance(data, dict):
            self._heard(str(msg.node_id), data.get("started"))

    def send_progress(self) -> None:
        """Worker: tell the master every second how many requests this process started."""
        while True:
            gevent.sleep(PROGRESS_INTERVAL_S)
            runner = self.sinks.environment.runner
            try:
                if runner is not None:
                    runner.send_message(PROGRESS_MESSAGE, {"started": self.sinks.requests_started})
            except Exception as exc:  # noqa: BLE001 - the master is gone or unreachable: Locust reports it
                log.debug("fourfold: progress message not sent: %s", exc)

    def missing_workers(self) -> frozenset[str]:
        """Master: the workers Locust counts as missing."""
        clients = getattr(self.sinks.environment.runner, "clients", None)
        return (frozenset(str(c.id) for c in getattr(clients, "missing", ()))
                if clients is not None else frozenset())

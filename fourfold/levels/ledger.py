"""What a run started against what it kept: connect-error backoff and lost workers (pure counts).

Two tallies the runtime keeps and summary.json shows, both plain values with no Locust in them:

- :class:`Backoff`: after a connect error a user waits before its next request
  (``fourfold.levels.base.next_backoff_s``: 0.1 s doubling to 5 s, reset by a request that
  connects). Counted here: connect errors, the time users spent waiting, the longest single
  wait. A worker ships its counts as deltas with each report (``take_wire``); the master adds
  them up (``merge_wire``). summary.json: ``backoff``.
- :class:`WorkerLedger` (master only): per worker, the requests its users had started (a worker
  tells the master every second, and with every report) and the records the master received
  from it. A worker the master has not heard from for ``SILENT_S`` when the run ends, or that
  Locust marks missing (no heartbeat), *stopped reporting* (killed, partitioned, crashed): its
  started requests without a record are *unaccounted for*. That count is a lower bound: requests
  it started after its last word are unknown. summary.json: ``workers``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

PROGRESS_MESSAGE = "fourfold_progress"      # worker -> master, every PROGRESS_INTERVAL_S
PROGRESS_INTERVAL_S = 1.0
SILENT_S = 3.0          # progress comes every second, and a final report at the end: silent this long = gone


@dataclass
class Backoff:
    connect_errors: int = 0
    http_4xx: int = 0          # 4xx answers (not 429, which has Retry-After) that made a user back off
    wait_s: float = 0.0
    longest_wait_s: float = 0.0

    def connect_error(self, next_wait_s: float) -> None:
        self.connect_errors += 1
        self.longest_wait_s = max(self.longest_wait_s, next_wait_s)

    def client_error(self, next_wait_s: float) -> None:
        self.http_4xx += 1
        self.longest_wait_s = max(self.longest_wait_s, next_wait_s)

    def waited(self, seconds: float) -> None:
        self.wait_s += max(0.0, seconds)

    def take_wire(self) -> dict[str, float]:
        """The counts since the last call, for a worker's report; resets them."""
        wire = {"connect_errors": self.connect_errors, "http_4xx": self.http_4xx, "wait_s": self.wait_s,
                "longest_wait_s": self.longest_wait_s}
        self.connect_errors, self.http_4xx, self.wait_s, self.longest_wait_s = 0, 0, 0.0, 0.0
        return wire

    def merge_wire(self, wire: dict[str, Any]) -> None:
        self.connect_errors += int(wire.get("connect_errors") or 0)
        self.http_4xx += int(wire.get("http_4xx") or 0)
        self.wait_s += float(wire.get("wait_s") or 0.0)
        self.longest_wait_s = max(self.longest_wait_s, float(wire.get("longest_wait_s") or 0.0))

    def summary(self) -> dict[str, Any]:
        return {"connect_errors": self.connect_errors, "http_4xx": self.http_4xx,
                "wait_s": round(self.wait_s, 3), "longest_wait_s": round(self.longest_wait_s, 3)}

    def console_line(self) -> str | None:
        if not (self.connect_errors or self.http_4xx):
            return None
        parts = (f"{self.connect_errors} connect errors" if self.connect_errors else "",
                 f"{self.http_4xx} 4xx answers" if self.http_4xx else "")
        what = " and ".join(part for part in parts if part)
        return (f"fourfold: {what}; users backed off {self.wait_s:.1f} s in "
                f"all (0.1 s doubling to 5 s per user, longest {self.longest_wait_s:g} s)")


@dataclass
class WorkerTally:
    worker: str
    started: int = 0          # requests its users had started, as last told (those stopped unsent excluded)
    received: int = 0         # records the master received from it
    last_heard_s: float = 0.0

    @property
    def unaccounted(self) -> int:
        return max(0, self.started - self.received)


@dataclass
class WorkerLedger:
    workers: dict[str, WorkerTally] = field(default_factory=dict)

    def _tally(self, worker: str, now_s: float | None) -> WorkerTally:
        tally = self.workers.setdefault(worker, WorkerTally(worker))
        tally.last_heard_s = time.time() if now_s is None else now_s
        return tally

    def heard(self, worker: str, started: Any, now_s: float | None = None) -> None:
        """A progress message or a report from ``worker`` saying how many requests it started."""
        tally = self._tally(worker, now_s)
        if isinstance(started, int) and started > tally.started:
            tally.started = started

    def received(self, worker: str, records: int, now_s: float | None = None) -> None:
        self._tally(worker, now_s).received += records

    def stopped_reporting(self, end_s: float, missing: frozenset[str] = frozenset(),
                          silent_s: float = SILENT_S) -> list[WorkerTally]:
        """Workers silent for more than ``silent_s`` at ``end_s``, or in ``missing`` (Locust's view)."""
        for worker in missing:
            self.workers.setdefault(worker, WorkerTally(worker))     # never heard from: still named
        return [t for t in self.workers.values() if t.worker in missing or end_s - t.last_heard_s > silent_s]

    def summary(self, end_s: float, missing: frozenset[str] = frozenset(),
                silent_s: float = SILENT_S) -> dict[str, Any]:
        lost = self.stopped_reporting(end_s, missing, silent_s)
        return {
            "count": len(self.workers),
            "stopped_reporting": [
                {"worker": t.worker, "last_heard_at": _iso(t.last_heard_s) if t.last_heard_s else None,
                 "silent_s": round(end_s - t.last_heard_s, 1) if t.last_heard_s else None,
                 "requests_started": t.started, "records_received": t.received, "unaccounted": t.unaccounted}
                for t in lost],
            "unaccounted": sum(t.unaccounted for t in self.workers.values()),
        }


def worker_lines(workers: dict[str, Any]) -> list[str]:
    """Console lines for summary.json's ``workers`` block: one per worker that stopped reporting, and
    one for requests without a record on workers that did not (a final report that came too late)."""
    lost = list(workers.get("stopped_reporting", ()))
    lines = [f"fourfold: worker {w['worker']} stopped reporting "
             + (f"at {w['last_heard_at']} ({w['silent_s']:g} s before the end)" if w["last_heard_at"]
                else "(never heard from)")
             + f": {w['unaccounted']} of its {w['requests_started']} started requests are unaccounted for "
             f"(records received: {w['records_received']})" for w in lost]
    rest = int(workers.get("unaccounted") or 0) - sum(w["unaccounted"] for w in lost)
    if rest > 0:
        lines.append(f"fourfold: {rest} requests started on workers that kept reporting have no record "
                     "(their final report did not reach the master in time)")
    return lines


def _iso(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


__all__ = ["PROGRESS_MESSAGE", "Backoff", "WorkerLedger", "WorkerTally", "worker_lines"]

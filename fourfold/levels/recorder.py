"""The run directory of one test, as the local runner or the master writes it.

:class:`RunRecorder` makes the directory on first use (:meth:`RunRecorder.open`), appends every
record a sink hands it, flushes once a second, counts what it leaves out of the statistics (warm-up
and cancelled records) and what it could not write (a directory that cannot be made, a full disk),
reporting a loss once on the console, and closes with ``summary.json``. It never raises on a
record: it runs on users' greenlets, also while the run stops them. One recorder a test
(:meth:`fourfold.levels.runtime.Runtime.begin_test` makes a new one after a finished test).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import gevent

from fourfold.measure.record import RequestRecord
from fourfold.rundir.runlog import RunWriter

__all__ = ["RunRecorder"]

log = logging.getLogger("fourfold")


class RunRecorder:
    """One test's run directory under ``base`` (``--run-dir``), and its counts."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.writer: RunWriter | None = None
        self.lost_unopened = 0                         # records lost: the run directory could not be made
        self.left_out = {"warmup": 0, "cancelled": 0}  # records of the run directory the statistics leave out
        self.loss_reported = False
        self.started_at: float | None = None
        self.closed = False                            # summary.json written (a late record still appends)
        self._flusher: gevent.Greenlet | None = None

    def open(self, label: str, meta: Callable[[], dict[str, Any]]) -> RunWriter:
        """The run directory, made on first use: records.jsonl opened and a spare descriptor set
        aside (``RunWriter.prepare``) before the users start, ``meta()`` written as meta.json. Raises
        OSError when the directory cannot be made; once it exists, a file that cannot be written is
        logged and counted."""
        if self.writer is None:
            writer = RunWriter(label, self.base)
            self.writer = writer
            self.started_at = time.time()
            self._flusher = gevent.spawn(self._flush_every_second)
            try:
                writer.prepare()
                writer.write_meta(meta())
            except OSError as exc:
                log.error("fourfold: %s: %s (records that cannot be written are counted as lost)",
                          writer.run_dir, exc.strerror or exc)
            log.info("fourfold: writing run directory %s", writer.run_dir)
        return self.writer

    def write(self, record: RequestRecord, label: str, meta: Callable[[], dict[str, Any]]) -> bool:
        """Append ``record`` (opening the directory first if need be); False when it was lost."""
        if record.warmup:                 # every record passes here (local runner; a master: its workers')
            self.left_out["warmup"] += 1
        elif record.error_class == "cancelled":
            self.left_out["cancelled"] += 1
        writer = self.writer
        if self.closed and writer is not None:     # after Stop: the records of the test just summarised
            log.warning("fourfold: a record arrived after %s was summarised; appended to its records.jsonl",
                        writer.run_dir)
        if writer is None:
            try:
                writer = self.open(label, meta)
            except OSError as exc:
                self.lost_unopened += 1
                self.report_loss(f"cannot create a run directory in {self.base}: {exc.strerror or exc}")
                return False
        writer.append(record)
        if writer.records_lost:
            self.report_loss(writer.loss_reason)
        return True

    def report_loss(self, reason: str) -> None:
        if not self.loss_reported:
            self.loss_reported = True
            log.error("fourfold: a record could not be written (%s); every lost record is counted "
                      "(records_lost in summary.json)", reason)

    @property
    def records_lost(self) -> int:
        return self.lost_unopened + (self.writer.records_lost if self.writer is not None else 0)

    def counts(self) -> dict[str, Any]:
        """summary.json's record counts."""
        return {
            "records": self.writer.records_written if self.writer else 0,
            "records_lost": self.records_lost,
            "records_warmup": self.left_out["warmup"],         # left out of every figure of the summary
            "records_cancelled": self.left_out["cancelled"],
            **({"records_lost_reason": self.writer.loss_reason}
               if self.writer and self.writer.loss_reason else {}),
        }

    def close(self, label: str, meta: Callable[[], dict[str, Any]],
              summary: Callable[[], dict[str, Any]]) -> dict[str, Any] | None:
        """Every record on disk (or counted lost), then ``summary()`` as summary.json; the directory
        closed. None when no directory could be made."""
        self.closed = True
        if self._flusher is not None:
            self._flusher.kill(block=False)
        try:
            writer = self.open(label, meta)
        except OSError as exc:
            log.error("fourfold: no run directory could be made in %s (%s): %d records lost, no summary.json",
                      self.base, exc.strerror or exc, self.lost_unopened)
            return None
        writer.flush()
        written = summary()
        writer.write_summary(written)
        writer.close()
        return written

    def _flush_every_second(self) -> None:
        while True:
            gevent.sleep(1.0)
            if self.writer is not None:
                self.writer.flush()
                if self.writer.records_lost:
                    self.report_loss(self.writer.loss_reason)

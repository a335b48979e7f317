"""Nothing lost, the pure parts: the connect-error backoff, the worker ledger, RunWriter's counted
losses and its spare descriptor, the --run-dir check."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest

from fourfold.errors import OptionError
from fourfold.levels.base import next_backoff_s
from fourfold.levels.ledger import Backoff, WorkerLedger, worker_lines
from fourfold.measure.record import RequestRecord
from fourfold.rundir import runlog
from fourfold.rundir.runlog import RunWriter, check_run_base


@pytest.mark.parametrize(("previous", "expected"),
                         [(0.0, 0.1), (0.1, 0.2), (0.2, 0.4), (1.6, 3.2), (3.2, 5.0), (5.0, 5.0)])
def test_backoff_starts_at_a_tenth_and_doubles_to_five_seconds(previous, expected):
    assert next_backoff_s(previous) == pytest.approx(expected)


def test_backoff_counts_ship_as_deltas_and_add_up_on_the_master():
    worker, master = Backoff(), Backoff()
    worker.connect_error(0.1)
    worker.waited(0.1)
    worker.connect_error(0.2)
    master.merge_wire(worker.take_wire())
    assert worker.take_wire() == {"connect_errors": 0, "http_4xx": 0, "wait_s": 0.0,
                                  "longest_wait_s": 0.0}                                  # sent once
    worker.connect_error(0.4)
    worker.client_error(0.8)
    worker.waited(0.2)
    master.merge_wire(worker.take_wire())
    assert master.summary() == {"connect_errors": 3, "http_4xx": 1, "wait_s": 0.3, "longest_wait_s": 0.8}
    assert master.console_line() == ("fourfold: 3 connect errors and 1 4xx answers; users backed off "
                                     "0.3 s in all (0.1 s doubling to 5 s per user, longest 0.8 s)")
    assert Backoff().console_line() is None


def test_a_worker_silent_at_the_end_is_named_with_its_unaccounted_requests():
    ledger = WorkerLedger()
    ledger.heard("w-alive", 10, now_s=100.0)
    ledger.received("w-alive", 10, now_s=100.0)
    ledger.received("w-dead", 6, now_s=95.0)
    ledger.heard("w-dead", 9, now_s=96.0)           # progress after its last report: 3 started, no record yet
    ledger.heard("w-dead", 8, now_s=96.0)           # an older count arriving late never lowers it
    summary = ledger.summary(end_s=101.0, missing=frozenset({"w-never"}))
    assert summary["count"] == 3 and summary["unaccounted"] == 3
    lost = {w["worker"]: w for w in summary["stopped_reporting"]}
    assert set(lost) == {"w-dead", "w-never"}         # silent 5 s; and one Locust saw but that never reported
    assert lost["w-dead"] == {"worker": "w-dead", "last_heard_at": "1970-01-01T00:01:36Z", "silent_s": 5.0,
                              "requests_started": 9, "records_received": 6, "unaccounted": 3}
    assert lost["w-never"]["last_heard_at"] is None and lost["w-never"]["unaccounted"] == 0
    assert worker_lines(summary) == [
        "fourfold: worker w-dead stopped reporting at 1970-01-01T00:01:36Z (5 s before the end): 3 of its 9 "
        "started requests are unaccounted for (records received: 6)",
        "fourfold: worker w-never stopped reporting (never heard from): 0 of its 0 started requests are "
        "unaccounted for (records received: 0)"]
    ledger.heard("w-alive", 12, now_s=101.0)             # a final report that did not arrive in time
    assert worker_lines(ledger.summary(end_s=101.0))[-1] == (
        "fourfold: 2 requests started on workers that kept reporting have no record (their final report "
        "did not reach the master in time)")


def _record(i: int) -> RequestRecord:
    return RequestRecord(level="l1", scenario="s", request_id=f"r{i}", text="x" * 50)


def test_a_write_that_fails_half_way_is_cut_back_to_whole_lines_and_counted(tmp_path, monkeypatch):
    writer = RunWriter("loss", tmp_path)
    writer.prepare()
    for i in range(3):
        writer.append(_record(i))
    writer.flush()
    real_write = os.write
    calls = []

    def disk_full(fd: int, data: bytes) -> int:
        calls.append(len(data))
        if len(calls) == 1:
            return real_write(fd, data[: len(data) // 2 + 5])    # part of the queued lines, one of them torn
        raise OSError(errno.ENOSPC, "No space left on device")

    for i in range(3, 7):
        writer.append(_record(i))
    monkeypatch.setattr(os, "write", disk_full)
    writer.flush()                                         # never raises
    monkeypatch.undo()
    lines = (writer.run_dir / "records.jsonl").read_bytes().splitlines(keepends=True)
    assert all(line.endswith(b"\n") for line in lines)     # no torn line left for the next write to follow
    assert [json.loads(line)["request_id"] for line in lines] == ["r0", "r1", "r2", "r3", "r4"]
    assert (writer.records_written, writer.records_lost) == (5, 2)
    assert writer.loss_reason.endswith("records.jsonl: No space left on device")
    writer.append(_record(7))                               # the disk has room again: writing goes on
    writer.close()
    assert writer.records_written == 6 and writer.records_lost == 2
    assert json.loads((writer.run_dir / "records.jsonl").read_bytes().splitlines()[-1])["request_id"] == "r7"


def test_a_record_that_cannot_be_serialised_is_counted_not_raised(tmp_path, monkeypatch):
    writer = RunWriter("bad", tmp_path)
    monkeypatch.setattr(RequestRecord, "to_json", lambda self: (_ for _ in ()).throw(ValueError("boom")))
    writer.append(_record(0))
    writer.close()
    assert (writer.records_written, writer.records_lost) == (0, 1)
    assert writer.loss_reason == "a record could not be serialised (ValueError: boom)"


def test_summary_json_takes_the_spare_descriptor_when_none_is_left(tmp_path, monkeypatch):
    writer = RunWriter("spare", tmp_path)
    writer.prepare()
    spare = writer._spare_fd
    real = runlog.write_json_atomic
    tries = []

    def out_of_descriptors(path: Path, obj: object) -> None:
        tries.append(writer._spare_fd)
        if len(tries) == 1:
            raise OSError(errno.EMFILE, "Too many open files")
        real(path, obj)

    monkeypatch.setattr(runlog, "write_json_atomic", out_of_descriptors)
    writer.write_summary({"records": 0})
    assert tries == [spare, None]                          # the second try ran with the spare given back
    assert json.loads((writer.run_dir / "summary.json").read_text()) == {"records": 0}
    assert writer._spare_fd is not None                    # and a new spare is set aside afterwards
    writer.close()


def test_the_run_dir_check(tmp_path):
    check_run_base(tmp_path / "new" / "runs")             # missing folders are fine: made at the start
    assert not (tmp_path / "new").exists()                # ... and not made by the check
    (tmp_path / "file").write_text("x")
    with pytest.raises(OptionError, match=r"file is a file, not a directory; give a directory"):
        check_run_base(tmp_path / "file")
    with pytest.raises(OptionError, match=r"file is a file, not a directory \(.*file is in its path\)"):
        check_run_base(tmp_path / "file" / "runs")
    assert list(tmp_path.iterdir()) == [tmp_path / "file"]

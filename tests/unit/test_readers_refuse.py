"""Readers that refuse (fourfold#32 item 7): a run's files that are FIFOs or devices are one error,
never a read that waits for good; records whose group name cannot be used (control characters,
lone surrogates, very long) and records past MAX_GROUPS groups are skipped and counted, both by the
compiled scanner and its fallback, and compare's loader goes on with the rest."""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import pytest

from fourfold.errors import RunDirError
from fourfold.reports import records
from fourfold.reports.load import load_run
from fourfold.reports.records import MAX_GROUPS, group_problem, read_record_table
from fourfold.rundir.runread import read_meta, read_records
from tests.unit.test_cli_errors import write_run


def add_records(run: Path, scenarios: list[str]) -> None:
    path = run / "records.jsonl"
    first = json.loads(path.read_text(encoding="utf-8").splitlines()[0])
    with open(path, "a", encoding="utf-8") as fh:
        for i, scenario in enumerate(scenarios):
            fh.write(json.dumps({**first, "scenario": scenario, "request_id": f"x{i}"}) + "\n")


@pytest.mark.parametrize("native", [True, False])
@pytest.mark.parametrize("scenario, why", [
    ("bad\udc80name", "its group name holds control characters or lone surrogates"),
    ("tab\x1fsplit", "its group name holds control characters or lone surrogates"),
    ("x" * 201, "its group name is longer than 200 characters"),
])
def test_an_unusable_group_name_is_skipped_and_counted(tmp_path, native, scenario, why):
    run = write_run(tmp_path)
    add_records(run, [scenario, scenario])
    table = read_record_table(run / "records.jsonl", native=native)
    assert len(table.frame) == 6 and set(table.frame["scenario"]) == {"saturation"}
    assert table.unreadable == 2 and f"skipped records: {why}" in table.first_unreadable
    assert group_problem(("l1", scenario, "")) == why


def test_groups_past_the_cap_are_skipped_and_compare_goes_on(tmp_path, monkeypatch):
    table = read_record_table(_capped_run(tmp_path, "cand", MAX_GROUPS + 40))
    assert table.frame["scenario"].nunique() == MAX_GROUPS               # saturation + the first new ones
    assert table.unreadable == 41 and f"the run already has {MAX_GROUPS} groups" in table.first_unreadable
    # the same through compare's loader, with a small cap
    monkeypatch.setattr(records, "MAX_GROUPS", 3)
    cand = write_run(tmp_path / "small", "cand")
    add_records(cand, ["s1", "s2", "s3", "s4"])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        data = load_run(cand, cache=False)
    assert any("the run already has 3 groups" in str(w.message) and "(and 1 more)" in str(w.message)
               for w in caught)
    assert set(data.table.frame["scenario"]) == {"saturation", "s1", "s2"}


def _capped_run(base: Path, label: str, extra_groups: int) -> Path:
    run = write_run(base, label)
    add_records(run, [f"s{i}" for i in range(extra_groups)])
    return run / "records.jsonl"


@pytest.mark.parametrize("name, read", [
    ("records.jsonl", lambda run: list(read_records(run))),          # score, mirror
    ("records.jsonl", lambda run: load_run(run, cache=False)),       # compare
    ("meta.json", read_meta),
    ("meta.json", lambda run: load_run(run, cache=False)),
    ("summary.json", lambda run: load_run(run, cache=False)),
])
def test_a_run_file_that_is_a_fifo_is_an_error_not_a_wait(tmp_path, name, read):
    run = write_run(tmp_path)
    (run / name).unlink()
    os.mkfifo(run / name)
    message = f"{name}: is a FIFO, not a regular file; the run directory is damaged"
    with pytest.raises(RunDirError, match=message):
        read(run)


def test_a_compare_cache_that_is_a_fifo_is_ignored_and_left_alone(tmp_path):
    run = write_run(tmp_path)
    os.mkfifo(run / "compare-cache.npz")
    data = load_run(run)                       # would wait on np.load for good
    assert len(data.table.frame) == 6
    assert Path(run / "compare-cache.npz").is_fifo()

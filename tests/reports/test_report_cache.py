"""The compare cache (``compare-cache.npz``): a report from it equals the report from the JSONL
files, number for number; a changed source, stall threshold or damaged file means a fresh read;
a run directory that cannot be written still compares."""

from __future__ import annotations

import os

import pandas as pd
import pytest
from test_report_load import _session_run

import fourfold.reports.cache  # noqa: F401  (reports.cache below)
from fourfold import reports
from fourfold.cli import main
from fourfold.reports.cache import CACHE_FILE
from fourfold.reports.compare import CompareSettings
from fourfold.reports.csvout import write_csv
from fourfold.reports.load import load_run
from fourfold.reports.report import report_from_paths
from tests.rundirs import RunSpec, write_run

SETTINGS = CompareSettings(resamples=300)


def _csv(report, tmp_path) -> str:
    """report.csv as text: every row, every number unrounded."""
    path = tmp_path / "report.csv"
    write_csv(report, path)
    return path.read_text(encoding="utf-8")


@pytest.fixture
def runs(tmp_path):
    base = write_run(tmp_path / "runs", RunSpec("base", seed=1, n=300, pause_every=7, failure_every=13))
    cand = write_run(tmp_path / "runs", RunSpec("cand", seed=2, n=300, itl=(15.0, 1.0), pause_every=3,
                                                ttft_plain=(90.0, 8.0), similarity=(0.88, 0.03)),
                     now_s=1e9 + 5)
    return [base, cand]


def _forbid_reading(monkeypatch, what: str = "records") -> None:
    def refuse(*args, **kwargs):
        raise AssertionError(f"{what} read although the cache holds them")
    target = "read_record_table" if what == "records" else "_read_scores"
    monkeypatch.setattr(reports.load, target, refuse)


def test_cached_report_equals_the_jsonl_report(runs, monkeypatch, tmp_path):
    plain = report_from_paths(runs, settings=SETTINGS, cache=False)
    assert not any((run / CACHE_FILE).exists() for run in runs)
    first = report_from_paths(runs, settings=SETTINGS)                  # reads the JSONL, writes the cache
    assert all((run / CACHE_FILE).exists() for run in runs)
    _forbid_reading(monkeypatch, "records")
    _forbid_reading(monkeypatch, "scores")
    cached = report_from_paths(runs, settings=SETTINGS)                 # from the cache only
    assert _csv(plain, tmp_path) == _csv(first, tmp_path) == _csv(cached, tmp_path)
    assert len(cached.comparisons[0].rows) > 15
    tables = [load_run(run).table for run in runs]
    monkeypatch.undo()
    for run, from_cache in zip(runs, tables):
        fresh = load_run(run, cache=False)
        pd.testing.assert_frame_equal(fresh.records, from_cache.frame, check_exact=True)
        assert fresh.table.itl == from_cache.itl
        assert fresh.table.ok_with_gaps == from_cache.ok_with_gaps
        assert [list(d.items()) for d in fresh.table.tokens_per_s.values()] == [
            list(d.items()) for d in from_cache.tokens_per_s.values()]
        assert list(fresh.table.gap_samples) == list(from_cache.gap_samples)
        for key, kept in fresh.table.gap_samples.items():
            assert [g.tolist() for g in kept] == [g.tolist() for g in from_cache.gap_samples[key]]
        assert fresh.table.gap_samples[key][0].dtype == from_cache.gap_samples[key][0].dtype


def test_scores_survive_the_cache(runs):
    fresh = load_run(runs[0], cache=False).scores
    load_run(runs[0])
    pd.testing.assert_frame_equal(load_run(runs[0]).scores, fresh, check_exact=True)


def test_session_and_retrieval_records_survive_the_cache(tmp_path):
    runs = [_session_run(tmp_path / "a", "a", 2, 3, 0.6), _session_run(tmp_path / "b", "b", 4, 4, 0.8)]
    plain = report_from_paths(runs, settings=SETTINGS, cache=False)
    report_from_paths(runs, settings=SETTINGS)
    assert all((run / CACHE_FILE).exists() for run in runs)
    cached = report_from_paths(runs, settings=SETTINGS)
    assert _csv(plain, tmp_path) == _csv(cached, tmp_path)
    assert {"completion_rate", "rounds_mean", "recall_at_k"} <= {r.metric for r in cached.comparisons[0].rows}


def test_a_changed_records_file_is_read_again(runs):
    run = runs[0]
    before = load_run(run)
    path = run / "records.jsonl"
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:-50]) + "\n")                      # fewer records: another size
    assert len(load_run(run).records) == len(before.records) - 50
    # the same size and modification time, another first record: the digest of the edges tells
    load_run(run)                                                       # the cache of the shorter file
    info = os.stat(path)
    changed = lines[0].replace('"ttfb_ms":2.0,', '"ttfb_ms":3.0,')
    assert len(changed) == len(lines[0]) and changed != lines[0]
    path.write_text("\n".join([changed, *lines[1:-50]]) + "\n")
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))
    assert (os.stat(path).st_size, os.stat(path).st_mtime_ns) == (info.st_size, info.st_mtime_ns)
    assert load_run(run).records["ttfb_ms"].iloc[0] == 3.0


def test_changed_scores_or_stall_threshold_miss_only_their_part(runs, monkeypatch):
    run = runs[0]
    load_run(run)
    scores = run / "scores.jsonl"
    rows = scores.read_text().splitlines()
    scores.write_text("\n".join(rows[:100]) + "\n")
    _forbid_reading(monkeypatch, "records")
    assert len(load_run(run).scores) == 100                             # scores read again, records cached
    scores.unlink()
    assert load_run(run).scores is None
    monkeypatch.undo()
    assert load_run(run, stall_ms=10.0).records["stalls"].sum() > load_run(run).records["stalls"].sum()


def test_damaged_cache_is_a_miss_and_is_rewritten(runs):
    run = runs[0]
    expected = load_run(run, cache=False).records
    (run / CACHE_FILE).write_bytes(b"PK\x03\x04 not a zip file")
    pd.testing.assert_frame_equal(load_run(run).records, expected, check_exact=True)
    pd.testing.assert_frame_equal(load_run(run).records, expected, check_exact=True)
    assert (run / CACHE_FILE).stat().st_size > 1000


def test_a_directory_that_cannot_be_written_still_compares(runs, monkeypatch, tmp_path):
    def read_only(*args, **kwargs):
        raise PermissionError(13, "Permission denied")
    monkeypatch.setattr(reports.cache.tempfile, "mkstemp", read_only)
    plain = report_from_paths(runs, settings=SETTINGS)
    assert not any((run / CACHE_FILE).exists() for run in runs)
    monkeypatch.undo()
    monkeypatch.setattr(reports.cache.os, "replace", read_only)        # the rename fails: no temp file left
    report_from_paths(runs, settings=SETTINGS)
    assert sorted(p.name for p in runs[0].iterdir()) == \
        ["meta.json", "records.jsonl", "scores.jsonl", "summary.json"]
    if os.geteuid() != 0:                                               # root writes anywhere
        monkeypatch.undo()
        for run in runs:
            run.chmod(0o555)
        try:
            assert _csv(report_from_paths(runs, settings=SETTINGS), tmp_path) == _csv(plain, tmp_path)
        finally:
            for run in runs:
                run.chmod(0o755)


def test_cli_no_cache_writes_none(runs, tmp_path):
    assert main(["compare", *map(str, runs), "--out", str(tmp_path / "out"), "--no-html", "--no-cache",
                 "--resamples", "300"]) == 0
    assert not any((run / CACHE_FILE).exists() for run in runs)
    assert main(["compare", *map(str, runs), "--out", str(tmp_path / "out"), "--no-html",
                 "--resamples", "300"]) == 0
    assert all((run / CACHE_FILE).exists() for run in runs)


def test_a_record_appended_while_reading_writes_no_cache(runs, monkeypatch):
    run = runs[0]
    read = reports.load.read_record_table

    def read_then_append(path, **kwargs):
        table = read(path, **kwargs)
        with open(path, "a", encoding="utf-8") as fh:
            fh.write((path.read_text().splitlines()[0]) + "\n")
        return table
    monkeypatch.setattr(reports.load, "read_record_table", read_then_append)
    load_run(run)
    assert not (run / CACHE_FILE).exists()


def test_skipped_lines_are_still_reported_from_the_cache_with_the_current_path(runs, tmp_path):
    run = runs[0]
    path = run / "records.jsonl"
    first = path.read_text().splitlines()[0]
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(first[: len(first) // 2])                              # a torn last line
    with pytest.warns(RuntimeWarning, match="skipped an unreadable line"):
        load_run(run)
    moved = run.rename(tmp_path / "moved")
    with pytest.warns(RuntimeWarning, match="skipped an unreadable line") as caught:
        assert len(load_run(moved).records) == 300
    assert str(moved / "records.jsonl") in str(caught[0].message)
    assert (moved / CACHE_FILE).exists()


def test_a_cache_missing_its_arrays_is_a_miss(runs):
    import numpy as np

    run = runs[0]
    expected = load_run(run).records
    with np.load(run / CACHE_FILE) as data:
        kept = {name: data[name] for name in data.files if not name.startswith("records.frame")}
    np.savez(run / CACHE_FILE, **kept)                                  # valid checks, no frame
    pd.testing.assert_frame_equal(load_run(run).records, expected, check_exact=True)

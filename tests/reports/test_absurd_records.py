"""Records with absurd values (a start 1e11 s away, offsets of the wrong type, a 100,000-deep line,
NaN or negative latencies, texts where numbers go) are skipped and counted by every reader, as torn
lines are: the compiled scanner and its fallback alike, ``fourfold.rundir.runread`` (score,
mirror) alike, and the compare report says how many; the other records' numbers are unchanged."""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from fourfold import cli
from fourfold.reports.load import load_run
from fourfold.reports.recordlines import _records_scan
from fourfold.reports.records import read_record_table
from fourfold.rundir.runread import RunLogWarning, read_records
from tests.unit.test_cli_errors import write_run

# write_run's first started_at; record i starts i s later, offsets 100+i, 120+i, 140+i
START = 1_767_225_600.0


def damage_line(run: Path, change: Callable[[dict], str | dict]) -> Path:
    """Replace the third record (request base-2) of ``run`` by ``change(record)`` (a dict or a raw line)."""
    path = run / "records.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines()
    changed = change(json.loads(lines[2]))
    lines[2] = changed if isinstance(changed, str) else json.dumps(changed)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


DEEP = "[" * 100_000 + "]" * 100_000
# damage, why the line is skipped (after "records.jsonl:3: skipped ")
ABSURD: list[tuple[str, Callable[[dict], str | dict], str]] = [
    ("start 1e11 s away", lambda r: {**r, "started_at": r["started_at"] + 1e11},
     "a record that started 1.16e+06 days away from the run's other records (started_at 101767225602.0)"),
    ("start 1e11 s before", lambda r: {**r, "started_at": r["started_at"] - 1e11},
     "a record that started 1.16e+06 days away from the run's other records (started_at -98232774398.0)"),
    ("offsets a text", lambda r: {**r, "chunk_offsets_ms": "102,122,142"},
     "a record with a value of the wrong kind (chunk_offsets_ms is not a list of numbers)"),
    ("offsets an object", lambda r: {**r, "chunk_offsets_ms": {"first": 102}},
     "a record with a value of the wrong kind (chunk_offsets_ms is not a list of numbers)"),
    ("an offset a text", lambda r: {**r, "chunk_offsets_ms": [102, "122"]},
     "a record with a value of the wrong kind (chunk_offsets_ms is not a list of numbers)"),
    ("a 100,000-deep line", lambda r: DEEP,
     "an unreadable line (200001 bytes): maximum recursion depth exceeded while decoding a JSON array from a "
     "unicode string"),
    ("NaN ttft", lambda r: json.dumps({**r, "ttft_ms": float("nan")}), "a record with ttft_ms NaN"),
    ("negative e2e", lambda r: {**r, "e2e_ms": -5.0}, "a record with an impossible e2e_ms (-5.0)"),
    ("infinite ttfb", lambda r: json.dumps({**r, "ttfb_ms": float("inf")}),
     "a record with an impossible ttfb_ms (inf)"),
    ("ttft a text", lambda r: {**r, "ttft_ms": "102"},
     "a record with a value of the wrong kind (ttft_ms is not a number)"),
    ("status a text", lambda r: {**r, "status": "200"},
     "a record with a value of the wrong kind (status is not a number)"),
    ("negative tokens", lambda r: {**r, "output_tokens": -3},
     "a record with an impossible output_tokens (-3.0)"),
    ("astronomic tokens", lambda r: {**r, "output_tokens": 1e29},
     "a record with an impossible output_tokens (1e+29)"),
    ("status 2000", lambda r: {**r, "status": 2000}, "a record with an impossible status (2000.0)"),
    ("an offset 1e14 ms", lambda r: {**r, "chunk_offsets_ms": [102.0, 1e14]},
     "a record with chunk offsets that are NaN, infinite or beyond 31 days"),
    ("an offset NaN", lambda r: json.dumps({**r, "chunk_offsets_ms": [102.0, float("nan")]}),
     "a record with chunk offsets that are NaN, infinite or beyond 31 days"),
]
KEPT = [0, 1, 3, 4, 5]        # the records left


@pytest.mark.parametrize("native", [
    pytest.param(True, marks=pytest.mark.skipif(_records_scan is None, reason="scanner not built")),
    False], ids=["scanner", "fallback"])
@pytest.mark.parametrize(("change", "why"), [pytest.param(*a[1:], id=a[0]) for a in ABSURD])
def test_an_absurd_record_is_skipped_and_counted(tmp_path: Path, native: bool, change, why: str) -> None:
    path = damage_line(write_run(tmp_path / "runs"), change)
    table = read_record_table(path, native=native)
    assert (table.unreadable, table.first_unreadable) == (1, f"{path}:3: skipped {why}")
    frame = table.frame
    assert frame["ttft_ms"].tolist() == [100.0 + i for i in KEPT]          # the other records, unchanged
    assert frame["started_at"].tolist() == [START + i for i in KEPT]
    assert frame["max_gap_ms"].tolist() == [20.0] * 5
    tokens = table.tokens_per_s[("l1", "saturation", "")]
    assert sum(tokens.values()) == pytest.approx(3.0 * 5)              # 3 tokens each, none from the bad line
    assert max(tokens) - min(tokens) < 10                              # seconds of this run only
    assert table.itl[("l1", "saturation", "")].count == 2 * 5


@pytest.mark.parametrize(("change", "why"), [pytest.param(*a[1:], id=a[0]) for a in ABSURD])
def test_score_and_mirror_read_skips_the_same_records(tmp_path: Path, change, why: str) -> None:
    run = write_run(tmp_path / "runs")
    path = damage_line(run, change)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        records = list(read_records(run))
    assert [r.request_id for r in records] == [f"base-{i}" for i in KEPT]
    assert [str(w.message) for w in caught if w.category is RunLogWarning] == [
        f"{path}:3: skipped {why}".replace("skipped an unreadable line", "skipped unreadable line")]


def test_compare_on_a_start_1e11_s_away_says_what_it_skipped(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """The old reader sized the per-second timeline by the span of starts: 1e11 bins, 745 GiB."""
    run = write_run(tmp_path / "runs")
    path = damage_line(run, lambda r: {**r, "started_at": r["started_at"] + 1e11})
    out = tmp_path / "out"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        assert cli.main(["compare", str(run), str(run), "--out", str(out), "--no-html",
                         "--resamples", "100"]) == 0
    note = (f"base: 1 line(s) of records.jsonl skipped and left out of every number (first: {path}:3: "
            "skipped a record that started 1.16e+06 days away from the run's other records "
            "(started_at 101767225602.0))")
    assert f"note: {note}" in capsys.readouterr().out
    assert f"- {note}" in (out / "report.md").read_text(encoding="utf-8")
    data = load_run(run)                                # now from compare-cache.npz: the same count and line
    assert (data.table.unreadable, len(data.table.frame)) == (1, 5)
    assert data.table.first_unreadable == f"{path}:3: skipped a record that started 1.16e+06 days away " \
                                          "from the run's other records (started_at 101767225602.0)"
    seconds = np.array(sorted(data.table.tokens_per_s[("l1", "saturation", "")]))
    assert seconds.min() >= START and seconds.max() < START + 10


def test_a_line_that_is_no_record_still_stops_the_report(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """Skipping is for a damaged record; a file of something else is still refused (test_cli_errors)."""
    run = write_run(tmp_path / "runs")
    damage_line(run, lambda r: {k: v for k, v in r.items() if k != "level"})
    assert cli.main(["compare", str(run), str(run), "--out", str(tmp_path / "out"), "--no-html"]) == 2
    assert "not a fourfold record (missing level)" in capsys.readouterr().err

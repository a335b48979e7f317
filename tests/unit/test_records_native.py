"""The compiled records scanner (reports/_records_scan.c) against the pure-Python reader it
speeds up: the same table, line for line, on ordinary and awkward records."""

from __future__ import annotations

import json
import math
import random

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fourfold.measure.record import RequestRecord
from fourfold.reports import records as records_module
from fourfold.reports.records import RecordTable, read_record_table
from tests.unit.test_report_data import RunSpec, write_run

scanner = records_module._records_scan


def test_the_scanner_is_built():
    """`pip install -e .` compiles it where a C compiler is (every machine the README targets);
    without it the reader silently takes the slow path, so say so here."""
    assert scanner is not None, "fourfold.reports._records_scan was not built: is gcc there at install time?"


def assert_same_table(a: RecordTable, b: RecordTable) -> None:
    """Equal tables. Within a block the slow-path lines come after the others, and the two readers
    cut blocks at different lines (by bytes read / by whole lines), so rows are compared in file
    order and gap samples as a set."""
    def in_file_order(frame: pd.DataFrame) -> pd.DataFrame:       # (categories: in order of first sight)
        frame = frame.sort_values("line_offset").reset_index(drop=True)
        return frame.astype({c: object for c in frame.columns if frame[c].dtype == "category"})

    pd.testing.assert_frame_equal(in_file_order(a.frame), in_file_order(b.frame))
    assert a.itl.keys() == b.itl.keys()
    for key in a.itl:       # (sums over blocks cut elsewhere: equal up to rounding)
        x, y = a.itl[key], b.itl[key]
        assert (x.counts, x.count, x.min, x.max) == (y.counts, y.count, y.min, y.max), key
        assert x.sum == pytest.approx(y.sum, rel=1e-12), key
    assert a.gap_samples.keys() == b.gap_samples.keys()
    for key in a.gap_samples:
        assert len(a.gap_samples[key]) == len(b.gap_samples[key])
        assert sorted(map(tuple, a.gap_samples[key])) == sorted(map(tuple, b.gap_samples[key])), key
    assert a.ok_with_gaps == b.ok_with_gaps
    assert a.tokens_per_s.keys() == b.tokens_per_s.keys()
    for key in a.tokens_per_s:
        assert a.tokens_per_s[key] == pytest.approx(b.tokens_per_s[key], rel=1e-12), key
    assert (a.warmup, a.cancelled, a.unreadable) == (b.warmup, b.cancelled, b.unreadable)
    assert a.first_unreadable == b.first_unreadable


def both(path, **kwargs) -> RecordTable:
    native = read_record_table(path, native=True, **kwargs)
    python = read_record_table(path, native=False, **kwargs)
    assert_same_table(native, python)
    return native


@pytest.mark.skipif(scanner is None, reason="scanner not built")
@pytest.mark.parametrize("block_bytes", [16 << 20, 4096, 700])
def test_ordinary_runs_read_the_same(tmp_path, block_bytes):
    run = write_run(tmp_path, RunSpec("base", seed=11, n=120, pause_every=4, failure_every=9,
                                      variant_of=["A", "B"]), scores=False)
    table = both(run / "records.jsonl", block_bytes=block_bytes)
    assert len(table.frame) == 120
    assert (table.frame["n_chunks"] == 20).sum() > 100 and not table.frame["ok"].all()


def awkward_records() -> list[str]:
    """Lines that take every branch: escapes and non-ASCII in the texts the scanner keeps, nulls,
    numbers in every spelling json.dumps uses, numbers given as text, extras, nested cut keys,
    another key order, blank and broken lines."""
    rng = random.Random(5)
    lines: list[str] = []
    for i in range(60):
        offsets = sorted(round(rng.uniform(50, 900), 3) for _ in range(rng.randint(0, 12)))
        record = RequestRecord(
            level="l1", scenario="saturation", dialect="openai", endpoint="/v1/chat/completions",
            item_id=f"item-{i % 7}", request_id=f"r{i}", user_id=i, started_at=1_700_000_000.0 + i * 0.25,
            sent_mono_s=1000.0 + i, status=200, ttfb_ms=1.5, ttft_ms=offsets[0] if offsets else None,
            e2e_ms=(offsets[-1] + 1.0) if offsets else 40.0, chunk_offsets_ms=offsets,
            output_tokens=len(offsets), content_chunks=len(offsets), terminal=True,
            text="answer \"quoted\" \\ ü", conn_reused=i % 2 == 0, http_version="HTTP/1.1")
        kind = i % 15
        if kind == 1:
            record.item_id = 'it"em\\1'                         # escapes in a kept text
        elif kind == 2:
            record.level, record.scenario = "l2", "ladder ü ✓"  # non-ASCII, no escape
        elif kind == 3:
            record.variant = "B"
            record.warmup = True
        elif kind == 4:
            record.error_class, record.status = "cancelled", 0
        elif kind == 5:
            record.chunk_offsets_ms = [1e-05, 0.1 + 0.2, 123456.789012345678, 5e-324, 7.0] + offsets
        elif kind == 6:
            record.extra = {"session_completed": True, "rounds": 3}
        elif kind == 7:
            record.extra = {"recall_at_k": 0.5, "precision_at_k": 0.25, "note": "x"}
        elif kind == 8:
            record.plan = {"server_timing": {"q": 1.0}, "text_truncated": False}
        elif kind == 9:
            record.error_class, record.status = "http_5xx", 503
        line = record.to_json()
        data = json.loads(line)
        if kind == 10:
            data["status"] = None                              # null where a number goes
            data["ttfb_ms"] = None
            data["conn_reused"] = None
        elif kind == 11:
            data["status"] = "200"                             # a number as text
        elif kind == 12:
            data["item_id"] = None
            data["variant"] = None
        elif kind == 13:
            del data["queue_ms"]                               # a key missing
        elif kind == 14:
            data = dict(sorted(data.items()))                  # another key order: the slow path
        lines.append(json.dumps(data, ensure_ascii=kind != 2, separators=(",", ":")))
        if i == 30:
            lines.append("")
            lines.append("   ")
            lines.append("{not json")
            lines.append(line[: len(line) // 2])                # a torn line in the middle
    return lines


@pytest.mark.skipif(scanner is None, reason="scanner not built")
@pytest.mark.parametrize("block_bytes", [16 << 20, 1000])
@pytest.mark.parametrize("torn_end", [False, True])
def test_awkward_records_read_the_same(tmp_path, block_bytes, torn_end):
    lines = awkward_records()
    path = tmp_path / "records.jsonl"
    text = "\n".join(lines) + "\n"
    if torn_end:
        text += lines[0][:100]                                 # a killed run's last line, no newline
    path.write_text(text, encoding="utf-8")
    table = both(path, block_bytes=block_bytes)
    frame = table.frame
    assert table.unreadable == 2 + torn_end                    # "{not json", the torn line (+ the end)
    assert table.warmup == 4 and table.cancelled == 4
    assert len(frame) == 60 - 8
    assert 'it"em\\1' in set(frame["item_id"].astype(str))
    assert "ladder ü ✓" in set(frame["scenario"].astype(str))
    assert frame["session_completed"].sum() == 4 and frame["recall_at_k"].max() == 0.5
    assert (frame["status"] == 503).sum() == 4 and (frame["status"] == 0).sum() == 4  # nulls read as 0
    row = frame[frame["n_chunks"] >= 5].iloc[0]
    assert not math.isnan(row["max_gap_ms"])


@pytest.mark.skipif(scanner is None, reason="scanner not built")
def test_a_line_longer_than_the_buffer(tmp_path):
    run = write_run(tmp_path, RunSpec("long", seed=12, n=20, chunks=400), scores=False)
    table = both(run / "records.jsonl", block_bytes=512)      # every line is several KB
    assert len(table.frame) == 20 and (table.frame["n_chunks"] == 400).all()


@pytest.mark.skipif(scanner is None, reason="scanner not built")
@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.floats(allow_nan=False, allow_infinity=False),
                          st.integers(-10**20, 10**20),
                          st.decimals(allow_nan=False, allow_infinity=False, places=3).map(float)),
                max_size=40))
def test_numbers_parse_as_float_does(values):
    text = ",".join(json.dumps(v) for v in values)
    parsed = np.frombuffer(scanner.parse_numbers(text.encode()), dtype=np.float64)
    expected = np.array([float(json.loads(json.dumps(v))) for v in values], dtype=np.float64)
    assert parsed.tobytes() == expected.tobytes()              # bit for bit, -0.0 included


@pytest.mark.skipif(scanner is None, reason="scanner not built")
@pytest.mark.parametrize("text", ["1.", "abc", "1e", "--1", "NaN", "Infinity", "1,", ",1", "1 ,2", "0x10", "1e999", "007", "-", "1.5e", "+1", ".5"])
def test_what_is_not_a_json_number_is_refused(text):
    with pytest.raises(ValueError):
        scanner.parse_numbers(text.encode())


@pytest.mark.skipif(scanner is None, reason="scanner not built")
@pytest.mark.parametrize("seed", range(40))
def test_damaged_lines_read_the_same(tmp_path, seed):
    """Random damage (a byte replaced, dropped or added in one line of ten): both readers give
    the same table, or both refuse the file the same way (a line that still parses as JSON but
    lost a key a record must have). The scanner is strict where JSON is: a bad escape or bad
    UTF-8 in any string, a number JSON would not write."""
    rng = random.Random(seed)
    out = []
    for line in awkward_records():
        data = bytearray(line.encode())
        if data and rng.random() < 0.1:
            i = rng.randrange(len(data))
            op = rng.random()
            if op < 0.4:
                data[i] = rng.choice(b'"\\,:{}[]0123456789.eE-ntf \xff')
            elif op < 0.7:
                del data[i]
            else:
                data.insert(i, rng.choice(b'"\\,:{}[]09.e-'))
        out.append(bytes(data))
    path = tmp_path / "records.jsonl"
    path.write_bytes(b"\n".join(out) + b"\n")
    results = []
    for native in (True, False):
        try:
            results.append(read_record_table(path, native=native, block_bytes=4096))
        except Exception as exc:  # noqa: BLE001 - compared below
            results.append(exc)
    native_result, python_result = results
    if isinstance(native_result, Exception) or isinstance(python_result, Exception):
        assert type(native_result) is type(python_result), (native_result, python_result)
        assert str(native_result) == str(python_result)
    else:
        assert_same_table(native_result, python_result)

"""The records reader's fast path (the compiled scanner, reports/_records_scan.c, with the exact
fallback for the lines it hands back) against the fallback alone (every line decoded whole): the
same table, row for row, on ordinary, awkward and damaged files (random damage and random numbers:
tests/properties/test_native_fuzz.py)."""

from __future__ import annotations

import json
import math
import random

import numpy as np
import pandas as pd
import pytest

from fourfold.errors import RecordsFormatError, SchemaError
from fourfold.measure.record import RequestRecord
from fourfold.reports import recordlines
from fourfold.reports.records import RecordTable, read_record_table
from fourfold.rundir import plausible
from tests.rundirs import RunSpec, write_run

scanner = recordlines._records_scan
needs_scanner = pytest.mark.skipif(scanner is None, reason="scanner not built")
# (absurd times in the damaged lines below: measure.metrics casts them to int64, the reader drops them)
pytestmark = pytest.mark.filterwarnings("ignore:invalid value encountered in cast:RuntimeWarning")


def test_the_scanner_is_built():
    """`pip install -e .` compiles it where a C compiler is (every machine the README targets);
    without it the reader silently reads every line the slow way, so say so here."""
    assert scanner is not None, "fourfold.reports._records_scan was not built: is gcc there at install time?"


def assert_same_table(a: RecordTable, b: RecordTable) -> None:
    """Equal tables: rows in file order on both paths; sums over blocks cut elsewhere (the two
    paths cut blocks at different lines) equal up to rounding."""
    def plain(frame: pd.DataFrame) -> pd.DataFrame:       # (categories: in order of first sight)
        return frame.astype({c: object for c in frame.columns if frame[c].dtype == "category"})

    pd.testing.assert_frame_equal(plain(a.frame), plain(b.frame))
    assert a.itl.keys() == b.itl.keys()
    for key in a.itl:
        x, y = a.itl[key], b.itl[key]
        assert (x.counts, x.count, x.min, x.max) == (y.counts, y.count, y.min, y.max), key
        assert x.sum == pytest.approx(y.sum, rel=1e-12), key
    assert a.gap_samples.keys() == b.gap_samples.keys()
    for key in a.gap_samples:
        assert [g.tolist() for g in a.gap_samples[key]] == [g.tolist() for g in b.gap_samples[key]], key
    assert a.ok_with_gaps == b.ok_with_gaps
    assert a.tokens_per_s.keys() == b.tokens_per_s.keys()
    for key in a.tokens_per_s:
        assert a.tokens_per_s[key] == pytest.approx(b.tokens_per_s[key], rel=1e-12), key
    assert (a.warmup, a.cancelled, a.unreadable) == (b.warmup, b.cancelled, b.unreadable)
    assert a.first_unreadable == b.first_unreadable


def both(path, **kwargs) -> RecordTable:
    native = read_record_table(path, native=True, **kwargs)
    fallback = read_record_table(path, native=False, **kwargs)
    assert_same_table(native, fallback)
    return native


def handed_back(lines: list[bytes]) -> list[int]:
    """The indices of the lines the scanner hands back to the fallback."""
    result = scanner.scan(b"".join(line + b"\n" for line in lines), 0, recordlines._SCAN_COLUMNS,
                          recordlines._SCAN_EXTRA, 1)
    return np.frombuffer(result[4], dtype=np.int64).tolist()


@needs_scanner
@pytest.mark.parametrize("block_bytes, n", [(16 << 20, 120), (4096, 120), (700, 30)])
def test_ordinary_runs_read_the_same(tmp_path, block_bytes, n):
    """(700-byte blocks: every line crosses a block's edge; ~10 ms a block on the Python path, so a
    shorter run)"""
    run = write_run(tmp_path, RunSpec("base", seed=11, n=n, pause_every=4, failure_every=9,
                                      variant_of=["A", "B"]), scores=False)
    path = run / "records.jsonl"
    table = both(path, block_bytes=block_bytes)
    assert len(table.frame) == n
    assert (table.frame["n_chunks"] == 20).sum() > n * 0.85 and not table.frame["ok"].all()
    assert handed_back(path.read_bytes().splitlines()) == []          # every ordinary line read in C


@needs_scanner
def test_a_line_from_before_the_optional_fields_reads_them_as_null_in_c(tmp_path):
    """Records written before ttfo_ms, input/cached/reasoning tokens existed: the scanner reads them
    (not handed back) with those columns NaN, as the fallback does; a present value is read."""
    run = write_run(tmp_path, RunSpec("base", seed=3, n=30), scores=False)
    path = run / "records.jsonl"
    lines = []
    for i, line in enumerate(path.read_bytes().splitlines()):
        data = json.loads(line)
        if i % 2:
            for name in plausible.OPTIONAL_FIELDS:
                data.pop(name, None)
        else:
            data.update(ttfo_ms=12.5, input_tokens=40, cached_tokens=32, reasoning_tokens=7,
                        reasoning_chunks=3, client_output_tokens=20, multi_token_chunks=2)
        lines.append(json.dumps(data).encode())
    path.write_bytes(b"\n".join(lines) + b"\n")
    assert handed_back(lines) == []
    frame = both(path).frame
    for name in plausible.OPTIONAL_FIELDS:
        column = frame[name].to_numpy()
        assert np.isnan(column[1::2]).all() and not np.isnan(column[0::2]).any(), name
    assert frame["cached_tokens"].iloc[0] == 32 and frame["ttfo_ms"].iloc[0] == 12.5


@needs_scanner
def test_a_mix_tenant_reads_alike_and_a_line_without_one_too(tmp_path):
    """``tenant`` (--mix) is an optional text: a line from before it is read in C as null; a tenant's
    records also make its own group, ``scenario#tenant``, in the ITL and token tables."""
    run = write_run(tmp_path, RunSpec("base", seed=5, n=30), scores=False)
    path = run / "records.jsonl"
    lines = []
    for i, line in enumerate(path.read_bytes().splitlines()):
        data = json.loads(line)
        data.pop("tenant", None)
        if i % 3:
            data["tenant"] = "a" if i % 3 == 1 else "b"
        lines.append(json.dumps(data).encode())
    path.write_bytes(b"\n".join(lines) + b"\n")
    assert handed_back(lines) == []
    table = both(path)
    tenants = table.frame["tenant"].astype(str).tolist()
    assert tenants == [("", "a", "b")[i % 3] for i in range(len(tenants))]
    scenarios = {key[1] for key in table.itl}
    base = next(s for s in scenarios if "#" not in s)
    assert scenarios == {base, f"{base}#a", f"{base}#b"}
    assert sum(table.ok_with_gaps[k] for k in table.ok_with_gaps if "#" in k[1]) <= table.ok_with_gaps[
        next(k for k in table.ok_with_gaps if k[1] == base)]


def awkward_records() -> list[str]:
    """Lines that take every branch: escapes and non-ASCII in the texts the scanner keeps and in
    those it skips, nulls, numbers in every spelling JSON allows, extras (L3, L4), nested keys
    named like columns, other key orders and whitespace, blank and broken lines."""
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
            text="answer \"quoted\" \\ ü \u2028 \U0001f600", conn_reused=i % 2 == 0, http_version="HTTP/1.1")
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
            record.chunk_offsets_ms = [1e-05, 0.1 + 0.2, 123456.789012345678, 5e-324, 7.0, 1e9] + offsets
        elif kind == 6:
            record.extra = {"session_completed": True, "rounds": 3, "facts_new": ["a", {"b": [1, None]}]}
        elif kind == 7:
            record.extra = {"recall_at_k": 0.5, "precision_at_k": 0.25, "note": "x", "rounds": "three"}
        elif kind == 8:
            record.plan = {"server_timing": {"q": 1.0}, "status": "nested", "extra": {"rounds": 9}}
        elif kind == 9:
            record.error_class, record.status = "http_5xx", 503
        line = record.to_json()
        data = json.loads(line)
        separators = (",", ":")
        if kind == 10:
            data["status"] = None                              # null where a number goes
            data["ttfb_ms"] = None
            data["conn_reused"] = None
        elif kind == 11:
            separators = (", ", ": ")                          # json.dumps' default spacing
        elif kind == 12:
            data["item_id"] = None
            data["variant"] = None
            data["started_at"] = None if i == 12 else data["started_at"]   # (tokens per second skip it)
        elif kind == 13:
            del data["queue_ms"]                               # a key missing
        elif kind == 14:
            data = dict(sorted(data.items()))                  # another key order
        lines.append(json.dumps(data, ensure_ascii=kind != 2, separators=separators))
        if i == 30:
            lines.append("")
            lines.append("   ")
            lines.append("{not json")
            lines.append(line[: len(line) // 2])                # a torn line in the middle
    lines.append(lines[0].replace('"status":200',
                                  '"status":2E2,"ttfb_ms":15e-1,"user_id":-0,"status":2.0e+2'))
    lines.append(lines[0].replace('"warmup":false', '"warmup":0').replace('"terminal":true', '"terminal":7'))
    return lines


@needs_scanner
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
    assert len(frame) == 62 - 8
    assert 'it"em\\1' in set(frame["item_id"].astype(str))
    assert "ladder ü ✓" in set(frame["scenario"].astype(str))
    assert frame["session_completed"].sum() == 4 and frame["rounds"].sum() == 12
    assert frame["recall_at_k"].max() == 0.5
    assert (frame["status"] == 503).sum() == 4 and (frame["status"] == 0).sum() == 4  # nulls read as 0
    assert frame["status"].iloc[-2] == 200 and frame["ttfb_ms"].iloc[-2] == 1.5
    assert frame["terminal"].iloc[-1]
    assert frame["line_offset"].is_monotonic_increasing
    row = frame[frame["n_chunks"] >= 5].iloc[0]
    assert not math.isnan(row["max_gap_ms"])
    # what the scanner reads itself: everything but escapes in kept texts and lines that are not JSON
    expected = [i for i, line in enumerate(lines) if line.strip() and (
        not _is_json(line) or 'it\\"em' in line or '"queue_ms"' not in line)]
    assert handed_back([line.encode() for line in lines]) == expected
    assert len(expected) == 2 + 4 + 4                          # not JSON, an escape in item_id, no queue_ms


def _is_json(line: str) -> bool:
    try:
        json.loads(line)
    except ValueError:
        return False
    return True


@needs_scanner
def test_a_line_longer_than_the_buffer(tmp_path):
    run = write_run(tmp_path, RunSpec("long", seed=12, n=20, chunks=400), scores=False)
    table = both(run / "records.jsonl", block_bytes=512)      # every line is several KB
    assert len(table.frame) == 20 and (table.frame["n_chunks"] == 400).all()


GOOD = RequestRecord(level="l1", scenario="s", item_id="i", started_at=1.0, status=200, ttft_ms=5.0,
                     e2e_ms=9.0, chunk_offsets_ms=[5.0, 7.5, 9.0], output_tokens=3, text="ok").to_json()


@needs_scanner
@pytest.mark.parametrize("damage", [
    ('"text":"ok"', '"text":"o\\xk"'),                          # a bad escape in a text it skips
    ('"text":"ok"', '"text":"o\x01k"'),                         # a raw control character
    ('"text":"ok"', '"text":"o\\ud83dk"'),                      # a lone surrogate (json takes it)
    ('"plan":{}', '"plan":{"a":[1,]}'),                         # a broken nested value
    ('"plan":{}', '"plan":{"a":NaN}'),                          # json's NaN
    ('"plan":{}', '"plan":' + "[" * 70 + "]" * 70),             # deeper than the scanner walks
    ('"plan":{}', '"plan":' + "[" * 3000 + "]" * 3000),         # deeper than json recurses
    ('"ttft_ms":5.0', '"ttft_ms":1e400'),                       # inf to json
    ('"ttft_ms":5.0', '"ttft_ms":-0'),                          # the integer 0
    ('"e2e_ms":9.0', '"e2e_ms":' + "9" * 400),                  # an integer beyond a float
    ('"chunk_offsets_ms":[5.0,7.5,9.0]', '"chunk_offsets_ms":[5.0 , 7.5,\t9.0]'),
    ('"chunk_offsets_ms":[5.0,7.5,9.0]', '"chunk_offsets_ms":null'),
    ('"chunk_offsets_ms":[5.0,7.5,9.0]', '"chunk_offsets_ms":[05.0]'),
    ('"level":"l1"', '"le\\u0076el":"l1"'),                     # a key spelled with an escape
    ('"schema":1}', '"schema":1,"schema":0}'),                  # a repeated key: the last counts
    ('"schema":1}', '"schema":1}  \r'),
    ('"schema":1}', '"schema":1}}'),
], ids=str)
def test_damaged_values_read_the_same(tmp_path, damage):
    """Lines the scanner reads as JSON would, hands back, or both paths count unreadable alike."""
    line = GOOD.replace(*damage).encode()
    assert line != GOOD.encode()
    path = tmp_path / "records.jsonl"
    path.write_bytes(GOOD.encode() + b"\n" + line + b"\n" + GOOD.encode() + b"\n")
    table = both(path)
    assert table.unreadable + len(table.frame) == 3


@needs_scanner
@pytest.mark.parametrize("damage, message", [
    (('"status":200', '"status":"200"'), "status is not a number"),
    (('"warmup":false', '"warmup":"no"'), "warmup is not a number"),
    (('"level":"l1"', '"level":1'), "level is not a text"),
    (('"chunk_offsets_ms":[5.0,7.5,9.0]', '"chunk_offsets_ms":[5.0,"7.5"]'),
     "chunk_offsets_ms is not a list"),
    (('"chunk_offsets_ms":[5.0,7.5,9.0]', '"chunk_offsets_ms":{}'), "chunk_offsets_ms is not a list"),
])
def test_a_value_of_the_wrong_kind_is_skipped_alike(tmp_path, damage, message):
    path = tmp_path / "records.jsonl"
    path.write_text(GOOD + "\n" + GOOD.replace(*damage) + "\n" + GOOD + "\n", encoding="utf-8")
    table = both(path)
    assert (len(table.frame), table.unreadable) == (2, 1)
    assert table.first_unreadable == (f"{path}:2: skipped a record with a value of the wrong kind ({message}"
                                      + (" of numbers)" if "list" in message else ")"))


@needs_scanner
def test_a_line_that_is_no_record_is_refused_alike(tmp_path):
    path = tmp_path / "records.jsonl"
    path.write_text(GOOD + "\n" + GOOD.replace('"scenario":"s",', "") + "\n", encoding="utf-8")
    errors = []
    for native in (True, False):
        with pytest.raises(RecordsFormatError) as caught:
            read_record_table(path, native=native)
        errors.append(str(caught.value))
    assert errors[0] == errors[1] and "records.jsonl:2: not a fourfold record (missing scenario" in errors[0]


@needs_scanner
def test_a_newer_schema_is_refused_alike(tmp_path):
    path = tmp_path / "records.jsonl"
    path.write_text(GOOD + "\n" + GOOD.replace('"schema":1', '"schema":2') + "\n", encoding="utf-8")
    for native in (True, False):
        with pytest.raises(SchemaError, match=r"records\.jsonl:2: record schema 2 is newer than the 1"):
            read_record_table(path, native=native)


def scanned_offsets(text: str) -> np.ndarray:
    """The chunk offsets ``[text]`` as the scanner reads them in a record (ValueError: handed back)."""
    line = GOOD.replace('"chunk_offsets_ms":[5.0,7.5,9.0]', f'"chunk_offsets_ms":[{text}]').encode()
    result = scanner.scan(line, 0, recordlines._SCAN_COLUMNS, recordlines._SCAN_EXTRA, 1)
    if result[4]:
        raise ValueError(f"handed back: {text!r}")
    return np.frombuffer(result[7], dtype=np.float64)


@needs_scanner
@pytest.mark.parametrize("text", ["-0", "-0.0", "-0e0", "0E-0", "1E2", "-1e-400", "123456789012345678901234",
                                  "9007199254740993", "0.1000000000000000055511151231257827",
                                  "2.2250738585072011e-308"])
def test_every_spelling_reads_as_json_does(text):
    """Bit for bit as ``float(json.loads(text))``: json reads an integer -0 as 0 (no sign)."""
    assert scanned_offsets(text).tobytes() == np.array([float(json.loads(text))]).tobytes()


@needs_scanner
@pytest.mark.parametrize("text",
                         ["1.", "abc", "1e", "--1", "NaN", "Infinity", "1,", ",1", "1,,2", "0x10", "1e999",
                          "007", "-", "1.5e", "+1", ".5", "true", "null", '"1"'])
def test_what_is_not_a_json_number_is_handed_back(text):
    with pytest.raises(ValueError, match="handed back"):
        scanned_offsets(text)

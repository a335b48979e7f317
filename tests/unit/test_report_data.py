"""The fast records reader (reports/records.py) checked against the plain one (rundir.runread) on
hand-made runs (tests/rundirs.py)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from fourfold.measure.record import RequestRecord
from fourfold.reports.records import read_record_table
from fourfold.rundir.runread import read_records
from tests.rundirs import RunSpec, write_run


def test_fast_reader_matches_measure_runread(tmp_path):
    run = write_run(tmp_path, RunSpec("base", seed=1, n=60, pause_every=4, failure_every=9))
    table = read_record_table(run / "records.jsonl", stall_ms=150.0)
    records = [r for r in read_records(run) if not r.warmup]
    frame = table.frame
    assert len(frame) == len(records) == 60
    assert np.allclose(frame["ttft_ms"], [np.nan if r.ttft_ms is None else r.ttft_ms for r in records],
                       equal_nan=True)
    assert frame["stalls"].tolist() == [sum(g > 150 for g in r.itl_ms) for r in records]
    assert frame["n_chunks"].tolist() == [len(r.chunk_offsets_ms) for r in records]
    assert frame["ok"].tolist() == [r.ok for r in records]
    gaps = [g for r in records if r.ok for g in r.itl_ms]
    histogram = table.itl[("l1", "saturation", "")]
    assert histogram.count == len(gaps) and histogram.max == pytest.approx(max(gaps))
    assert sum(table.tokens_per_s[("l1", "saturation", "")].values()) == pytest.approx(
        sum(r.output_tokens for r in records))


def test_other_key_orders_and_torn_lines_read_the_same(tmp_path):
    run = write_run(tmp_path, RunSpec("base", seed=2, n=30, pause_every=3))
    path = run / "records.jsonl"
    fast = read_record_table(path).frame
    lines = path.read_text().splitlines()
    # slow path, every line
    reordered = [json.dumps(dict(sorted(json.loads(line).items()))) for line in lines]
    path.write_text("\n".join(reordered) + "\n" + lines[0][: len(lines[0]) // 2])         # + a torn last line
    with pytest.warns(RuntimeWarning, match="torn|unreadable"):
        from fourfold.reports.load import load_run
        slow = load_run(run).records
    assert len(slow) == len(fast) == 30
    for column in ("ttft_ms", "e2e_ms", "stalls", "max_gap_ms", "n_chunks", "output_tokens"):
        assert np.allclose(slow[column].astype(float), fast[column].astype(float), equal_nan=True), column


def test_gap_sample_stays_bounded_and_spread(tmp_path):
    run = write_run(tmp_path, RunSpec("big", seed=3, n=900, chunks=5), scores=False)
    table = read_record_table(run / "records.jsonl", sample_cap=100, block_bytes=16384)   # ~50 blocks
    kept = table.gap_samples[("l1", "saturation", "")]
    assert 100 <= len(kept) < 200
    assert table.ok_with_gaps[("l1", "saturation", "")] == 900
    assert all(len(gaps) == 4 for gaps in kept)


def test_a_block_of_only_warmup_records(tmp_path):
    run = write_run(tmp_path, RunSpec("warm", seed=4, n=80, variant_of=["A", "B"]), scores=False)
    path = run / "records.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    path.write_text("".join(json.dumps({**r, "warmup": i < 40}) + "\n" for i, r in enumerate(lines)))
    table = read_record_table(path, block_bytes=2048)         # the first blocks hold warm-up records only
    assert table.warmup == 40 and len(table.frame) == 40
    assert sorted(table.frame["variant"].astype(str).unique()) == ["A", "B"]


def test_nested_keys_that_look_like_cut_points_read_the_same(tmp_path):
    run = write_run(tmp_path, RunSpec("nested", seed=6, n=30, pause_every=4), scores=False)
    path = run / "records.jsonl"
    plain = read_record_table(path).frame
    records = [RequestRecord.from_dict(json.loads(line)) for line in path.read_text().splitlines()]
    for i, record in enumerate(records):
        if i % 3 == 0:
            record.plan = {"seed": 1, "server_timing": {"queue": 1.0}, "text_truncated": False}
        if i % 3 == 1:
            record.extra = {"note": ',"server_timing":{} and ","text_truncated":', "turn": 2}
    path.write_text("".join(record.to_json() + "\n" for record in records))
    nested = read_record_table(path).frame      # lines that go the slow path come after the others
    nested = nested.sort_values("line_offset").reset_index(drop=True)
    assert len(nested) == len(plain) == 30
    for column in ("ttft_ms", "e2e_ms", "stalls", "max_gap_ms", "n_chunks", "output_tokens", "conn_reused"):
        assert np.allclose(plain[column].astype(float), nested[column].astype(float), equal_nan=True), column

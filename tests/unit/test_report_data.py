"""Hand-made run directories for the report tests, and the fast records reader checked against
the plain one (rundir.runread) on them."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from fourfold.measure.record import RequestRecord
from fourfold.reports.records import read_record_table
from fourfold.rundir.runlog import RunWriter
from fourfold.rundir.runread import read_records

T0 = 1_700_000_000.0
ITEMS = [(f"item-{i}", "structured" if i >= 5 else "plain") for i in range(10)]


@dataclass
class RunSpec:
    """What one synthetic run looks like (all draws from ``seed``)."""

    label: str
    seed: int
    n: int = 200
    ttft_plain: tuple[float, float] = (100.0, 8.0)          # mean, sd (ms)
    ttft_structured: tuple[float, float] = (160.0, 8.0)
    itl: tuple[float, float] = (20.0, 1.0)
    chunks: int = 20
    similarity: tuple[float, float] = (0.90, 0.03)
    pause_every: int = 0                                   # a 200 ms pause every N-th request (stalls)
    failure_every: int = 0
    text: str = "an answer"
    variant_of: list[str] = field(default_factory=list)    # cycle these variants (A/B in one run)
    char_f1: tuple[float, float] | None = None             # with it, scores have char_f1 and low_confidence
    low_confidence_every: int = 0                          # every N-th scored answer is low-confidence


def write_dataset(path: Path) -> Path:
    with open(path, "w", encoding="utf-8") as fh:
        for item_id, kind in ITEMS:
            tags = ["en", "structured", "points"] if kind == "structured" else ["en", "open"]
            fh.write(json.dumps({"id": item_id, "prompt": f"question {item_id}", "reference": "ref",
                                 "tags": tags}) + "\n")
    return path


def write_run(base: Path, spec: RunSpec, *, dataset: Path | None = None, scores: bool = True,
              now_s: float = T0) -> Path:
    """A run directory with meta.json, records.jsonl, summary.json and (optionally) scores.jsonl."""
    rng = random.Random(spec.seed)
    writer = RunWriter(spec.label, base, now_s=now_s)
    writer.write_meta({"label": spec.label, "level": "l1",
                       "settings": {"dataset": str(dataset) if dataset else "", "stall_ms": 150.0}})
    score_rows = []
    lexical = random.Random(spec.seed + 1)                # its own draws: the other columns stay as they were
    for i in range(spec.n):
        item_id, kind = ITEMS[i % len(ITEMS)]
        mean, sd = spec.ttft_structured if kind == "structured" else spec.ttft_plain
        ttft = round(max(1.0, rng.gauss(mean, sd)), 3)
        offsets = [ttft]
        for j in range(spec.chunks - 1):
            gap = max(0.5, rng.gauss(*spec.itl))
            if spec.pause_every and i % spec.pause_every == 0 and j == 5:
                gap += 200.0
            offsets.append(round(offsets[-1] + gap, 3))
        variant = spec.variant_of[i % len(spec.variant_of)] if spec.variant_of else ""
        failed = bool(spec.failure_every) and i % spec.failure_every == 0
        record = RequestRecord(
            level="l1", scenario=f"saturation@{variant}" if variant else "saturation", item_id=item_id,
            request_id=f"{spec.label}-{i}", variant=variant, started_at=T0 + i * 0.1,
            status=500 if failed else 200, error_class="http_5xx" if failed else "ok", ttfb_ms=2.0,
            ttft_ms=None if failed else ttft, e2e_ms=None if failed else offsets[-1],
            chunk_offsets_ms=[] if failed else offsets,
            output_tokens=0 if failed else spec.chunks, output_tokens_source="usage", terminal=not failed,
            text="" if failed else spec.text, conn_reused=i > 0)
        writer.append(record)
        if scores and not failed:
            score_rows.append({"request_id": record.request_id, "item_id": item_id, "level": "l1",
                               "scenario": record.scenario, "variant": variant,
                               "similarity": round(min(1.0, rng.gauss(*spec.similarity)), 6),
                               "compliant": None if kind == "plain" else rng.random() > 0.05})
            if spec.char_f1 is not None:
                score_rows[-1].update(
                    char_f1=round(min(1.0, lexical.gauss(*spec.char_f1)), 6),
                    low_confidence=bool(spec.low_confidence_every
                                        and len(score_rows) % spec.low_confidence_every == 0))
    writer.close()
    writer.write_summary({"records": spec.n, "slo_ms": {}})
    if scores:
        with open(writer.run_dir / "scores.jsonl", "w", encoding="utf-8") as fh:
            for row in score_rows:
                fh.write(json.dumps(row) + "\n")
    return writer.run_dir


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

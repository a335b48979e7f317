"""Counts in what fourfold prints: a noun in the number its count takes ("1 answer", not "1 answers"),
and the end-of-run table saying which records its counts leave out (issue 31 item 8; the runtime that
counts them: tests/integration/test_runtime_left_out.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fourfold.fingerprint.rag import format_rag_quality
from fourfold.fingerprint.runscore import RunScore, format_quality
from fourfold.fingerprint.score import ScoreRow, quality_block
from fourfold.measure.console import counted, format_summary, left_out_line
from fourfold.measure.record import RequestRecord
from fourfold.measure.stats import LLMStats


@pytest.mark.parametrize(("count", "noun", "plural", "expected"), [
    (0, "answer", None, "0 answers"),
    (1, "answer", None, "1 answer"),
    (2, "answer", None, "2 answers"),
    (1, "warm-up request", None, "1 warm-up request"),
    (3, "query", "queries", "3 queries"),
    (1, "query", "queries", "1 query"),
])
def test_counted(count, noun, plural, expected):
    assert counted(count, noun, plural) == expected


@pytest.mark.parametrize(("summary", "expected"), [
    ({}, ""),
    ({"records_warmup": 0, "records_cancelled": 0}, ""),
    ({"records_warmup": 16, "records_cancelled": 0},
     "not counted above: 16 warm-up requests (--warmup-requests); records.jsonl holds them"),
    ({"records_warmup": 1, "records_cancelled": 1},
     "not counted above: 1 warm-up request (--warmup-requests), 1 cancelled request (in flight when the load "
     "generator stopped); records.jsonl holds them"),
    ({"records_cancelled": 3},
     "not counted above: 3 cancelled requests (in flight when the load generator stopped); "
     "records.jsonl holds them"),
])
def test_left_out_line(summary, expected):
    assert left_out_line(summary) == expected


def _record(**kw) -> RequestRecord:
    base = dict(level="l1", scenario="chat", item_id="i", error_class="ok", e2e_ms=400.0, ttft_ms=100.0,
                chunk_offsets_ms=[100.0, 400.0], output_tokens=2)
    return RequestRecord(**{**base, **kw})


def test_the_end_of_run_table_says_what_its_counts_leave_out():
    stats = LLMStats()
    stats.add_record(_record())
    summary = {**stats.summary(), "records_warmup": 2, "records_cancelled": 1}
    lines = format_summary(summary).splitlines()
    assert lines[2].startswith("l1:chat") and lines[2].split()[1] == "1"           # reqs: the measured one
    assert lines[3] == ("not counted above: 2 warm-up requests (--warmup-requests), 1 cancelled request (in "
                        "flight when the load generator stopped); records.jsonl holds them")
    assert "not counted above" not in format_summary(stats.summary())


def _scored(n: int, **kw) -> RunScore:
    rows = [ScoreRow(request_id=f"r{i}", item_id="i", level="l1", scenario="chat", similarity=0.9, **kw)
            for i in range(n)]
    return RunScore(Path("runs/x"), Path("items.jsonl"), rows, quality_block(rows), seconds=1.0)


def test_fourfold_score_says_1_answer_not_1_answers():
    one = format_quality(_scored(1, forced_length=True))
    assert one.startswith("runs/x: 1 answer scored in 1.0 s")
    assert "low-confidence: 0 of 1 answer had more than" in one
    assert "note: 1 answer was forced to max_tokens (ignore_eos)" in one
    assert "1 answers" not in one
    two = format_quality(_scored(2, truncated=True))
    assert two.startswith("runs/x: 2 answers scored") and "note: 2 answers were cut at max_tokens" in two


def test_groundedness_line_counts_its_answers():
    block = {"n": 1, "groundedness_mean": 0.7, "groundedness_p5": 0.7, "low_groundedness_threshold": 0.6,
             "low_groundedness_rate": 0.0, "groundedness_retrieval_hit": 0.7,
             "groundedness_retrieval_miss": None}
    line = format_rag_quality(block)
    assert line.startswith("groundedness (answer vs retrieved chunks, 1 answer): mean 0.700")


def test_the_reports_low_confidence_note_counts_in_the_right_number():
    from types import SimpleNamespace

    from fourfold.reports.scores import scoring_notes

    total = {"n": 1, "low_confidence_n": 1, "char_f1_mean": 0.5, "char_f1_n": 1}
    quality = {"total": total, "unk_threshold": 0.2}
    note, = scoring_notes([SimpleNamespace(label="cand", summary={"quality": quality})])
    assert note.startswith("cand: 1 of 1 answer is low-confidence (more than 20% of their word pieces")
    assert note.endswith("; character-bigram F1 mean 0.500 over 1 answer")

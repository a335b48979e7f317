"""RAG metrics (measure.rag) and L3 groundedness scoring (fingerprint.rag), without the model."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from fourfold.fingerprint.rag import rag_dataset, rag_quality
from fourfold.fingerprint.runscore import score_run
from fourfold.fingerprint.score import ScoreRow
from fourfold.measure.rag import (
    CorpusDoc,
    RagStats,
    annotate,
    conflict_groups,
    format_rag,
    precision_at_k,
    recall_at_k,
)
from fourfold.measure.record import RequestRecord
from fourfold.workloads.corpus import corpus_by_id

CLAIMS = {"d1": {"g": "2010"}, "d2": {"g": "2012"}, "d3": {"g": "2010"}, "d4": {"h": "x"}}


@pytest.mark.parametrize(("retrieved", "gold", "k", "recall", "precision"), [
    (["a", "b", "c"], ["a"], 3, 1.0, 1 / 3),
    (["x", "b", "a"], ["a", "z"], 3, 0.5, 1 / 3),
    (["x", "y", "a"], ["a"], 2, 0.0, 0.0),
    ([], ["a"], 3, 0.0, None),
    (["a"], [], 3, None, 0.0),
    (["a", "a", "b"], ["a"], 3, 1.0, 0.5),       # a repeated id counts once
])
def test_recall_and_precision_at_k(retrieved, gold, k, recall, precision):
    assert recall_at_k(retrieved, gold, k) == recall
    assert precision_at_k(retrieved, gold, k) == (pytest.approx(precision) if precision is not None else None)


@pytest.mark.parametrize(("retrieved", "groups"), [
    (["d1", "d2"], ["g"]), (["d1", "d3"], []), (["d1", "d3", "d2", "d4"], ["g"]), (["d4", "zz"], []),
    ([], []),
])
def test_conflict_groups(retrieved, groups):
    assert conflict_groups(retrieved, CLAIMS) == groups


def record(item_id: str, retrieved: list[str], gold: list[str], *, e2e: float = 100.0, tokens: int = 10,
           timing: dict[str, float] | None = None, **kw) -> RequestRecord:
    rec = RequestRecord(level="l3", scenario="rag", item_id=item_id, e2e_ms=e2e, ttft_ms=40.0,
                        output_tokens=tokens, server_timing=dict(timing or {}),
                        text=kw.pop("text", "answer"), **kw)
    if retrieved:
        rec.extra["retrieved_ids"] = retrieved      # what the dialect leaves in a record
    annotate(rec, retrieved, gold, 2, CLAIMS)
    return rec


def test_annotate_fills_the_rag_facts():
    rec = record("q1", ["d1", "d2", "d9"], ["d1"],
                 timing={"retrieve": 2.0, "llm_ttft": 30.0, "generate": 60.0, "total": 93.0})
    assert rec.extra == {"retrieved_ids": ["d1", "d2", "d9"], "k": 2, "gold_ids": ["d1"], "recall_at_k": 1.0,
                         "precision_at_k": 0.5, "conflict": True, "conflict_groups": ["g"],
                         "effective_tps": 100.0, "other_ms": 8.0}
    failed = record("q1", [], ["d1"], error_class="http_5xx")
    assert failed.extra == {"k": 2, "gold_ids": ["d1"]}


def test_rag_stats_summary_and_console_block():
    stats = RagStats(k=2)
    timing = {"retrieve": 1.0, "rerank": 1.0, "llm_ttft": 38.0, "generate": 50.0, "total": 91.0}
    stats.add_all([
        record("q1", ["d1", "d2"], ["d1"], timing=timing),
        record("q1", ["d1", "d2"], ["d1"], timing=timing),
        record("q2", ["d4", "d5"], ["d6"], timing=timing, e2e=200.0),
        record("q3", ["d4"], ["d4"], warmup=True),                        # skipped: warm-up
        record("q3", ["d4"], ["d4"], error_class="cancelled"),            # skipped: cancelled
        record("q4", [], ["d4"], error_class="http_5xx"),                 # counted, not ok
    ])
    s = stats.summary()
    assert (s["requests"], s["ok"], s["with_retrieved_ids"], s["with_stage_timings"]) == (4, 3, 3, 3)
    assert s["recall_at_k"] == pytest.approx(2 / 3)
    assert s["recall_at_k_by_question"] == pytest.approx(0.5) \
        and s["recall_by_question"] == {"q1": 1.0, "q2": 0.0}
    assert s["precision_at_k"] == pytest.approx(1 / 3) and s["conflict_rate"] == pytest.approx(2 / 3)
    assert s["effective_tps"] == pytest.approx(30 / 0.4)
    assert list(s["stages_ms"]) == ["retrieve", "rerank", "llm_ttft", "generate"]
    assert s["other_ms"]["count"] == 3 and s["server_total_ms"]["count"] == 3
    text = format_rag(s)
    assert text.splitlines()[:2] == [
        "fourfold RAG summary (3 ok of 4 requests; 3 with retrieved ids, 3 with stage timings)",
        "recall@2 0.667 (over 2 questions: 0.500)  context precision@2 0.333  conflict rate 66.7%  "
        "effective tok/s 75.0",
    ]
    assert "  retrieve " in text and "other (e2e - stages)" in text


def test_rag_stats_without_stage_timings_says_end_to_end_only():
    stats = RagStats()
    stats.add(record("q1", ["d1"], ["d1"]))
    s = stats.summary()
    assert s["timing_source"] == "end_to_end_only" and s["stages_ms"] == {}
    assert "end-to-end timing only" in format_rag(s)


class FakeEmbedder:
    """Bag-of-words vectors: deterministic, no model."""

    def __init__(self, vocabulary: list[str]) -> None:
        self.vocabulary = vocabulary

    def encode(self, texts):
        return np.array([[t.lower().count(w) for w in self.vocabulary] for t in texts],
                        dtype=np.float32) + 1e-6


CORPUS = {"d1": CorpusDoc("d1", "Acme", "Acme was founded in 2010.", {"g": "2010"}),
          "d2": CorpusDoc("d2", "Weather", "It rained in Tarnwick.")}


def test_rag_quality_scores_answers_against_their_chunks():
    embedder = FakeEmbedder(["acme", "founded", "rained", "tarnwick"])
    grounded = record("q1", ["d1"], ["d1"], text="Acme was founded in 2010.", request_id="r1")
    ungrounded = record("q2", ["d2"], ["d1"], text="Acme was founded in 2010.", request_id="r2")
    unknown = record("q3", ["d7"], ["d1"], text="x", request_id="r3")
    rows = [ScoreRow(request_id=r.request_id, item_id=r.item_id, level="l3")
            for r in (grounded, ungrounded, unknown)]
    block = rag_quality(rows, [grounded, ungrounded, unknown], embedder, CORPUS)
    assert rows[0].groundedness > 0.9 and rows[1].groundedness < 0.1     # the chunk is "Acme: Acme was ..."
    assert rows[2].groundedness is None
    assert block["n"] == 2 and block["unknown_ids"] == 1 and block["low_groundedness_rate"] == 0.5
    assert block["groundedness_retrieval_hit"] == pytest.approx(rows[0].groundedness, abs=1e-4)


def test_score_run_of_an_l3_run_uses_its_questions_and_corpus(tmp_path: Path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"id": d.id, "title": d.title, "text": d.text}) + "\n"
                              for d in CORPUS.values()))
    questions = tmp_path / "questions.jsonl"
    questions.write_text(json.dumps({"id": "q1", "prompt": "When was Acme founded?",
                                     "reference": "Acme was founded in 2010.", "gold_ids": ["d1"]}) + "\n")
    run = tmp_path / "runs" / "20260101T000000Z-l3"
    run.mkdir(parents=True)
    (run / "meta.json").write_text(json.dumps({"level": "l3", "settings": {"dataset": ""},
                                               "rag": {"questions": str(questions), "corpus": str(corpus)}}))
    rec = record("q1", ["d1", "d2"], ["d1"], text="Acme was founded in 2010.", request_id="r1")
    (run / "records.jsonl").write_text(rec.to_json() + "\n")
    (run / "summary.json").write_text(json.dumps({"level": "l3"}))
    assert rag_dataset(json.loads((run / "meta.json").read_text()), run) == questions
    result = score_run(run, FakeEmbedder(["acme", "founded", "rained", "tarnwick"]), progress=False)
    assert result.dataset == questions and result.quality["rag"]["n"] == 1
    row = json.loads((run / "scores.jsonl").read_text())
    assert row["similarity"] == pytest.approx(1.0, abs=1e-3) and row["groundedness"] > 0.9
    assert json.loads((run / "summary.json").read_text())["quality"]["rag"]["groundedness_mean"] > 0.9


def test_load_corpus_reads_claims_and_reports_bad_lines(tmp_path: Path):
    path = tmp_path / "c.jsonl"
    path.write_text('{"id": "a", "title": "T", "text": "x", "claims": {"g": 1}}\n{"id": "b"}\n')
    with pytest.raises(ValueError, match=r"c.jsonl:2"):
        corpus_by_id(path)
    path.write_text('{"id": "a", "title": "T", "text": "x", "claims": {"g": 1}}\n')
    assert corpus_by_id(path)["a"] == CorpusDoc("a", "T", "x", {"g": "1"})

"""The reference RAG service's retrieval (pure) and the bundled RAG dataset."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from fourfold.targets.rag.bm25 import BM25Index
from fourfold.targets.rag.corpus import DEFAULT_CORPUS, DEFAULT_QUESTIONS, load_corpus, load_questions
from fourfold.targets.rag.rerank import PassageReranker
from fourfold.targets.rag.retriever import Pipeline, evaluate_recall
from fourfold.targets.rag.server import assemble_messages, server_timing
from fourfold.targets.rag.text import sentences, stem, tokenize

REPO = Path(__file__).resolve().parents[2]
DOCS = load_corpus()
QUESTIONS = load_questions()


@pytest.mark.parametrize(("text", "terms"), [
    ("In which year was Velora Systems founded?", ["year", "velora", "system", "founded"]),
    ("The cities' rivers", ["city", "river"]),
    ("Class status", ["class", "status"]),
    ("", []),
])
def test_tokenize(text, terms):
    assert tokenize(text) == terms


@pytest.mark.parametrize(("word", "stemmed"), [("systems", "system"), ("cities", "city"), ("bus", "bus"),
                                               ("glass", "glass"), ("its", "its")])
def test_stem(word, stemmed):
    assert stem(word) == stemmed


def test_sentences_keep_decimals():
    assert sentences("It costs 3.5 crowns. Cheap! Really?") == ["It costs 3.5 crowns.", "Cheap!", "Really?"]


def test_bm25_matches_the_formula():
    docs = [["a", "b", "a"], ["b", "c"], ["c", "d", "e", "f"]]
    index = BM25Index(docs, k1=1.2, b=0.75)
    avgdl = 3.0
    idf_a = math.log(1 + (3 - 1 + 0.5) / (1 + 0.5))
    expected = idf_a * 2 * 2.2 / (2 + 1.2 * (1 - 0.75 + 0.75 * 3 / avgdl))
    assert index.scores(["a"]) == pytest.approx({0: expected})
    assert index.scores(["a", "a"]) == index.scores(["a"])           # query repeats count once
    assert index.top(["zzz"], 3) == []


def test_bm25_ties_break_on_document_order():
    index = BM25Index([["x"], ["x"], ["x"]])
    assert [i for i, _ in index.top(["x"], 2)] == [0, 1]


def test_passage_reranker_prefers_the_sentence_that_answers():
    texts = ["Velora Systems news. Velora Systems shares rose. Analysts follow Velora Systems.",
             "Velora Systems makes routers. It employs 40 people. Velora Systems was founded in 2011. "
             "It has a site near the river. Its chief executive is Ada Quell."]
    texts += [f"Company {name} was founded in 19{n}." for n, name in enumerate("ABCDEF", 70)]  # background
    index = BM25Index([tokenize(t) for t in texts])
    query = "When was Velora Systems founded?"
    first = index.top(tokenize(query), 8)
    assert [doc for doc, _ in first[:2]] == [0, 1]   # BM25: the short note that repeats the name wins
    reranked = PassageReranker(texts, index.idf).rerank(query, first)
    assert [doc for doc, _ in reranked[:2]] == [1, 0]


def test_pipeline_rejects_unknown_names_and_lists_valid_ones():
    with pytest.raises(ValueError, match="bm25, dense"):
        Pipeline.build(DOCS, retriever="tfidf")
    with pytest.raises(ValueError, match="none, lexical, dense"):
        Pipeline.build(DOCS, rerank="cross")


def test_pipeline_retrieves_top_k_with_stage_timings():
    plain = Pipeline.build(DOCS, top_k=3)
    found = plain.retrieve("In which year was Ithora Pharma founded?")
    assert len(found.ids) == 3 and set(found.timings_ms) == {"retrieve"}
    reranked = Pipeline.build(DOCS, rerank="lexical", top_k=3).retrieve(
        "In which year was Ithora Pharma founded?")
    assert set(reranked.timings_ms) == {"retrieve", "rerank"}
    assert len(Pipeline.build(DOCS, top_k=5).retrieve("Ithora Pharma").ids) == 5


def test_offline_recall_at_3_differs_between_the_two_configurations():
    """The article's re-ranker finding in miniature: the re-ranked pipeline has a higher recall@3."""
    bm25 = evaluate_recall(Pipeline.build(DOCS), QUESTIONS, k=3)
    lexical = evaluate_recall(Pipeline.build(DOCS, rerank="lexical"), QUESTIONS, k=3)
    mean_bm25, mean_lexical = sum(bm25.values()) / len(bm25), sum(lexical.values()) / len(lexical)
    assert len(bm25) == len(QUESTIONS) == 60
    assert mean_bm25 == pytest.approx(0.700, abs=1e-9)
    assert mean_lexical == pytest.approx(50 / 60, abs=1e-9)
    assert mean_lexical - mean_bm25 > 0.1


def test_prompt_puts_the_bare_question_last_and_the_chunks_in_a_system_message():
    messages = assemble_messages("Who founded X?", DOCS[:2])
    assert messages[-1] == {"role": "user", "content": "Who founded X?"}
    assert messages[0]["role"] == "system" and DOCS[0].text in messages[0]["content"]
    assert f"[{DOCS[1].id}]" in messages[0]["content"]


def test_server_timing_header_syntax():
    assert server_timing({"retrieve": 0.4125, "llm_ttft": 80.0}) == "retrieve;dur=0.412, llm_ttft;dur=80.000"


# ---- the bundled dataset ----
def test_dataset_sizes_and_ids():
    ids = {d.id for d in DOCS}
    assert len(DOCS) >= 200 and len(QUESTIONS) >= 50
    assert all(q.gold_ids and set(q.gold_ids) <= ids and q.reference for q in QUESTIONS)
    assert len({q.prompt for q in QUESTIONS}) == len(QUESTIONS)      # the simulator matches on the prompt
    total = sum(p.stat().st_size for p in (REPO / "fourfold" / "data" / "rag").iterdir() if p.is_file())
    assert total < 1_000_000


def test_conflict_groups_disagree_and_are_asked_about():
    groups: dict[str, set[str]] = {}
    for doc in DOCS:
        for group, value in (doc.meta.get("claims") or {}).items():
            groups.setdefault(group, set()).add(value)
    assert len(groups) >= 3 and all(len(values) == 2 for values in groups.values())
    asked = {json.loads(line).get("conflict_group") for line in DEFAULT_QUESTIONS.read_text().splitlines()}
    assert set(groups) <= asked
    by_id = {d.id: d for d in DOCS}
    for line in DEFAULT_QUESTIONS.read_text().splitlines():   # gold documents state the reference's value
        q = json.loads(line)
        if q.get("conflict_group"):
            (gold,) = q["gold_ids"]
            assert by_id[gold].meta["claims"][q["conflict_group"]] in q["reference"]


def test_generator_reproduces_the_committed_files():
    import importlib.util

    spec = importlib.util.spec_from_file_location("rag_generate",
                                                  REPO / "fourfold" / "data" / "rag" / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    docs, questions = module.build()

    def jsonl(rows):
        return "".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n" for r in rows)

    assert jsonl(docs) == DEFAULT_CORPUS.read_text(encoding="utf-8")
    assert jsonl(questions) == DEFAULT_QUESTIONS.read_text(encoding="utf-8")


class BagOfWords:
    """A stand-in embedder: term counts over the corpus vocabulary (no model)."""

    def __init__(self, texts):
        self.vocabulary = sorted({t for text in texts for t in tokenize(text)})
        self.index = {t: i for i, t in enumerate(self.vocabulary)}
        self.calls = 0

    def encode(self, texts):
        import numpy as np

        self.calls += 1
        out = np.zeros((len(texts), len(self.vocabulary)), dtype=np.float32)
        for row, text in enumerate(texts):
            for term in tokenize(text):
                if term in self.index:
                    out[row, self.index[term]] += 1
        return out


def test_dense_stages_with_a_stand_in_embedder():
    embedder = BagOfWords([d.indexed_text for d in DOCS])
    dense = Pipeline.build(DOCS, retriever="dense", embedder=embedder)
    found = dense.retrieve("Which river runs through " + DOCS[200].title.split()[0] + "?")
    assert len(found.ids) == 3 and set(found.timings_ms) == {"retrieve"}
    assert embedder.calls == 3            # corpus, the start-up warm-up query, this question
    both = Pipeline.build(DOCS, retriever="bm25", rerank="dense", embedder=embedder)
    assert set(both.retrieve("Who founded Ithora Pharma?").timings_ms) == {"retrieve", "rerank"}
    assert both.config == \
        {"retriever": "bm25", "rerank": "dense", "top_k": 3, "candidates": 20, "documents": len(DOCS)}

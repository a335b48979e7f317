"""Profiles that differ where the article's versions differ, through real servers (issue #18):
connection reuse (keep-alive requests per connection) and the RAG service's re-ranker."""

from __future__ import annotations

import http.client
import json

import httpx
import pytest

from fourfold.targets.launch import start_simulator
from fourfold.targets.rag import DEFAULT_QUESTIONS, load_questions
from fourfold.targets.rag.launch import start_rag_service

pytestmark = pytest.mark.integration

BODY = json.dumps({"model": "m", "messages": [{"role": "user", "content": "Why is the sky blue?"}],
                   "max_tokens": 2}).encode()


def _closes(profile: str, requests: int = 20) -> list[int]:
    """Indexes (1-based) of the responses that said ``Connection: close``, on one client connection."""
    with start_simulator(profile) as sim:
        host, port = sim.url.removeprefix("http://").split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=10)
        closes = []
        for n in range(1, requests + 1):
            conn.request("POST", "/v1/chat/completions", BODY, {"content-type": "application/json"})
            response = conn.getresponse()
            response.read()
            assert response.status == 200
            if (response.getheader("connection") or "").lower() == "close":
                closes.append(n)
                conn.close()                 # http.client opens a new connection for the next request
        conn.close()
    return closes


def test_connection_reuse_differs_by_profile():
    assert _closes("baseline") == list(range(2, 21, 2))   # 2 requests a connection: reuse 10/20
    assert _closes("candidate") == [10, 20]                # 10 a connection: reuse 18/20
    assert _closes("flat") == []


def _recall(rag_url: str) -> float:
    questions = [q for q in load_questions() if q.gold_ids]
    with httpx.Client(base_url=rag_url, timeout=10) as client:
        got = []
        for q in questions:
            ids = client.post("/v1/retrieve", json={"question": q.prompt}).json()["retrieved_ids"]
            got.append(len(set(q.gold_ids) & set(ids[:3])) / len(q.gold_ids))
    return sum(got) / len(got)


def test_rag_recall_differs_by_profile():
    recalls = {}
    with start_simulator("reference", extra_args=["--prompts", str(DEFAULT_QUESTIONS)]) as sim:
        for profile in ("baseline", "candidate"):
            with start_rag_service(sim.url, None, None, profile=profile) as rag:
                config = httpx.get(rag.url + "/v1/rag/config").json()
                assert config["rerank"] == {"baseline": "none", "candidate": "lexical"}[profile]
                recalls[profile] = _recall(rag.url)
        with start_rag_service(sim.url, None, "none", profile="candidate") as rag:    # a stage given wins
            assert httpx.get(rag.url + "/v1/rag/config").json()["rerank"] == "none"
    assert recalls["candidate"] >= recalls["baseline"] + 0.08, recalls


@pytest.mark.slow
def test_generated_answers_land_near_the_articles_fingerprint():
    """The real MiniLM: mean cosine of each profile's answers (seed 0, every bundled prompt) to the
    references, near the article's 0.79 (baseline) and 0.82 (candidate): 0.790 and 0.822 (seeds 1 to
    3 give 0.778 to 0.817 and 0.801 to 0.836; each seed's embeddings cost ~9 s of CPU)."""
    import numpy as np

    from fourfold.fingerprint.embedder import MiniLMEmbedder
    from fourfold.targets.sim.answers import DEFAULT_PROMPTS_PATH, AnswerBook
    from fourfold.targets.sim.plan import RequestFacts, make_plan
    from fourfold.targets.sim.profile import load_profile

    book = AnswerBook.load()
    items = [json.loads(line) for line in DEFAULT_PROMPTS_PATH.read_text(encoding="utf-8").splitlines()
             if line.strip()]
    prompts = [item.get("prompt") or item["messages"][-1]["content"] for item in items]
    embedder = MiniLMEmbedder()

    def unit(texts: list[str]) -> np.ndarray:
        vectors = np.asarray(embedder.encode(texts), dtype=np.float64)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)

    texts = {name: [make_plan(load_profile(name), book.answer(p), RequestFacts(p, 5), 0).text
                    for p in prompts] for name in ("baseline", "candidate", "reference")}
    # the reference profile says the reference word for word (so its cosine is 1 without embedding it)
    assert texts["reference"] == [book.answer(p).text for p in prompts]
    references = unit(texts["reference"])
    means = {name: float((unit(texts[name]) * references).sum(axis=1).mean())
             for name in ("baseline", "candidate")}
    assert 0.76 <= means["baseline"] <= 0.82 and 0.79 <= means["candidate"] <= 0.85, means
    assert means["candidate"] > means["baseline"], means

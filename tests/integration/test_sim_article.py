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
    assert _closes("baseline") == [4, 8, 12, 16, 20]      # 4 requests a connection: reuse 15/20
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

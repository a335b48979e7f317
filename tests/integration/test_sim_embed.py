"""The simulator's embeddings and rerank endpoints as a subprocess (docs/embeddings.md): shapes,
determinism, the delay the profile gives, and bad bodies answered with a 400."""

from __future__ import annotations

import math
import time
from collections.abc import Iterator

import httpx
import pytest

from fourfold.targets.launch import SimProcess, start_simulator

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def sim() -> Iterator[SimProcess]:
    with start_simulator("flat", seed=1, extra_args=[
            "--set", "embed_ms=30", "--set", "embed_ms_per_input=5", "--set", "embed_ms_per_1k_tokens=0",
            "--set", "embed_dims=16"]) as process:
        yield process


_CLIENTS: dict[str, httpx.Client] = {}


def _post(sim: SimProcess, path: str, body: object) -> tuple[httpx.Response, float]:
    client = _CLIENTS.setdefault(sim.url, httpx.Client(base_url=sim.url, timeout=10))
    t0 = time.perf_counter()
    response = client.post(path, json=body)
    return response, (time.perf_counter() - t0) * 1000


def test_embeddings_are_deterministic_unit_vectors_due_after_the_profile_s_delay(sim: SimProcess) -> None:
    _post(sim, "/v1/embeddings", {"model": "m", "input": "warm the connection"})
    one, one_ms = _post(sim, "/v1/embeddings", {"model": "m", "input": "the cat sat"})
    batch, batch_ms = _post(sim, "/v1/embeddings", {"model": "m", "input": ["the cat sat"] + ["x y"] * 9})
    assert one.status_code == batch.status_code == 200
    body = batch.json()
    assert body["object"] == "list" and body["model"] == "m"
    assert [d["index"] for d in body["data"]] == list(range(10))
    assert all(d["object"] == "embedding" and len(d["embedding"]) == 16 for d in body["data"])
    assert math.isclose(sum(x * x for x in body["data"][0]["embedding"]), 1.0, abs_tol=1e-4)
    assert body["data"][0]["embedding"] == one.json()["data"][0]["embedding"]     # same text, same vector
    assert body["usage"]["prompt_tokens"] == one.json()["usage"]["prompt_tokens"] + 9 * 2 == 21
    assert one_ms >= 35 and batch_ms >= 80          # 30 + 5 per input
    assert batch_ms > one_ms + 30


def test_rerank_in_vllm_jina_and_cohere_shapes(sim: SimProcess) -> None:
    docs = ["a dog barks", {"text": "the cat sat on the mat"}, "cats sit"]
    for path in ("/v1/rerank", "/rerank"):
        response, _ = _post(sim, path, {"model": "r", "query": "where the cat sat", "documents": docs})
        body = response.json()
        assert response.status_code == 200 and body["model"] == "r" and body["usage"]["total_tokens"] > 0
        assert [r["index"] for r in body["results"]][0] == 1
        assert body["results"][0]["document"] == {"text": "the cat sat on the mat"}
        scores = [r["relevance_score"] for r in body["results"]]
        assert scores == sorted(scores, reverse=True) and len(scores) == 3
    cohere, _ = _post(sim, "/v2/rerank", {"model": "r", "query": "where the cat sat", "documents": docs,
                                          "top_n": 2})
    body = cohere.json()
    assert [r["index"] for r in body["results"]] == [1, 0] or [r["index"] for r in body["results"]][0] == 1
    assert len(body["results"]) == 2 and set(body["results"][0]) == {"index", "relevance_score"}
    assert body["meta"]["billed_units"] == {"search_units": 1}


@pytest.mark.parametrize("path, body, needle", [
    ("/v1/embeddings", {"model": "m"}, "'input'"),
    ("/v1/embeddings", {"input": [1, 2]}, "'input'"),
    ("/v1/embeddings", {"input": "a", "encoding_format": "base64"}, "encoding_format"),
    ("/v1/rerank", {"query": "q", "documents": []}, "'documents'"),
    ("/v2/rerank", {"documents": ["a"]}, "'query'"),
    ("/v1/rerank", {"query": "q", "documents": ["a"], "top_n": 0}, "'top_n'"),
])
def test_bad_bodies_are_a_400_that_says_why(sim: SimProcess, path: str, body: object, needle: str) -> None:
    response, _ = _post(sim, path, body)
    assert response.status_code == 400 and needle in response.json()["error"]["message"]
    not_json = httpx.post(sim.url + path, content=b"{nope", timeout=10)
    assert not_json.status_code == 400 and "not JSON" in not_json.json()["error"]["message"]
    assert httpx.get(sim.url + path, timeout=10).status_code == 405


def test_the_metrics_count_embedding_requests_and_tokens(sim: SimProcess) -> None:
    def prompt_tokens() -> float:
        text = httpx.get(sim.url + "/metrics", timeout=10).text
        line = next(x for x in text.splitlines() if x.startswith("vllm:prompt_tokens_total"))
        return float(line.rsplit(" ", 1)[1])

    before = prompt_tokens()
    _post(sim, "/v1/embeddings", {"input": ["one two three", "four"]})
    assert prompt_tokens() == before + 4

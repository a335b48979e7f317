"""The reference RAG service as a subprocess in front of the simulator, spoken to with httpx."""

from __future__ import annotations

import json

import httpx
import pytest

from fourfold.targets.launch import start_simulator
from fourfold.targets.rag import DEFAULT_QUESTIONS, Pipeline, load_corpus, load_questions
from fourfold.targets.rag.launch import RagServiceStartError, start_rag_service
from tests.conftest import free_port

pytestmark = pytest.mark.integration

QUESTION = next(q for q in load_questions() if q.id == "q-001")     # a conflict-group question


@pytest.fixture(scope="module")
def services():
    with start_simulator("reference", extra_args=["--prompts", str(DEFAULT_QUESTIONS)]) as sim, \
            start_rag_service(sim.url, rerank="lexical") as rag:
        yield sim, rag


@pytest.fixture
def client(services):
    with httpx.Client(base_url=services[1].url, timeout=10) as c:
        yield c


def timing_header(value: str) -> dict[str, float]:
    out = {}
    for metric in value.split(","):
        name, _, dur = metric.strip().partition(";dur=")
        out[name] = float(dur)
    return out


def test_json_answer_with_ids_and_every_stage(client):
    response = client.post("/v1/rag", json={"question": QUESTION.prompt})
    assert response.status_code == 200
    body = response.json()
    assert body["answer"] == QUESTION.reference             # the simulator found the bare question
    assert response.headers["x-retrieved-ids"] == ",".join(body["retrieved_ids"])
    assert len(body["retrieved_ids"]) == 3 and QUESTION.gold_ids[0] in body["retrieved_ids"]
    timings = timing_header(response.headers["server-timing"])
    assert timings == pytest.approx(body["timings"], abs=1e-3)
    assert list(timings) == ["retrieve", "rerank", "llm_ttft", "generate", "total"]
    stages = sum(v for k, v in timings.items() if k != "total")
    assert stages <= timings["total"] <= stages + 20
    assert body["usage"]["completion_tokens"] > 0


def test_stream_sends_retrieval_first_and_timings_last(client):
    with client.stream("POST", "/v1/rag", json={"question": QUESTION.prompt, "stream": True}) as response:
        assert response.headers["content-type"] == "text/event-stream"
        assert set(timing_header(response.headers["server-timing"])) == {"retrieve", "rerank"}
        body = response.read().decode()
    events = [block for block in body.split("\n\n") if block]
    assert events[0].startswith("event: retrieval\n")
    assert events[-2].startswith("event: fourfold.timing\n") and events[-1] == "data: [DONE]"
    timing = json.loads(events[-2].split("data: ", 1)[1])
    assert set(timing) == {"retrieve", "rerank", "llm_ttft", "generate", "total"}
    text = "".join(json.loads(e[6:])["delta"] for e in events if e.startswith('data: {"delta"'))
    assert text == QUESTION.reference
    assert client.get("/health").json() == {"status": "ok"}              # the connection stays usable


def test_retrieve_config_and_bad_requests(client):
    found = client.post("/v1/retrieve", json={"question": QUESTION.prompt, "top_k": 5}).json()
    assert len(found["retrieved_ids"]) == 5 and set(found["timings"]) == {"retrieve", "rerank"}
    config = client.get("/v1/rag/config").json()
    assert (config["retriever"], config["rerank"], config["top_k"], config["documents"]) == \
        ("bm25", "lexical", 3, 321)
    for body, status in (({"q": "x"}, 400), ({"question": "x", "top_k": 0}, 400),
                         ({"question": "x", "stream": 1, "max_tokens": "9"}, 400)):
        response = client.post("/v1/rag", json=body)
        assert response.status_code == status and "error" in response.json()
    assert client.post("/v1/other", json={}).status_code == 404
    assert client.post("/v1/rag", content=b"{not json").status_code == 400


def test_upstream_down_is_a_502_or_an_error_event():
    with start_rag_service(f"http://127.0.0.1:{free_port()}") as rag, \
         httpx.Client(base_url=rag.url, timeout=10) as c:
        response = c.post("/v1/rag", json={"question": "Who founded X?"})
        assert response.status_code == 502 and "unreachable" in response.json()["error"]["message"]
        body = c.post("/v1/rag", json={"question": "Who founded X?", "stream": True}).text
        assert "event: error" in body and "[DONE]" not in body


def test_start_error_names_the_problem():
    with pytest.raises(RagServiceStartError, match="no documents|corpus|No such file"):
        start_rag_service("http://127.0.0.1:1", extra_args=["--corpus", "/nonexistent.jsonl"])


def test_a_failing_retriever_answers_500_not_a_dropped_connection():
    import threading

    from fourfold.targets.rag.server import RagServer, RagService
    from fourfold.targets.rag.upstream import Upstream

    class Broken:
        name = "broken"

        def search(self, question, n):
            raise RuntimeError("index is gone")

    pipeline = Pipeline.build(load_corpus()[:5])
    pipeline.first = Broken()
    server = RagServer(("127.0.0.1", 0), RagService(pipeline, Upstream("http://127.0.0.1:1")))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        response = httpx.post(f"http://127.0.0.1:{server.server_address[1]}/v1/rag",
                              json={"question": "x"}, timeout=5)
        assert response.status_code == 500 and "index is gone" in response.json()["error"]["message"]
    finally:
        server.shutdown()
        server.server_close()

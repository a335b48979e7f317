"""The ``rag`` dialect: request templates, path specs, and parsing recorded bodies in any split."""

from __future__ import annotations

import json
import random
from pathlib import Path

import httpx
import pytest

from fourfold.client.dialects import RequestOptions, get_dialect
from fourfold.client.dialects.rag import RagDialect, RagWire, extract, parse_paths, render_template
from fourfold.client.stream import send
from fourfold.measure.record import RequestRecord
from fourfold.workloads.items import Item

RECORDED = Path(__file__).resolve().parents[1] / "recorded"
SSE = (RECORDED / "rag_reference.sse").read_bytes()
BODY = (RECORDED / "rag_reference.json").read_bytes()
ITEM = Item("q-001", ({"role": "user", "content": 'Who said "hi"?'},), ("ref",), max_tokens=64)
IDS = ["doc-0314", "doc-0009", "doc-0175"]


def parse(body: bytes, splits: list[int] | None = None, wire: RagWire | None = None, streaming: bool = True):
    parser = RagDialect(wire).parser(streaming)
    cuts = [0, *(splits or []), len(body)]
    deltas = sum(parser.feed(body[a:b]) for a, b in zip(cuts, cuts[1:]))
    return deltas, parser.finish()


@pytest.mark.parametrize(("spec", "expected"), [
    ("answer", [((("answer",), None))]),
    ("a.b|sse:final|sse:final:x.0", [(("a", "b"), None), ((), "final"), (("x", "0"), "final")]),
    ("", []),
])
def test_parse_paths(spec, expected):
    assert [(p.parts, p.event) for p in parse_paths(spec)] == expected


def test_parse_paths_rejects_an_event_without_a_name():
    with pytest.raises(ValueError, match="sse:EVENT"):
        parse_paths("sse:")


@pytest.mark.parametrize(("path", "value"), [
    ("a.b", 1), ("docs.*.id", ["x", "y"]), ("docs.1.id", "y"), ("docs.-2.id", "y"), ("docs.5.id", "MISSING"),
    ("a.zz", "MISSING"), ("", {"a": {"b": 1}, "docs": [{"id": "x"}, {"id": "y"}, {"name": "z"}]}),
])
def test_extract(path, value):
    obj = {"a": {"b": 1}, "docs": [{"id": "x"}, {"id": "y"}, {"name": "z"}]}
    found = extract(obj, tuple(p for p in path.split(".") if p))
    assert (found if found.__class__ is not object else "MISSING") == value


def test_template_fills_typed_placeholders_and_escapes_the_question():
    template = {"query": "{question}", "stream": "{stream}", "opts": {"n": "{max_tokens}", "m": "{model}"},
                "prefix": "Q: {question}", "id": "{id}", "keep": 3}
    body = render_template(template, ITEM, RequestOptions(model="m1", stream=False))
    assert body == {"query": 'Who said "hi"?', "stream": False, "opts": {"n": 64, "m": "m1"},
                    "prefix": 'Q: Who said "hi"?', "id": "q-001", "keep": 3}
    no_max = Item("q", ({"role": "user", "content": "x"},))
    assert "n" not in render_template(template, no_max, RequestOptions())["opts"]   # None drops the key


def test_build_posts_the_default_template():
    request = get_dialect("rag").build(ITEM, RequestOptions(stream=True))
    assert (request.method, request.path, request.stream) == ("POST", "/v1/rag", True)
    assert request.json == {"question": 'Who said "hi"?', "stream": True}
    assert json.loads(json.dumps(request.json)) == request.json


@pytest.mark.parametrize("bad", ['{"q": 1}', "[1]", "not json"])
def test_wire_rejects_bad_templates(bad):
    with pytest.raises(ValueError, match="--rag-request-template"):
        RagWire(template=bad)


def test_reference_stream_whole_and_torn_at_every_byte():
    deltas, whole = parse(SSE)
    assert whole.terminal and not whole.error_class
    assert whole.text.startswith("Ithora Pharma was founded in 2012.") \
        and deltas == whole.content_deltas == 20
    assert whole.output_tokens == 20 and whole.finish_reason == "stop"
    assert whole.extra == {"retrieved_ids": IDS}
    assert whole.server_timing == {"retrieve": 0.238, "rerank": 0.468, "llm_ttft": 224.855,
                                   "generate": 391.357, "total": 617.615}
    for cut in range(1, len(SSE)):
        assert parse(SSE, [cut])[1] == whole
    rng = random.Random(7)
    for _ in range(20):
        cuts = sorted(rng.sample(range(1, len(SSE)), 30))
        assert parse(SSE, cuts)[1] == whole


def test_reference_json_body_even_when_a_stream_was_asked_for():
    for streaming in (True, False):
        deltas, done = parse(BODY, [1, 40], streaming=streaming)
        assert done.text == "Ithora Pharma was founded in 2012." and done.content_deltas == 1
        assert done.terminal and done.extra["retrieved_ids"] == IDS and done.output_tokens == 7
        assert set(done.server_timing) == {"retrieve", "rerank", "llm_ttft", "generate", "total"}


def test_openai_shaped_rag_stream_with_sources_in_a_custom_event():
    body = (b'event: sources\ndata: {"documents": [{"id": "a"}, {"id": "b"}]}\n\n'
            b'data: {"choices": [{"delta": {"content": "Hel"}}]}\n\n'
            b'data: {"choices": [{"delta": {"content": "lo"}, "finish_reason": "stop"}]}\n\n'
            b'event: stats\ndata: {"retrieval_ms": 12, "generation_us": 5000}\n\ndata: [DONE]\n\n')
    wire = RagWire(ids="sse:sources:documents.*.id", timings="sse:stats")
    _, done = parse(body, wire=wire)
    assert done.text == "Hello" and done.content_deltas == 2 and done.terminal
    assert done.extra == {"retrieved_ids": ["a", "b"]}
    assert done.server_timing == {"retrieval": 12.0, "generation": 5.0}


def test_error_event_and_missing_terminal():
    body = (b'event: retrieval\ndata: {"retrieved_ids": ["x"]}\n\n'
            b'event: error\ndata: {"error": {"message": "upstream down"}}\n\n')
    _, done = parse(body)
    assert not done.terminal and done.error_class == "interrupted" and "upstream down" in done.error_detail
    _, done = parse(b'data: {"delta": "a"}\n\ndata: oops\n\nevent: done\n\n')
    assert done.terminal and done.error_class == "malformed_stream" and done.text == "a"


def test_send_merges_server_timing_header_and_body_into_the_record():
    def handler(request: httpx.Request) -> httpx.Response:
        assert json.loads(request.content) == {"question": 'Who said "hi"?', "stream": True}
        return httpx.Response(200, headers={"content-type": "text/event-stream",
                                            "server-timing": "retrieve;dur=0.2, edge;dur=1.5"},
                              content=iter([SSE[:100], SSE[100:]]))

    client = httpx.Client(base_url="http://rag", transport=httpx.MockTransport(handler))
    dialect = RagDialect()
    record = send(client, dialect, dialect.build(ITEM, RequestOptions(stream=True)),
                  RequestRecord(level="l3"))
    assert record.error_class == "ok" and record.output_tokens == 20 \
        and record.output_tokens_source == "usage"
    assert record.extra["retrieved_ids"] == IDS
    assert record.server_timing["edge"] == 1.5 and record.server_timing["retrieve"] == 0.238   # the body wins

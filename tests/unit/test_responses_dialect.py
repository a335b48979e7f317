"""The Responses API dialect (``--dialect responses``): the request it builds and how it classifies
what comes back: the same rules as chat (cut, no terminal event, error events, implausible usage).
The recorded streams are in test_dialects.py; the simulator's side in tests/integration."""

from __future__ import annotations

import json
from typing import Any

import pytest

from fourfold.client.dialects import RequestOptions, get_dialect
from fourfold.workloads.items import Item

RESPONSES = get_dialect("responses")


def parse(body: bytes, streaming: bool = True) -> Any:
    parser = RESPONSES.parser(streaming)
    for i in range(0, len(body), 5):        # torn reads
        parser.feed(body[i:i + 5])
    return parser.finish()


def events(*payloads: dict[str, Any]) -> bytes:
    return b"".join(b"event: " + p["type"].encode() + b"\ndata: " + json.dumps(p).encode() + b"\n\n"
                    for p in payloads)


def text(delta: str) -> dict[str, Any]:
    return {"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0, "content_index": 0,
            "delta": delta}


def terminal(status: str, usage: Any = None, **response: Any) -> dict[str, Any]:
    kind = {"completed": "response.completed", "incomplete": "response.incomplete",
            "failed": "response.failed"}[status]
    return {"type": kind, "response": {"object": "response", "status": status, "usage": usage, **response}}


def test_the_request_moves_system_messages_to_instructions_and_names_the_limit():
    item = Item(id="q", messages=({"role": "system", "content": "Be brief."},
                                  {"role": "user", "content": "Hi"}), max_tokens=50)
    request = RESPONSES.build(item, RequestOptions(model="m", ignore_eos=True, temperature=0.0,
                                                   extra_body={"reasoning": {"effort": "low"}}))
    assert (request.method, request.path, request.stream) == ("POST", "/v1/responses", True)
    assert request.json == {"model": "m", "input": [{"role": "user", "content": "Hi"}], "stream": True,
                            "instructions": "Be brief.", "max_output_tokens": 50, "ignore_eos": True,
                            "temperature": 0.0, "reasoning": {"effort": "low"}}
    plain = RESPONSES.build(Item(id="q", messages=({"role": "user", "content": "Hi"},)),
                            RequestOptions(stream=False, max_tokens=7))
    assert plain.json == {"model": "fourfold-sim", "input": [{"role": "user", "content": "Hi"}],
                          "stream": False, "max_output_tokens": 7}
    assert get_dialect("openai-responses") is RESPONSES


def test_a_stream_without_a_terminal_event_was_cut():
    done = parse(events(text("a"), text("b")))
    assert (done.text, done.terminal, done.finish_reason, done.error_class) == ("ab", False, "", "")


@pytest.mark.parametrize("reason, finish", [("max_output_tokens", "length"),
                                            ("content_filter", "content_filter")])
def test_an_incomplete_response_says_why(reason, finish):
    done = parse(events(text("a"), terminal("incomplete", {"output_tokens": 1, "input_tokens": 3},
                                            incomplete_details={"reason": reason})))
    assert (done.terminal, done.finish_reason, done.output_tokens, done.input_tokens) == (True, finish, 1, 3)


@pytest.mark.parametrize("error, error_class", [
    ({"code": "rate_limit_exceeded", "message": "Rate limit reached"}, "rate_limited"),
    ({"code": "server_error", "message": "The server had an error"}, "http_5xx"),
    ({"code": "invalid_prompt", "message": "Your input exceeds the context window of this model"},
     "context_length"),
    ({"code": "vector_store_timeout", "message": "timed out"}, "interrupted"),
])
def test_a_failed_response_and_an_error_event_are_classified_alike(error, error_class):
    failed = parse(events(text("a"), terminal("failed", error=error)))
    assert (failed.terminal, failed.error_class, failed.text) == (True, error_class, "a")
    assert error["message"] in failed.error_detail
    event = parse(events(text("a"), {"type": "error", "sequence_number": 2, "param": None, **error}))
    assert (event.terminal, event.error_class) == (False, error_class)


def test_a_refusal_is_the_answer_and_a_summary_is_reasoning_whose_tokens_were_not_sent():
    summary = {"type": "response.reasoning_summary_text.delta", "item_id": "rs_1", "output_index": 0,
               "summary_index": 0, "delta": "Thinking about safety."}
    refusal = {"type": "response.refusal.delta", "item_id": "msg_1", "output_index": 1, "content_index": 0,
               "delta": "I can't help with that."}
    usage = {"input_tokens": 9, "output_tokens": 1500, "output_tokens_details": {"reasoning_tokens": 1490}}
    done = parse(events(summary, refusal, terminal("completed", usage)))
    assert (done.reasoning, done.text, done.first_answer_delta, done.finish_reason) == (
        "Thinking about safety.", "I can't help with that.", 1, "stop")
    # 1490 tokens were never streamed: 10 visible tokens for 2 deltas is plausible
    assert (done.output_tokens, done.reasoning_tokens) == (1500, 1490)
    assert "usage_implausible" not in done.extra


@pytest.mark.parametrize("value", [-1, 10**12, "12", 2.5])
def test_implausible_usage_is_flagged_and_not_believed(value):
    done = parse(events(text("Hello"), terminal("completed", {"output_tokens": value, "input_tokens": 2})))
    assert done.output_tokens is None and "usage_implausible" in done.extra and done.input_tokens == 2


def test_malformed_events_are_counted_and_the_answer_kept():
    body = events(text("a")) + b"event: response.output_text.delta\ndata: {not json\n\n" + events(
        text("b"), {"type": "response.output_text.delta", "delta": ["not", "text"]}, terminal("completed"))
    done = parse(body)
    assert (done.text, done.terminal, done.error_class) == ("ab", True, "malformed_stream")


def test_the_non_streaming_body():
    body = {"object": "response", "status": "completed", "output": [
        {"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": "Hmm."}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Yes."}]},
        {"type": "function_call", "call_id": "call_1", "name": "lookup", "arguments": '{"q": "x"}'}],
        "usage": {"input_tokens": 4, "input_tokens_details": {"cached_tokens": 2}, "output_tokens": 6,
                  "output_tokens_details": {"reasoning_tokens": 2}}}
    done = parse(json.dumps(body).encode(), streaming=False)
    assert (done.text, done.reasoning, done.finish_reason, done.terminal, done.content_deltas) == (
        "Yes.", "Hmm.", "stop", True, 1)
    assert (done.output_tokens, done.reasoning_tokens, done.input_tokens, done.cached_tokens) == (6, 2, 4, 2)
    assert done.tool_calls == [{"id": "call_1", "name": "lookup", "arguments": '{"q": "x"}'}]
    incomplete = {**body, "status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}}
    cut = parse(json.dumps(incomplete).encode(), streaming=False)
    assert cut.finish_reason == "length"
    error = parse(b'{"error": {"message": "Rate limit reached", "type": "requests", '
                  b'"code": "rate_limit_exceeded"}}', streaming=False)
    assert (error.error_class, error.text) == ("rate_limited", "")

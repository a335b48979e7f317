"""Dialects: exact request bodies, recorded server streams in any split, errors as data."""

from __future__ import annotations

import dataclasses
import json
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fourfold.client.dialects import DIALECTS, RequestOptions, UnknownDialect, get_dialect
from fourfold.client.dialects.base import Completion
from fourfold.client.dialects.openai_chat import loads_event
from fourfold.measure.record import ERROR_CLASSES
from fourfold.workloads.items import Item

RECORDED = Path(__file__).resolve().parents[1] / "recorded"


def run(dialect: str, chunks: list[bytes], streaming: bool = True,
        **kwargs: Any) -> tuple[Completion, list[int], Any]:
    parser = get_dialect(dialect).parser(streaming, **kwargs)
    counts = [parser.feed(chunk) for chunk in chunks]
    return parser.finish(), counts, parser


def sse(*payloads: Any, sep: str = "\n\n") -> bytes:
    return "".join(f"data: {p if isinstance(p, str) else json.dumps(p)}{sep}" for p in payloads).encode()


def chunk(content: str | None = None, finish: str | None = None, **delta: Any) -> dict[str, Any]:
    if content is not None:
        delta["content"] = content
    return {"object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


# ---- recorded streams -------------------------------------------------------------------------

EXPECTED = {
    # file: (dialect, Completion fields, server_timing subset)
    "vllm_chat": ("openai", dict(
        text="Paris is the capital of France — a city of café culture.", reasoning="", content_deltas=13,
        output_tokens=13, input_tokens=24, finish_reason="stop", terminal=True, error_class="",
        first_answer_delta=0, reasoning_deltas=0, reasoning_tokens=None), {}),
    "vllm_chat_reasoning": ("openai", dict(
        text="\n\n2 + 2 =", reasoning="Okay, the user asks for 2+2.", content_deltas=15,
        output_tokens=16, input_tokens=12, finish_reason="length", terminal=True, error_class="",
        first_answer_delta=10, reasoning_deltas=10, reasoning_tokens=None, cached_tokens=None), {}),
    "deepseek_reasoner": ("openai", dict(
        text="3 × 4 = 12.", reasoning="We need 3*4. That's 12.", content_deltas=16, output_tokens=16,
        input_tokens=20, finish_reason="stop", terminal=True, error_class="", first_answer_delta=10,
        reasoning_deltas=10, reasoning_tokens=10, cached_tokens=16), {}),
    "sglang_reasoning": ("openai", dict(
        text="Hello! How can I help?", reasoning="The user wants a greeting.", content_deltas=13,
        output_tokens=14, input_tokens=31, finish_reason="stop", terminal=True, error_class="",
        first_answer_delta=6, reasoning_deltas=6, reasoning_tokens=None, cached_tokens=24), {}),
    "llamacpp_chat": ("openai", dict(
        text="Hello! How can I help you today? 😊", content_deltas=10, output_tokens=11, input_tokens=18,
        finish_reason="stop", terminal=True, error_class=""), {"prompt_ms": 31.442, "predicted_ms": 126.351}),
    # captured from llama-cpp-python 0.3.36's server (tests/recorded/README.md): no usage in the stream
    # although the length one asked for stream_options.include_usage, no timings block, CRLF-free
    "llamacpp_captured_stop": ("openai", dict(
        text="L'Étoile, la Marseillaise. Paris is the capital of France and a major city in Europe's "
             "capital of France.", content_deltas=29, output_tokens=None, input_tokens=None,
        finish_reason="stop", terminal=True, error_class=""), {}),
    "llamacpp_captured_length": ("openai", dict(
        text="Once upon a time, in the land of Eldrador,", content_deltas=12, output_tokens=None,
        input_tokens=None, finish_reason="length", terminal=True, error_class=""), {}),
    "tgi_chat": ("openai", dict(
        text="Deep learning is a subset of machine learning", content_deltas=8, output_tokens=8,
        input_tokens=21, finish_reason="length", terminal=True, error_class=""), {}),
    "anthropic_messages": ("anthropic", dict(
        text="Hello! I'm Claude — happy to help.", reasoning="", content_deltas=6, output_tokens=15,
        input_tokens=472, finish_reason="end_turn", terminal=True, error_class=""), {}),
    "anthropic_messages_crlf": ("anthropic", dict(
        text="Hello! I'm Claude — happy to help.", content_deltas=6, output_tokens=15, input_tokens=472,
        finish_reason="end_turn", terminal=True, error_class=""), {}),
    "anthropic_thinking_tools": ("anthropic", dict(
        text="Let me check that.", reasoning="I need to find the weather in Paris.", content_deltas=8,
        output_tokens=64, input_tokens=38, finish_reason="length", terminal=True, error_class="",
        first_answer_delta=3, reasoning_deltas=3, tool_calls=[
            {"id": "toolu_01T1x1fJ34qAmk2tNTrN7Up6", "name": "get_weather",
             "arguments": '{"location": "Paris"}'}]), {}),
    "openai_tool_calls": ("openai", dict(
        text="", reasoning="", content_deltas=13, output_tokens=19, input_tokens=81,
        finish_reason="tool_calls", terminal=True, error_class="", first_answer_delta=0, reasoning_tokens=0,
        cached_tokens=0, tool_calls=[
            {"id": "call_DdmO9pD3xa9XTPNJ32zg2hcA", "name": "get_weather",
             "arguments": '{"location":"Paris, France","unit":"celsius"}'}]), {}),
    # the Responses API: OpenAI's reasoning summary (192 reasoning tokens counted, never sent), a
    # function call, and vLLM's raw reasoning text cut at max_output_tokens
    "openai_responses_reasoning": ("responses", dict(
        text="A KV cache stores the keys and values of past tokens so each new token attends without "
             "recomputing them.", reasoning="**Considering the question**\n\nThe user asks what a KV cache "
             "is; a short answer.", content_deltas=13, output_tokens=246, input_tokens=1290,
        finish_reason="stop", terminal=True, error_class="", first_answer_delta=6, reasoning_deltas=6,
        reasoning_tokens=192, cached_tokens=1152), {}),
    "openai_responses_tool_call": ("responses", dict(
        text="", reasoning="", content_deltas=12, output_tokens=19, input_tokens=64,
        finish_reason="tool_calls", terminal=True, error_class="", first_answer_delta=0, reasoning_tokens=0,
        cached_tokens=0, tool_calls=[
            {"id": "call_Qe5XnV3TAEN2WSOvaK4Uq3wm", "name": "get_weather",
             "arguments": '{"location":"Paris, France","unit":"c"}'}]), {}),
    "vllm_responses_incomplete": ("responses", dict(
        text="Continuous batching admits requests é—", reasoning="Okay, the user wants one line on batching.",
        content_deltas=16, output_tokens=16, input_tokens=21, finish_reason="length", terminal=True,
        error_class="", first_answer_delta=10, reasoning_deltas=10, reasoning_tokens=10,
        cached_tokens=16), {}),
    # captured from llama-cpp-python 0.3.36 --chat_format chatml-function-calling, tool_choice forced: every
    # piece repeats the call's whole name (and a legacy function_call), no usage
    "llamacpp_captured_tool_call": ("openai", dict(
        text="", reasoning="", content_deltas=14, output_tokens=None, finish_reason="tool_calls",
        terminal=True, error_class="", first_answer_delta=0, tool_calls=[
            {"id": "call__0_get_weather_cmpl-c7f65003-8ab9-400d-bbaa-e013b52ae0c9", "name": "get_weather",
             "arguments": '{ "location": "Paris", "unit":"celsius"}'}]), {}),
    "triton_generate_stream": ("triton", dict(
        text=" Machine learning is a branch of artificial intelligence.", content_deltas=9,
        output_tokens=None, input_tokens=None, finish_reason="", terminal=True, error_class=""), {}),
}


def recorded(name: str) -> bytes:
    return (RECORDED / f"{name}.sse").read_bytes()


def check(name: str, completion: Completion, counts: list[int], parser: Any) -> None:
    dialect, fields, timing = EXPECTED[name]
    for key, value in fields.items():
        assert getattr(completion, key) == value, key
    assert sum(counts) == completion.content_deltas
    assert parser.server_timing.items() >= timing.items()


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_recorded_stream_in_one_read(name: str) -> None:
    check(name, *run(EXPECTED[name][0], [recorded(name)]))


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_recorded_stream_one_byte_per_read(name: str) -> None:
    raw = recorded(name)
    check(name, *run(EXPECTED[name][0], [raw[i:i + 1] for i in range(len(raw))]))


@settings(max_examples=25, deadline=None)
@given(name=st.sampled_from(sorted(EXPECTED)), data=st.data())
def test_recorded_stream_random_splits(name: str, data: st.DataObject) -> None:
    raw = recorded(name)
    cuts = sorted(set(data.draw(st.lists(st.integers(0, len(raw)), max_size=40))))
    points = [0, *cuts, len(raw)]
    check(name, *run(EXPECTED[name][0], [raw[a:b] for a, b in pairwise(points)]))


@pytest.mark.parametrize("name", ["vllm_chat", "anthropic_messages", "triton_generate_stream"])
def test_each_delta_counts_in_the_read_that_completes_its_event(name: str) -> None:
    raw = recorded(name)
    events = [e + b"\n\n" for e in raw.split(b"\n\n") if e]
    completion, counts, _ = run(EXPECTED[name][0], events)
    assert sum(counts) == completion.content_deltas and set(counts) <= {0, 1}
    if name == "vllm_chat":   # role chunk, 13 tokens, finish chunk, usage chunk, [DONE]
        assert counts == [0] + [1] * 13 + [0, 0, 0]


@pytest.mark.parametrize("name, fields", [
    ("llamacpp_captured_stop", dict(output_tokens=29, input_tokens=37, finish_reason="stop")),
    ("llamacpp_captured_length", dict(output_tokens=12, input_tokens=43, finish_reason="length")),
])
def test_captured_non_streaming_body(name: str, fields: dict[str, Any]) -> None:
    """The same requests non-streaming: one JSON body with usage (the stream had none)."""
    raw = (RECORDED / f"{name}.json").read_bytes()
    streamed = run("openai", [recorded(name)])[0]
    for cuts in ([raw], [raw[i:i + 1] for i in range(len(raw))]):
        completion = run("openai", cuts, streaming=False)[0]
        assert (completion.text, completion.terminal, completion.error_class) == (streamed.text, True, "")
        assert {key: getattr(completion, key) for key in fields} == fields


def test_crlf_variant_matches_lf() -> None:
    assert recorded("anthropic_messages_crlf") == recorded("anthropic_messages").replace(b"\n", b"\r\n")


# ---- OpenAI errors and edges --------------------------------------------------------------------

def test_openai_malformed_events_are_counted_and_parsing_goes_on() -> None:
    raw = sse(chunk("a"), '{"choices": [', chunk("b"), "not json", chunk("c", finish="stop"), "[DONE]")
    completion, counts, parser = run("openai", [raw])
    assert (completion.text, completion.content_deltas, completion.terminal) == ("abc", 3, True)
    assert completion.error_class == "malformed_stream"
    assert parser.malformed_events == 2
    assert '{"choices": [' in completion.error_detail and "+1 more" in completion.error_detail


@pytest.mark.parametrize("error, expected", [
    ({"error": {"message": "upstream died", "type": "InternalServerError", "code": 500}}, "interrupted"),
    ({"error": {"message": "This model's maximum context length is 8192 tokens", "code": 400}},
     "context_length"),
    ({"error": {"message": "too long", "code": "context_length_exceeded"}}, "context_length"),
    ({"object": "error", "message": "decode failed", "type": "BadRequestError", "code": 400}, "interrupted"),
    ({"error": "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 4096",
      "error_type": "validation"}, "interrupted"),
])
def test_openai_error_event_mid_stream(error: dict[str, Any], expected: str) -> None:
    completion, counts, _ = run("openai", [sse(chunk("partial"), error)])
    assert completion.error_class == expected
    assert completion.error_detail and completion.text == "partial" and not completion.terminal


def test_openai_error_outranks_malformed() -> None:
    completion, _, _ = run("openai", [sse("{bad", {"error": {"message": "boom"}}, "{bad")])
    assert (completion.error_class, completion.error_detail) == ("interrupted", "boom")


def test_openai_stream_without_done_or_finish_reason_is_not_terminal() -> None:
    completion, _, _ = run("openai", [sse(chunk("a"), chunk("b"))])
    assert (completion.text, completion.finish_reason, completion.terminal) == ("ab", "", False)
    assert "no_terminal_event" not in completion.extra


def test_openai_stream_with_a_finish_reason_and_no_done_is_complete() -> None:
    # (tests/unit/test_stream_completeness.py has every dialect and the torn cases)
    completion, _, _ = run("openai", [sse(chunk("a"), chunk("", finish="stop"))])
    assert (completion.text, completion.finish_reason, completion.terminal) == ("a", "stop", True)
    assert completion.extra == {"no_terminal_event": True}


def test_openai_reasoning_field_and_role_only_chunks() -> None:
    raw = sse(chunk(role="assistant"), chunk(None, reasoning="think"), chunk(content=None, role="assistant"),
              chunk("x"), "[DONE]")
    completion, counts, _ = run("openai", [raw])
    assert counts == [2] and (completion.reasoning, completion.text) == ("think", "x")


def test_openai_continuous_usage_last_value_wins() -> None:
    events = [dict(chunk(t), usage={"prompt_tokens": 5, "completion_tokens": n})
              for n, t in enumerate("abc", 1)]
    completion, _, _ = run("openai", [sse(*events, "[DONE]")])
    assert (completion.output_tokens, completion.input_tokens) == (3, 5)


def test_openai_invalid_utf8_in_content_is_kept_replaced_and_counted_as_malformed() -> None:
    raw = b'data: {"choices":[{"delta":{"content":"a\xffb"}}]}\n\ndata: [DONE]\n\n'
    completion, counts, parser = run("openai", [raw])
    assert completion.text == "a\ufffdb" and completion.terminal and parser.decoder.invalid_utf8 == 1
    assert completion.error_class == "malformed_stream" and "UTF-8" in completion.error_detail


def test_openai_oversized_event_is_too_large() -> None:
    raw = sse(chunk("a"), chunk("x" * 5000), chunk("b"), "[DONE]")
    completion, _, _ = run("openai", [raw[i:i + 512] for i in range(0, len(raw), 512)], max_event_bytes=1024)
    assert (completion.text, completion.error_class, completion.terminal) == ("ab", "too_large", True)


@settings(max_examples=100, deadline=None)
@given(dialect=st.sampled_from(["openai", "anthropic", "triton"]), streaming=st.booleans(),
       chunks=st.lists(st.one_of(st.binary(max_size=30), st.sampled_from(
           [b"data: ", b"\n\n", b"{", b'{"choices":[{"delta":{"content":1}}]}', b"event: error\n",
            b'{"type":"content_block_delta","delta":7}', b'{"outputs":[]}', b"\r", b'"error"'])),
                       max_size=10))
def test_random_bytes_never_raise(dialect: str, streaming: bool, chunks: list[bytes]) -> None:
    completion, counts, _ = run(dialect, chunks, streaming, max_event_bytes=256)
    assert completion.error_class in ("", *ERROR_CLASSES)
    assert sum(counts) == (completion.content_deltas if streaming else 0)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)


def loads_or_error(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return ValueError


@settings(max_examples=300, deadline=None)
@given(st.one_of(
    st.dictionaries(st.text(max_size=5), JSON_VALUES, max_size=4).map(json.dumps),
    st.builds(lambda v, tail: json.dumps(v) + tail,
              st.dictionaries(st.text(max_size=3), JSON_VALUES, max_size=2),
              st.sampled_from(["", " ", "\n\t", " x", "}", ",{}"])),
    st.text(max_size=20).map(lambda t: "{" + t),
    st.text(max_size=20),
))
def test_loads_event_matches_json_loads(text: str) -> None:
    expected = loads_or_error(text)
    if expected is ValueError:
        with pytest.raises(ValueError):
            loads_event(text)
    else:
        # compare serialisations: NaN (which JSON text may spell) is not equal to itself
        assert json.dumps(loads_event(text), sort_keys=True) == json.dumps(expected, sort_keys=True)


# ---- Anthropic and Triton errors ---------------------------------------------------------------------

@pytest.mark.parametrize("error_type, message, expected", [
    ("rate_limit_error", "Number of request tokens has exceeded your rate limit", "rate_limited"),
    ("overloaded_error", "Overloaded", "http_5xx"),
    ("api_error", "Internal server error", "http_5xx"),
    ("invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum", "context_length"),
    ("invalid_request_error", "messages: roles must alternate", "interrupted"),
])
def test_anthropic_error_event(error_type: str, message: str, expected: str) -> None:
    start = recorded("anthropic_messages").split(b"event: content_block_stop")[0]
    error = {"type": "error", "error": {"type": error_type, "message": message}}
    completion, _, _ = run("anthropic", [start, f"event: error\ndata: {json.dumps(error)}\n\n".encode()])
    assert (completion.error_class, completion.error_detail) == (expected, message)
    assert completion.text == "Hello! I'm Claude — happy to help." and not completion.terminal
    assert (completion.input_tokens, completion.output_tokens) == (472, None)   # no message_delta came


def test_anthropic_malformed_event() -> None:
    raw = (b'event: content_block_delta\n'
           b'data: {"type":"content_block_delta","delta":{"type":"text_delta","text":"ok"}}\n\n')
    completion, counts, _ = run("anthropic", [raw, b"event: content_block_delta\ndata: {nope\n\n"])
    assert counts == [1, 0] and completion.text == "ok" and completion.error_class == "malformed_stream"


@pytest.mark.parametrize("message, expected", [
    ("in ensemble 'ensemble', Executor failed", "interrupted"),
    ("in ensemble 'ensemble', input length (9000) exceeds max_input_len (8192)", "context_length"),
])
def test_triton_error_event(message: str, expected: str) -> None:
    raw = sse({"model_name": "ensemble", "text_output": " Hi"}, {"error": message})
    completion, counts, _ = run("triton", [raw])
    assert (completion.error_class, completion.error_detail, completion.terminal) == \
        (expected, message, False)
    assert completion.text == " Hi" and counts == [1]


def test_triton_empty_body_is_not_terminal() -> None:
    assert run("triton", [b""])[0].terminal is False


# ---- non-streaming bodies ------------------------------------------------------------------------

NON_STREAM = [
    ("openai", {"id": "chatcmpl-1", "object": "chat.completion", "choices": [{"index": 0, "message": {
        "role": "assistant", "content": "Paris.", "reasoning_content": "Capital of France?"},
        "finish_reason": "stop"}], "usage": {"prompt_tokens": 9, "completion_tokens": 4, "total_tokens": 13}},
     dict(text="Paris.", reasoning="Capital of France?", content_deltas=1, output_tokens=4, input_tokens=9,
          finish_reason="stop", terminal=True, error_class=""), {}),
    ("openai", {"choices": [{"message": {"content": ""}, "finish_reason": "length"}]},
     dict(text="", content_deltas=0, output_tokens=None, finish_reason="length", terminal=True), {}),
    ("anthropic", {"id": "msg_1", "type": "message", "role": "assistant", "content": [
        {"type": "thinking", "thinking": "Hmm.", "signature": "abc"}, {"type": "text", "text": "Hello"},
        {"type": "tool_use", "id": "t", "name": "f", "input": {}}, {"type": "text", "text": " there"}],
        "stop_reason": "max_tokens", "usage": {"input_tokens": 12, "output_tokens": 6}},
     dict(text="Hello there", reasoning="Hmm.", content_deltas=1, output_tokens=6, input_tokens=12,
          finish_reason="length", terminal=True, error_class=""), {}),
    ("anthropic", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
     dict(text="", terminal=False, error_class="http_5xx", error_detail="Overloaded"), {}),
    ("triton", {"model_name": "ensemble", "model_version": "1", "outputs": [
        {"name": "text_output", "datatype": "BYTES", "shape": [1], "data": ["Machine learning is"]}],
        "parameters": {"inference_time_ms": 41.5}},
     dict(text="Machine learning is", content_deltas=1, terminal=True, error_class=""),
     {"inference_time_ms": 41.5}),
    ("triton", {"model_name": "ensemble", "text_output": "flat", "inference_time_ms": 3},
     dict(text="flat", terminal=True), {"inference_time_ms": 3.0}),
    ("triton", {"error": "Request for unknown model: 'x' is not found"},
     dict(text="", terminal=False, error_class="interrupted"), {}),
]


@pytest.mark.parametrize("dialect, body, fields, timing", NON_STREAM)
def test_non_streaming_body(dialect: str, body: dict[str, Any], fields: dict[str, Any],
                            timing: dict[str, float]) -> None:
    raw = json.dumps(body, ensure_ascii=False).encode()
    completion, counts, parser = run(dialect, [raw[:10], raw[10:]], streaming=False)
    assert counts == [0, 0]
    assert {k: getattr(completion, k) for k in fields} == fields
    assert parser.server_timing == timing
    assert parser.finish() is completion   # idempotent


@pytest.mark.parametrize("dialect", ["openai", "anthropic", "triton"])
@pytest.mark.parametrize("body", [b"", b"<html>502 Bad Gateway</html>", b"[1, 2]", b'{"choices": []}',
                                  b'{"outputs": [{}]}'])
def test_non_streaming_garbage_is_malformed(dialect: str, body: bytes) -> None:
    completion, _, _ = run(dialect, [body], streaming=False)
    assert (completion.error_class, completion.terminal) == ("malformed_stream", False)


def test_non_streaming_body_over_the_limit_is_too_large() -> None:
    completion, _, _ = run("openai", [b"{" + b" " * 600, b"}"], streaming=False, max_event_bytes=512)
    assert (completion.error_class, completion.terminal) == ("too_large", False)


# ---- build() ----------------------------------------------------------------------------------------

CHAT = Item("q1",
            ({"role": "system", "content": "Be brief."}, {"role": "user", "content": "Capital of France?"}),
            max_tokens=64)
SOLO = Item("q2", ({"role": "user", "content": "Hi"},))
OPTS = RequestOptions(model="m")

BUILD = [
    ("openai", CHAT, OPTS, "/v1/chat/completions",
     {"model": "m", "messages": list(CHAT.messages), "stream": True, "max_tokens": 64,
      "stream_options": {"include_usage": True}}, {}),
    ("openai", SOLO, dataclasses.replace(OPTS, stream=False, temperature=0.0, ignore_eos=True, max_tokens=8),
     "/v1/chat/completions",
     {"model": "m", "messages": [{"role": "user", "content": "Hi"}], "stream": False, "max_tokens": 8,
      "ignore_eos": True, "temperature": 0.0}, {}),
    ("openai", SOLO, dataclasses.replace(OPTS, include_usage=False, extra_body={"top_p": 0.9, "stream": True},
                                         extra_headers={"Authorization": "Bearer k"}),
     "/v1/chat/completions",
     {"model": "m", "messages": [{"role": "user", "content": "Hi"}], "stream": True, "top_p": 0.9},
     {"Authorization": "Bearer k"}),
    ("anthropic", CHAT, OPTS, "/v1/messages",
     {"model": "m", "system": "Be brief.", "messages": [{"role": "user", "content": "Capital of France?"}],
      "max_tokens": 64, "stream": True}, {"anthropic-version": "2023-06-01"}),
    ("anthropic", SOLO, dataclasses.replace(OPTS, stream=False, temperature=0.5, ignore_eos=True,
                                            extra_headers={"x-api-key": "k"}), "/v1/messages",
     {"model": "m", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1024, "stream": False,
      "temperature": 0.5}, {"anthropic-version": "2023-06-01", "x-api-key": "k"}),
    ("triton", SOLO, dataclasses.replace(OPTS, model="ensemble"), "/v2/models/ensemble/generate_stream",
     {"text_input": "Hi", "max_tokens": 1024, "stream": True}, {}),
    ("triton", CHAT, dataclasses.replace(OPTS, model="llama 3", temperature=0.2, extra_body={"top_k": 1}),
     "/v2/models/llama%203/generate_stream",
     {"text_input": "system: Be brief.\nuser: Capital of France?", "max_tokens": 64, "stream": True,
      "temperature": 0.2, "top_k": 1}, {}),
    ("triton", SOLO, dataclasses.replace(OPTS, model="ensemble", stream=False, max_tokens=16),
     "/v2/models/ensemble/infer",
     {"inputs": [{"name": "text_input", "datatype": "BYTES", "shape": [1], "data": ["Hi"]},
                 {"name": "max_tokens", "datatype": "INT32", "shape": [1], "data": [16]}]}, {}),
]


@pytest.mark.parametrize("dialect, item, options, path, body, headers", BUILD)
def test_build(dialect: str, item: Item, options: RequestOptions, path: str, body: dict[str, Any],
               headers: dict[str, str]) -> None:
    request = get_dialect(dialect).build(item, options)
    assert (request.method, request.path, request.json, request.headers, request.stream) == (
        "POST", path, body, headers, options.stream)


def test_build_does_not_share_item_messages() -> None:
    request = get_dialect("openai").build(CHAT, OPTS)
    assert request.json is not None
    request.json["messages"][0]["content"] = "changed"
    assert CHAT.messages[0]["content"] == "Be brief."


# ---- registry ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, canonical",
                         [("openai", "openai"), ("openai_chat", "openai"), ("OpenAI-Chat", "openai"),
                          ("anthropic_messages", "anthropic"), ("kserve", "triton")])
def test_get_dialect(name: str, canonical: str) -> None:
    assert get_dialect(name).name == canonical and get_dialect(name) is DIALECTS[canonical]


def test_unknown_dialect_lists_the_valid_names() -> None:
    with pytest.raises(UnknownDialect) as info:
        get_dialect("gemini")
    assert isinstance(info.value, ValueError)
    assert "'gemini'" in str(info.value) \
        and all(name in str(info.value) for name in ("openai", "anthropic", "triton"))


# ---- the whole-body fast path (JsonEventParser.feed_chunks) ----------------------------------------

def both_paths(dialect: str, chunks: list[bytes], **kwargs: Any) -> tuple[Any, Any, bool, Any]:
    """(slow completion + counts, fast completion + counts, whether the fast path was taken, the
    fast path's parser)."""
    slow_completion, slow_counts, _ = run(dialect, chunks, **kwargs)
    parser = get_dialect(dialect).parser(True, **kwargs)
    counts = parser.feed_chunks(chunks)
    taken = counts is not None
    if counts is None:
        counts = [parser.feed(chunk) for chunk in chunks]
    return (slow_completion, slow_counts), (parser.finish(), counts), taken, parser


OPENAI_RECORDED = [name for name, (dialect, _, _) in EXPECTED.items() if dialect == "openai"]


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(OPENAI_RECORDED), data=st.data())
def test_fast_path_equals_event_by_event_on_recorded_streams(name: str, data: st.DataObject) -> None:
    raw = recorded(name)
    cuts = sorted(set(data.draw(st.lists(st.integers(1, len(raw) - 1), max_size=40))))
    points = [0, *cuts, len(raw)]
    chunks = [raw[a:b] for a, b in pairwise(points)]
    slow, fast, taken, parser = both_paths("openai", chunks)
    assert taken                     # recorded vLLM / llama.cpp / TGI streams are all plain
    assert fast == slow
    check(name, *fast, parser)


def test_fast_path_credits_each_delta_to_the_chunk_with_its_blank_line() -> None:
    raw = sse(chunk("a"), chunk("b"), chunk("c", finish="stop"), "[DONE]")
    first_end = raw.index(b"\n\n")
    # chunk 0 ends one byte before event 1's blank line is complete: event 1 completes in chunk 1
    chunks = [raw[:first_end + 1], raw[first_end + 1:first_end + 2], raw[first_end + 2:]]
    slow, fast, taken, _ = both_paths("openai", chunks)
    assert taken and fast == slow and fast[1] == [0, 1, 2]


@pytest.mark.parametrize("raw", [
    sse(chunk("a"), '{"choices": [', chunk("b"), "[DONE]"),              # malformed JSON
    sse(chunk("a"), "not json", chunk("b"), "[DONE]"),                   # not JSON at all
    sse(chunk("a"), '{"a": 1}, {"b": 2}', chunk("b"), "[DONE]"),         # two values in one event
    sse(chunk("a"), chunk("b")) + b"data: [DONE]",                       # torn last event
    b": ping\n\n" + sse(chunk("a"), "[DONE]"),                           # comment
    sse(chunk("a"), "[DONE]", sep="\r\n\r\n"),                           # CRLF
    b"\xef\xbb\xbf" + sse(chunk("a"), "[DONE]"),                         # BOM
    b'data: {"choices":[{"delta":{"content":"a\xffb"}}]}\n\ndata: [DONE]\n\n',   # invalid UTF-8
    sse(chunk("a"), chunk("x" * 5000), chunk("b"), "[DONE]"),            # oversized event
    b"event: message\n" + sse(chunk("a"), "[DONE]"),                     # an event: line
    sse(chunk("a")) + b"\n\n" + sse("[DONE]"),                           # an empty block
])
def test_fast_path_declines_or_matches_on_unusual_bodies(raw: bytes) -> None:
    chunks = [raw[i:i + 40] for i in range(0, len(raw), 40)]
    slow, fast, _, _ = both_paths("openai", chunks, max_event_bytes=1024)
    assert fast == slow


def test_fast_path_keeps_unexpected_shapes_as_malformed() -> None:
    raw = sse(chunk("a"), {"choices": [{"delta": 5}]}, {"choices": "x"}, chunk("b"), "[DONE]")
    slow, fast, taken, _ = both_paths("openai", [raw[:60], raw[60:]])
    assert taken and fast == slow
    assert fast[0].error_class == "malformed_stream" and fast[0].text == "ab"


@settings(max_examples=150, deadline=None)
@given(parts=st.lists(st.one_of(
    st.sampled_from([b"data: ", b"data:", b"\n\n", b"\n", b"{", b"}", b"[DONE]", b'"x"', b",", b" ",
                     b'{"choices":[{"delta":{"content":"t"}}]}', b'{"usage":{"completion_tokens":3}}',
                     b'{"choices":[{"delta":{"content":1}}]}', b'{"error":{"message":"boom"}}']),
    st.binary(max_size=6)), max_size=24), cut=st.integers(1, 7))
def test_fast_path_never_differs_from_event_by_event(parts: list[bytes], cut: int) -> None:
    raw = b"".join(parts)
    chunks = [raw[i:i + cut] for i in range(0, len(raw), cut)]
    slow, fast, _, _ = both_paths("openai", chunks, max_event_bytes=256)
    assert fast == slow


def vllm_event(content: Any, **extra: Any) -> str:
    """One vLLM-shaped chunk, serialised the way vLLM does (compact, raw UTF-8)."""
    body = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [{"index": 0, "delta": {"content": content}, "logprobs": None, "finish_reason": None}]}
    body.update(extra)
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False)


@pytest.mark.parametrize("contents", [
    ["a", " b", "", "c"],
    ["caf\u00e9", " \u201cquoted\u201d", "\U0001F600", "tab\there"],          # raw UTF-8 and an escape
    ['say "hi"', "back\\slash", "line\nbreak", "\u0000nul"],                # escapes in every event
    ["a", None, "b"],                                                       # a null content
    ["a", 7, "b"],                                                          # a number: not a content delta
])
def test_template_fast_path_matches_event_by_event(contents: list[Any]) -> None:
    events = [vllm_event(c) for c in contents]
    events.insert(2, '{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m",'
                     '"choices":[{"index":0,"delta":{"content":"x","content":"dup"},'
                     '"logprobs":null,"finish_reason":null}]}')
    events += [vllm_event("", usage={"completion_tokens": 5}), vllm_event("z", id="other"), "[DONE]"]
    # vLLM's role chunk
    events.insert(0, vllm_event("").replace('{"content"', '{"role":"assistant","content"'))
    raw = "".join(f"data: {e}\n\n" for e in events).encode()
    chunks = [raw[i:i + 97] for i in range(0, len(raw), 97)]
    slow, fast, taken, parser = both_paths("openai", chunks)
    assert fast == slow
    assert taken and parser._template is not None     # the template was found and used
    # every content delta whose JSON string has no escape skipped the JSON parse
    assert parser._template_hits == sum(1 for c in contents
                                        if isinstance(c, str)
                                        and "\\" not in json.dumps(c, ensure_ascii=False))


def test_content_template_is_proven_not_assumed() -> None:
    from fourfold.client.dialects.openai_chat import content_template

    plain = vllm_event(" tok").encode()
    prefix, suffix = content_template(plain)
    assert plain == prefix + b'" tok"' + suffix
    # anything else the parser reads in the template event rules the template out
    assert content_template(vllm_event(" tok", usage={"completion_tokens": 1}).encode()) is None
    assert content_template(plain.replace(b'"finish_reason":null', b'"finish_reason":"stop"')) is None
    assert content_template(plain.replace(b'{"content"', b'{"reasoning_content":"r","content"')) is None
    # a second "content" key wins in JSON: the first one is not the template's slot
    assert content_template(plain.replace(b'{"content":" tok"', b'{"content":" tok","content":"x"')) is None


@pytest.mark.parametrize("dialect", ["openai", "anthropic", "triton"])
@pytest.mark.parametrize("depth", [100_000])
def test_a_deeply_nested_event_is_malformed_data_not_a_crash(dialect, depth):
    """``[`` x 100,000 in a ``data:`` line raised RecursionError out of the parser (the request was
    then labelled cancelled and reached no statistic); it is a malformed event like any other."""
    parser = get_dialect(dialect).parser(True)
    parser.feed(b"data: " + b"[" * depth + b"\n\n")
    parser.feed(b"data: {" + b'"a":[' * depth + b"\n\n")
    completion = parser.finish()
    assert parser.malformed_events == 2
    assert completion.error_class == "malformed_stream" and "[[[" in completion.error_detail


# ---- reasoning and prefix-cache counts in the usage ------------------------------------------------

def test_anthropic_prompt_counts_the_cache_and_reads_its_hits() -> None:
    start = {"type": "message_start", "message": {"usage": {
        "input_tokens": 10, "cache_read_input_tokens": 500, "cache_creation_input_tokens": 20,
        "output_tokens": 1}}}
    body = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in (
        start, {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2}},
        {"type": "message_stop"})).encode()
    completion, _, _ = run("anthropic", [body])
    assert (completion.input_tokens, completion.cached_tokens, completion.output_tokens) == (530, 500, 2)


@pytest.mark.parametrize(("usage", "reasoning", "cached"), [
    ({"completion_tokens_details": {"reasoning_tokens": 2},
      "prompt_tokens_details": {"cached_tokens": 8}}, 2, 8),
    ({"completion_tokens_details": {"reasoning_tokens": 9}}, None, None),          # more than the output
    ({"completion_tokens_details": {"reasoning_tokens": -1}}, None, None),
    ({"completion_tokens_details": {"reasoning_tokens": "2"}}, None, None),
    ({"prompt_tokens_details": {"cached_tokens": 11}}, None, None),                # more than the prompt
    ({"prompt_tokens_details": None, "prompt_cache_hit_tokens": 6}, None, 6),      # DeepSeek's spelling
    ({"prompt_tokens_details": {"cached_tokens": 0}}, None, 0),
])
def test_reasoning_and_cached_counts_are_believed_only_when_plausible(usage: dict[str, Any],
                                                                     reasoning: int | None,
                                                                     cached: int | None) -> None:
    body = sse(chunk(reasoning_content="think"), chunk("a"), chunk("b", finish="stop"),
               {"choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 3, **usage}}, "[DONE]")
    completion, _, _ = run("openai", [body])
    assert (completion.reasoning_tokens, completion.cached_tokens, completion.output_tokens) == \
        (reasoning, cached, 3)
    assert (completion.first_answer_delta, completion.reasoning_deltas) == (1, 1)


@settings(max_examples=40, deadline=None)
@given(reasoning=st.sampled_from([0, 1, 3, 40]), data=st.data())
def test_the_first_answer_delta_is_the_same_on_the_template_path(reasoning: int, data: st.DataObject) -> None:
    """Reasoning deltas, then plain content deltas that the fast path reads by the stream's template
    (no JSON parse): the first answer delta is found the same on both paths, in any split."""
    raw = sse(chunk(role="assistant", content=""),
              *(chunk(reasoning_content=f"r{i}") for i in range(reasoning)),
              *(chunk(f"t{i}") for i in range(10)), chunk(finish="stop"), "[DONE]")
    cuts = sorted(set(data.draw(st.lists(st.integers(1, len(raw) - 1), max_size=12))))
    chunks = [raw[a:b] for a, b in pairwise([0, *cuts, len(raw)])]
    slow, fast, taken, parser = both_paths("openai", chunks)
    assert fast == slow and fast[0].first_answer_delta == reasoning
    if len(chunks) > 1:
        assert taken and parser._template_hits >= 8              # the answer deltas read by the template

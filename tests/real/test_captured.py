"""The captured files in tests/recorded/ still show what the real server sends: its *shape*, not its words.

Greedy decoding is not reproducible across CPUs (another SIMD path sums the logits in another order:
on an AMD EPYC the stop capture's "...la Marseillaise. Paris is..." became "...la Cité, le Poulet..."
and ran to ``max_tokens``). So a fresh capture is held to what the dialect reads and nothing the
model chooses: the framing and separators, the event sequence (role chunk, content chunks, an
empty-delta finish chunk, ``[DONE]``), one token per content chunk, the finish reason present and
consistent with the token count, usage absent from the stream (``include_usage`` ignored) and present
in the JSON body, the prompt's token count (the tokenizer is deterministic). The stored files keep
their exact bytes for the unit tests (tests/unit/test_dialects.py).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from fourfold.client.dialects import get_dialect
from tests.real.capture import REQUESTS, capture_all

pytestmark = [pytest.mark.real, pytest.mark.integration]

RECORDED = Path(__file__).resolve().parents[1] / "recorded"
_VOLATILE = re.compile(rb'("id": ?"chatcmpl-)[0-9a-f-]+(")|("created": ?)\d+')
# a JSON string value of "content" (escapes included): the words the model chose
_CONTENT = re.compile(rb'("content": ?)"(?:[^"\\]|\\.)*"')
# a finish reason the model's words decide (stop before max_tokens or not); null stays null
_FINISH = re.compile(rb'("finish_reason": ?)"[a-z_]+"')
# sse-starlette's keep-alive comment (": ping - <time>"), sent when an answer takes over 15 s (a
# loaded machine): no event, the dialect skips it
_COMMENT = re.compile(rb"(?m)^:[^\r\n]*(?:\r\n|\r|\n)(?:\r\n|\r|\n)")


def skeleton(raw: bytes) -> list[bytes]:
    """The stream's events with ids, times and words blanked, runs of equal events kept once.

    What is left is every byte the server's framing decides: ``data: `` prefixes, separators, key
    order, the role chunk, the finish chunk, ``[DONE]``, the blank lines between events.
    """
    raw = _COMMENT.sub(b"", raw)
    raw = _VOLATILE.sub(lambda m: m.group(1) + b"X" + m.group(2) if m.group(1) else m.group(3) + b"0", raw)
    raw = _FINISH.sub(rb'\1"..."', _CONTENT.sub(rb'\1"..."', raw))
    events = raw.split(b"\n\n")
    return [e for i, e in enumerate(events) if i == 0 or e != events[i - 1]]


def json_shape(value):
    """Keys and value types of a JSON document, with its strings and numbers blanked."""
    if isinstance(value, dict):
        return {k: json_shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [json_shape(v) for v in value]
    return type(value).__name__


def parsed(raw: bytes, streaming: bool):
    parser = get_dialect("openai").parser(streaming)
    parser.feed(raw)
    return parser.finish()


def content_events(raw: bytes) -> list[dict]:
    out = []
    for line in raw.splitlines():
        if line.startswith(b"data: {"):
            delta = json.loads(line[6:])["choices"][0]["delta"]
            if "content" in delta:
                out.append(delta)
    return out


@pytest.fixture(scope="module")
def fresh(llama):
    return capture_all(llama.url)


@pytest.mark.parametrize("name", ["llamacpp_captured_stop.sse", "llamacpp_captured_length.sse"])
def test_fresh_stream_has_the_stored_shape(fresh, name):
    stored = (RECORDED / name).read_bytes()
    assert skeleton(fresh[name]) == skeleton(stored)
    assert b'"usage"' not in fresh[name] and b"timings" not in fresh[name]   # include_usage is ignored

    max_tokens = REQUESTS[name.removesuffix(".sse")]["max_tokens"]
    now, then = parsed(fresh[name], True), parsed(stored, True)
    assert (now.terminal, now.error_class, now.input_tokens) == (then.terminal, then.error_class,
                                                                 then.input_tokens)
    events = content_events(fresh[name])
    assert now.text == "".join(e["content"] for e in events) and now.text.strip()
    assert len(events) == now.content_deltas            # each chunk read as one delta
    # the finish reason is there, and no more chunks than tokens: at most one token a chunk (a token
    # that ends inside a UTF-8 character may send nothing; the JSON test counts tokens exactly)
    assert now.finish_reason in ("stop", "length")
    assert len(events) <= max_tokens if now.finish_reason == "length" else len(events) < max_tokens
    if then.finish_reason == "length":   # a story cut at 12 tokens stays cut on any CPU
        assert now.finish_reason == "length"


@pytest.mark.parametrize("name", ["llamacpp_captured_stop.json", "llamacpp_captured_length.json"])
def test_fresh_body_has_the_stored_shape(fresh, name):
    stored = (RECORDED / name).read_bytes()
    now_doc, then_doc = json.loads(fresh[name]), json.loads(stored)
    assert json_shape(now_doc) == json_shape(then_doc)
    assert b", " not in _CONTENT.sub(b'""', fresh[name])   # compact separators, as stored

    max_tokens = REQUESTS[name.removesuffix(".json")]["max_tokens"]
    now, usage = parsed(fresh[name], False), now_doc["usage"]
    assert usage["prompt_tokens"] == then_doc["usage"]["prompt_tokens"] == now.input_tokens
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert now.output_tokens == usage["completion_tokens"] and now.text.strip()
    assert now.finish_reason in ("stop", "length")
    assert (usage["completion_tokens"] == max_tokens) == (now.finish_reason == "length")
    if then_doc["choices"][0]["finish_reason"] == "length":
        assert now.finish_reason == "length"

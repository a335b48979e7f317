"""The captured files in tests/recorded/ still show what the real server sends.

Ids and ``created`` differ per response; everything else the dialect reads (the event shapes, the
text at temperature 0, the finish reason, usage present or absent) must match the stored capture,
and the fresh bytes must parse to the same Completion as the stored ones.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from fourfold.measure.dialects import get_dialect
from tests.real.capture import capture_all

pytestmark = [pytest.mark.real, pytest.mark.integration]

RECORDED = Path(__file__).resolve().parents[1] / "recorded"
_VOLATILE = re.compile(rb'("id": ?"chatcmpl-)[0-9a-f-]+(")|("created": ?)\d+')


# sse-starlette's keep-alive comment (": ping - <time>"), sent when an answer takes over 15 s (a
# loaded machine): no event, the dialect skips it
_COMMENT = re.compile(rb"(?m)^:[^\r\n]*(?:\r\n|\r|\n)(?:\r\n|\r|\n)")


def normalised(raw: bytes) -> bytes:
    raw = _COMMENT.sub(b"", raw)
    return _VOLATILE.sub(lambda m: m.group(1) + b"X" + m.group(2) if m.group(1) else m.group(3) + b"0", raw)


def parsed(raw: bytes, streaming: bool) -> dict:
    parser = get_dialect("openai").parser(streaming)
    parser.feed(raw)
    c = parser.finish()
    return dict(text=c.text, deltas=c.content_deltas, out=c.output_tokens, inp=c.input_tokens,
                finish=c.finish_reason, terminal=c.terminal, error=c.error_class)


@pytest.fixture(scope="module")
def fresh(llama):
    return capture_all(llama.url)


@pytest.mark.parametrize("name", ["llamacpp_captured_stop.sse", "llamacpp_captured_length.sse",
                                  "llamacpp_captured_stop.json", "llamacpp_captured_length.json"])
def test_fresh_capture_matches_the_stored_one(fresh, name):
    stored = (RECORDED / name).read_bytes()
    streaming = name.endswith(".sse")
    assert parsed(fresh[name], streaming) == parsed(stored, streaming)
    if streaming:
        assert b'"usage"' not in fresh[name] and b"timings" not in fresh[name]   # include_usage is ignored
        assert normalised(fresh[name]) == normalised(stored)
    else:
        assert json.loads(normalised(fresh[name])) == json.loads(normalised(stored))

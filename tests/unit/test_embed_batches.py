"""Embeddings and rerank without sockets: the dialects' requests and parsers (good bodies, wrong
shapes, error bodies, non-JSON: data, never an exception), the count check, the embed block and
its registration, the batch ladder's option, and the simulator's pure answers and delays."""

from __future__ import annotations

import json
import math

import pytest

from fourfold.client.dialects.base import RequestOptions
from fourfold.client.dialects.embeddings import EmbedDialect
from fourfold.errors import OptionError, ProfileError
from fourfold.levels.declare import GROUPS, add_options, declared, read_options
from fourfold.levels.embed_batches import EmbedOptions, parse_batches
from fourfold.measure.embedstats import EmbedStats, count_mismatch
from fourfold.measure.metric_names import METRICS, in_block
from fourfold.measure.record import RequestRecord
from fourfold.targets.sim import wire_embed
from fourfold.targets.sim.profile import load_profile
from fourfold.workloads.items import Item
from tests.unit.test_declare import SETTINGS, parser_with_every_option


def parse(kind: str, body: object, split: int = 7):
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    parser = EmbedDialect(kind).parser(False)
    assert sum(parser.feed(raw[i:i + split]) for i in range(0, len(raw), split)) == 0   # no deltas, no TTFT
    return parser.finish()


def embedding_body(n: int, dims: int = 3) -> dict:
    return {"object": "list", "data": [{"object": "embedding", "index": i, "embedding": [0.5] * dims}
                                       for i in range(n)], "usage": {"prompt_tokens": 11, "total_tokens": 11}}


def test_requests_in_each_shape():
    item = Item("a", ({"role": "user", "content": "hi"},),
                meta={"inputs": ["x", "y"], "query": "q", "documents": ["d1", "d2"]})
    options = RequestOptions(model="m")
    embed = EmbedDialect("embeddings").build(item, options)
    assert (embed.method, embed.path, embed.stream) == ("POST", "/v1/embeddings", False)
    assert embed.json == {"model": "m", "input": ["x", "y"]}
    rerank = EmbedDialect("rerank").build(item, options)
    assert rerank.path == "/v1/rerank"
    assert rerank.json == {"model": "m", "query": "q", "documents": ["d1", "d2"]}
    assert EmbedDialect("rerank-cohere").build(item, options).path == "/v2/rerank"
    assert EmbedDialect("rerank", "/api/rerank").build(item, options).path == "/api/rerank"
    plain = Item("b", ({"role": "user", "content": "hello"},))
    assert EmbedDialect("embeddings").build(plain, options).json["input"] == ["hello"]
    with pytest.raises(ValueError, match="unknown embeddings kind"):
        EmbedDialect("sparse")


def test_a_good_embeddings_body():
    done = parse("embeddings", embedding_body(4))
    assert (done.error_class, done.terminal, done.content_deltas) == ("", True, 0)
    assert done.input_tokens == 11 and done.extra == {"outputs": 4, "dims": 3} and done.output_tokens == 0


@pytest.mark.parametrize("body, why", [
    (b"<html>oops</html>", "not JSON"),
    (b"", "not JSON"),
    ([1, 2], "not a JSON object"),
    ({"error": {"message": "model not loaded"}}, "model not loaded"),
    ({"object": "list"}, "no list of embeddings"),
    ({"data": [{"index": 0, "embedding": [1.0, "x"]}]}, "finite numbers"),
    ({"data": [{"index": 0, "embedding": []}]}, "finite numbers"),
    ({"data": [{"index": 0, "embedding": [1.0]}, {"index": 1, "embedding": [1.0, 2.0]}]},
     "different lengths"),
    ({"data": [{"index": 0, "embedding": [1.0]}, {"index": 0, "embedding": [2.0]}]}, "indexes"),
])
def test_bad_embeddings_bodies_are_malformed_with_the_reason(body, why):
    done = parse("embeddings", body)
    assert done.error_class == "malformed_stream" and why in done.error_detail


def test_a_nan_in_a_vector_and_an_implausible_usage():
    raw = b'{"data": [{"index": 0, "embedding": [NaN]}]}'
    assert parse("embeddings", raw).error_class == "malformed_stream"
    body = embedding_body(1)
    body["usage"] = {"prompt_tokens": -3}
    assert parse("embeddings", body).input_tokens is None


def test_rerank_bodies_in_vllm_jina_and_cohere_shapes():
    vllm = {"id": "x", "model": "m", "usage": {"total_tokens": 30},
            "results": [{"index": 1, "document": {"text": "b"}, "relevance_score": 0.9},
                        {"index": 0, "document": {"text": "a"}, "relevance_score": 0.1}]}
    done = parse("rerank", vllm)
    assert done.error_class == "" and done.input_tokens == 30 and done.extra == {"outputs": 2, "max_index": 1}
    cohere = {"id": "x", "results": [{"index": 0, "relevance_score": 0.3}],
              "meta": {"billed_units": {"search_units": 1}}}
    done = parse("rerank-cohere", cohere)
    assert done.error_class == "" and done.input_tokens is None and done.extra["outputs"] == 1
    bad = parse("rerank", {"results": [{"index": "0", "relevance_score": 0.3}]})
    assert bad.error_class == "malformed_stream" and "integer 'index'" in bad.error_detail
    assert parse("rerank", {"results": {}}).error_class == "malformed_stream"


def _record(sent: int, **extra) -> RequestRecord:
    return RequestRecord(level="embed", scenario=f"embeddings@b{sent}", extra={"inputs": sent, "batch": sent,
                                                                               **extra})


def test_a_wrong_count_is_named():
    assert count_mismatch(_record(8, outputs=8)) == ""
    assert count_mismatch(_record(8, outputs=7)) == "sent 8 inputs, the response held 7 vectors (expected 8)"
    assert "7 results" in count_mismatch(_record(8, outputs=7, max_index=6))
    assert count_mismatch(_record(8, outputs=3, max_index=2), top_n=3) == ""
    assert count_mismatch(_record(2, outputs=2, max_index=5)) == "a result names document 5 of the 2 sent"
    assert count_mismatch(RequestRecord()) == ""         # a failed request: nothing came back to count


def _block() -> dict:
    stats = EmbedStats()
    for i in range(4):
        stats.add(RequestRecord(level="embed", scenario="embeddings@b8", started_at=100.0 + i, e2e_ms=500.0,
                                input_tokens=40, error_class="ok", extra={"inputs": 8, "batch": 8}))
    stats.add(RequestRecord(level="embed", scenario="embeddings@b8", started_at=101.0, e2e_ms=20.0,
                            error_class="http_5xx", extra={"inputs": 8, "batch": 8}))
    stats.add(RequestRecord(level="embed", scenario="embeddings@b1", warmup=True, extra={"inputs": 1}))
    return stats.summary()


def test_the_embed_block_per_batch_size():
    block = _block()
    assert list(block) == ["embeddings@b8"]                        # the warm-up is in no figure
    b8 = block["embeddings@b8"]
    assert (b8["batch"], b8["requests"], b8["ok"]) == (8, 5, 4)
    assert (b8["inputs_total"], b8["input_tokens_total"]) == (32, 160)
    assert b8["wall_s"] == pytest.approx(3.5) and b8["inputs_per_request"] == 8
    assert b8["request_rps"] == pytest.approx(5 / 3.5) and b8["inputs_per_s"] == pytest.approx(32 / 3.5)
    assert b8["input_tokens_per_s"] == pytest.approx(160 / 3.5)


def test_every_number_of_the_embed_block_is_a_registered_metric_of_it():
    registered = {m.name for m in METRICS if "embed" in m.where}
    found, unknown = in_block(_block()["embeddings@b8"], "embed")
    assert unknown == [] and {m.name for m in found.values()} == registered


def test_the_batch_ladder_option():
    assert parse_batches("1, 8,32") == (1, 8, 32) and EmbedOptions().batches == (1, 8, 32)
    for bad in ("", "0", "8,x", "1,5000"):
        with pytest.raises(OptionError, match="--embed-batch"):
            parse_batches(bad)
    assert EmbedOptions(embed_kind="rerank").dialect("/openai/v1").path == "/openai/v1/rerank"
    assert EmbedOptions(embed_path="/embed").dialect("/x").path == "/embed"
    with pytest.raises(OptionError, match="--embed-step-s"):
        EmbedOptions(embed_step_s=-1)


def test_the_simulator_s_vectors_scores_and_delay():
    profile = load_profile("flat", {"embed_dims": 8})
    vector = wire_embed.unit_vector("the cat", 8)
    assert vector == wire_embed.unit_vector("the cat", 8) != wire_embed.unit_vector("the dog", 8)
    assert math.isclose(sum(x * x for x in vector), 1.0, abs_tol=1e-4)
    answer = wire_embed.answer("embeddings", b'{"input": ["a b", "c"]}', profile, "r")
    assert (answer.inputs, answer.tokens) == (2, 3)
    assert wire_embed.delay_ms(profile, 8, 1000) == 5.0 + 8 * 1.0 + 20.0
    body = b'{"query": "red fox", "documents": ["blue", "a red fox"]}'
    ranked = wire_embed.answer("rerank", body, profile, "r")
    assert [r["index"] for r in ranked.body["results"]] == [1, 0]
    with pytest.raises(wire_embed.EmbedRequestError, match="not JSON"):
        wire_embed.answer("embeddings", b"{", profile, "r")
    for bad in ({"embed_dims": 0}, {"embed_ms": -1}, {"embed_ms_per_input": 1e300}):
        with pytest.raises(ProfileError, match="embed"):
            load_profile("flat", bad)


def test_per_token_vectors_of_a_server_without_pooling():
    body = {"data": [{"object": "embedding", "index": 0, "embedding": [[0.1, 0.2], [0.3, 0.4]]},
                     {"object": "embedding", "index": 1, "embedding": [[0.5, 0.6]]}],
            "usage": {"prompt_tokens": 3}}
    done = parse("embeddings", body)           # llama-cpp-python's server with SmolLM2 (no pooling)
    assert done.error_class == "" and done.extra == {"outputs": 2, "dims": 2, "per_token": True}
    body["data"][1]["embedding"] = [[0.5, 0.6, 0.7]]
    assert "different lengths" in parse("embeddings", body).error_detail
    body["data"][1]["embedding"] = [0.5, 0.6]
    assert "pooled and some per token" in parse("embeddings", body).error_detail
    body["data"][1]["embedding"] = [[0.5, None]]
    assert "finite numbers" in parse("embeddings", body).error_detail


def test_the_options_are_declared_once_with_unique_flags_and_parse_to_the_defaults():
    parser = parser_with_every_option()
    add_options(parser, EmbedOptions)
    flags = [opt.flag for cls in (*SETTINGS, EmbedOptions) for _, opt in declared(cls)]
    assert len(flags) == len(set(flags)) and {opt.group for _, opt in declared(EmbedOptions)} == {"embed"}
    assert "embed" in GROUPS
    assert EmbedOptions(**read_options(EmbedOptions, parser.parse_args([]))) == EmbedOptions()
    given = EmbedOptions(**read_options(EmbedOptions, parser.parse_args(
        ["--embed-kind", "rerank-cohere", "--embed-batch", "2,4", "--embed-step-s", "3"])))
    assert (given.embed_kind, given.batches, given.embed_step_s) == ("rerank-cohere", (2, 4), 3.0)
    assert {"embed_kind", "embed_batch"} <= set(parser.args_included_in_web_ui)

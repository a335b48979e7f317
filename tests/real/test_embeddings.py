"""locustfiles/embeddings.py against llama.cpp's /v1/embeddings (llama-cpp-python's server, SmolLM2-135M
loaded with ``embedding=True``; docs/embeddings.md).

What this server really does: SmolLM2 is a causal model without pooling, and llama-cpp-python 0.3's
server sends each input's vectors *one per token* (``"embedding": [[...576 numbers], ...]``), not one
pooled vector; the dialect reads that shape (``extra["per_token"]``) and counts one embedding per
input. ``usage.prompt_tokens`` is the batch's tokens; requests are served one at a time (one lock)."""

from __future__ import annotations

import pytest

from tests.real.conftest import start_llama_server, stop
from tests.real.harness import assert_every_request_classified, run_real

pytestmark = [pytest.mark.real, pytest.mark.integration]


@pytest.fixture(scope="module")
def llama_embed(tmp_path_factory):
    server = start_llama_server(tmp_path_factory.mktemp("llama-embed"), embedding=True)
    yield server
    stop(server.process)


def test_embeddings_by_batch_size_against_llama_cpp(llama_embed, tmp_path):
    run = run_real(llama_embed, tmp_path, "embeddings.py", users=1, seconds=6,
                   extra=["--embed-batch", "1,4", "--warmup-requests", "1"])
    assert run.rc == 0, run.output[-3000:]
    assert_every_request_classified(run, {"ok", "cancelled"}, path="/v1/embeddings")
    measured = [r for r in run.records if not r["warmup"] and r["error_class"] == "ok"]
    assert {r["scenario"] for r in measured} == {"embeddings@b1", "embeddings@b4"}
    for r in measured:
        batch = int(r["scenario"].rsplit("@b", 1)[1])
        assert r["extra"]["inputs"] == r["extra"]["outputs"] == batch
        assert r["extra"]["per_token"] is True and r["extra"]["dims"] == 576      # SmolLM2's hidden size
        assert r["input_tokens"] >= batch and r["ttft_ms"] is None
    block = run.summary["embed"]
    assert block["embeddings@b4"]["inputs_per_request"] == 4
    assert block["embeddings@b4"]["input_tokens_per_s"] > block["embeddings@b1"]["input_tokens_per_s"]
    groups = {g["scenario"]: g for g in run.summary["groups"]}
    assert groups["embeddings@b4"]["e2e_ms"]["p50"] > groups["embeddings@b1"]["e2e_ms"]["p50"]

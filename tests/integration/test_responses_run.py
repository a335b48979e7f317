"""``--dialect responses``: a headless L1 run over the Responses API against the embedded simulator
(``POST /v1/responses``, typed events), reasoning and all: the same records as chat."""

from __future__ import annotations

import json

import pytest

from tests.conftest import only_run_dir, read_jsonl, run_locust

pytestmark = pytest.mark.integration


def test_an_l1_run_over_the_responses_api_times_the_answer_apart_from_the_reasoning(tmp_path, locustfile):
    proc = run_locust(["-f", locustfile("l1_throughput.py"), "--headless", "-u", "4", "-r", "4", "-t", "5s",
                       "--dialect", "responses", "--sim-profile", "thinking", "--max-tokens", "400",
                       "--no-ignore-eos", "--warmup-requests", "0"], tmp_path)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    run = only_run_dir(tmp_path)
    records = [r for r in read_jsonl(run / "records.jsonl") if r["error_class"] != "cancelled"]
    assert len(records) >= 4
    for r in records:
        assert (r["error_class"], r["finish_reason"]) == ("ok", "stop"), r["error_detail"]
        assert r["text"] and r["input_tokens"] > 0 and r["cached_tokens"] is not None
        if r["reasoning_chunks"]:      # the thinking profile reasons before 90% of its answers
            # the usage names the reasoning tokens (120, sd 20); the answer starts after them
            assert r["reasoning_tokens_source"] == "usage" and 20 <= r["reasoning_tokens"] <= 220
            assert r["reasoning_chunks"] <= r["reasoning_tokens"]      # reads may hold several tokens
            assert r["ttfo_ms"] > r["ttft_ms"] + 500 and r["output_tokens"] > r["reasoning_tokens"]
        else:
            assert r["ttfo_ms"] == r["ttft_ms"] and not r["reasoning_tokens"]
    assert any(r["reasoning_chunks"] for r in records)
    summary = json.loads((run / "summary.json").read_text())["groups"][0]
    assert summary["reasoning_share"] > 0.5 and summary["ttfo_ms"]["p50"] > summary["ttft_ms"]["p50"] + 500

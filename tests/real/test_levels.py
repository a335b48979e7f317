"""Every level against a real llama.cpp server (SmolLM2-135M on the CPU): short, bounded runs.

What llama.cpp (through llama-cpp-python) really does, and what these tests hold fourfold to:
- streams carry no ``usage`` (``stream_options.include_usage`` is ignored): output tokens are counted
  from the content chunks (``output_tokens_source: "chunks"``); non-streaming bodies carry usage;
- an answer cut at ``max_tokens`` ends with ``finish_reason: "length"`` and no usage: ``truncated``
  without ``--ignore-eos`` (which llama-cpp-python does not honour either), ``ok`` with it;
- one model, one lock: requests are served one at a time (``--interrupt_requests false`` here; the
  default cuts the running stream short:
  test_tools.py::test_stock_server_cuts_a_running_stream_when_another_arrives);
- ``/metrics`` answers 404: the L1 sampler says so once, not once per sample.
"""

from __future__ import annotations

import json
import statistics

import pytest

from tests.real.capture import STOP_PROMPT, capture
from tests.real.conftest import engine_timings
from tests.real.harness import assert_every_request_classified, run_real

pytestmark = [pytest.mark.real, pytest.mark.integration]

MAX_TOKENS = 32


@pytest.fixture(scope="module")
def l1_run(llama, tmp_path_factory):
    return run_real(llama, tmp_path_factory.mktemp("l1"), "l1_throughput.py", users=1, seconds=10,
                    extra=["--max-tokens", str(MAX_TOKENS), "--warmup-requests", "1",
                           "--sample-interval", "0.5"])


@pytest.fixture(scope="module")
def l1_eos_run(llama, tmp_path_factory):
    return run_real(llama, tmp_path_factory.mktemp("l1eos"), "l1_throughput.py", users=2, seconds=6,
                    extra=["--max-tokens", str(MAX_TOKENS), "--ignore-eos", "--warmup-requests", "0",
                           "--metrics-url", "off"])


def test_l1_every_request_classified_and_cut_answers_are_truncated(l1_run):
    run = l1_run
    assert run.rc == 0, run.output[-3000:]
    assert_every_request_classified(run, {"ok", "truncated"})
    assert len(run.measured) >= 2
    for r in run.measured:
        assert r["terminal"] and r["text"], r
        assert (r["output_tokens_source"] == "chunks"
                and r["content_chunks"] <= r["output_tokens"] <= MAX_TOKENS)
        if r["finish_reason"] == "length":          # no usage in the stream: the chunks are the count
            assert r["error_class"] == "truncated" and r["output_tokens"] >= MAX_TOKENS - 8
        else:
            assert (r["finish_reason"], r["error_class"]) == ("stop", "ok")
    assert any(r["finish_reason"] == "length" for r in run.measured)


def test_l1_ttft_and_itl_agree_with_the_engines_own_timings(l1_run):
    """One user, so nothing queues: TTFT covers the engine's prompt eval; ITL its per-token decode time."""
    run = l1_run
    timings = [t for t in engine_timings(run.server_log) if t.get("eval_n", 0) >= 4]
    assert len(timings) >= 2, run.server_log[-2000:]
    decode_ms = statistics.median(t["eval_ms"] / t["eval_n"] for t in timings)
    prompt_ms = statistics.median(t["prompt_ms"] for t in timings)
    ttft = statistics.median(r["ttft_ms"] for r in run.measured)
    itl = run.summary["total"]["itl_ms"]["p50"]
    # bounds wide enough for a CPU shared with other jobs, narrow enough to catch a wrong unit or clock
    assert ttft >= 0.3 * prompt_ms, (ttft, prompt_ms)
    assert ttft <= prompt_ms + 20 * decode_ms + 1500, (ttft, prompt_ms, decode_ms)
    assert 0.3 * decode_ms <= itl <= 6 * decode_ms + 10, (itl, decode_ms)
    assert run.summary["total"]["output_tps"] > 0
    # one token an event (its chunks are the count): per-token ITL is per-chunk ITL but where a read merged
    # two events, and there is no usage to hold the client's count against
    total = run.summary["total"]
    assert total["itl_token_ms"]["count"] >= total["itl_ms"]["count"] and total["tokens_compared"] == 0


def test_l1_sampler_says_once_that_the_target_has_no_metrics(l1_run):
    run = l1_run
    url = run.meta["target"].rstrip("/") + "/metrics"
    errors = run.summary["server_metrics"]["errors"]
    assert errors == {url: f"HTTP 404 from {url}"}, errors
    lines = [line for line in run.output.splitlines() if "server metrics from" in line]
    assert len(lines) == 1, lines
    assert url in lines[0] and "404" in lines[0]
    assert run.server_log.count("GET /metrics") >= 3          # it kept sampling, quietly


def test_l1_ignore_eos_is_not_honoured_and_length_without_usage_is_ok(l1_eos_run):
    run = l1_eos_run
    assert run.rc == 0, run.output[-3000:]
    assert_every_request_classified(run, {"ok"})
    assert len(run.measured) >= 2
    for r in run.measured:
        assert r["output_tokens_source"] == "chunks" and r["finish_reason"] in ("length", "stop")
    assert any(r["finish_reason"] == "length" for r in run.measured)
    assert all(r["extra"].get("ignore_eos") for r in run.measured)


def test_ignore_eos_is_ignored_by_the_server(llama):
    """Why fourfold score counts an ignore_eos answer that ended by "stop" as not padded
    (tests/fingerprint/test_ignore_eos_not_honoured.py)."""
    status, _, raw = capture(llama.url, {"model": "smollm2-135m", "max_tokens": 64, "ignore_eos": True,
                                         "temperature": 0,
                                         "messages": [{"role": "user", "content": STOP_PROMPT}]})
    body = json.loads(raw)
    assert status == 200 and body["choices"][0]["finish_reason"] == "stop"
    assert body["usage"]["completion_tokens"] < 64


def test_l2_ladder_one_two_four_users(llama, tmp_path):
    run = run_real(llama, tmp_path, "l2_gateway.py", users=4, seconds=20,
                   extra=["--ladder", "1,2,4", "--ladder-hold-s", "4", "--max-tokens", "16",
                          "--warmup-requests", "0", "--metrics-url", "off", "--slo-ttft-p95-ms", "20000"])
    assert run.rc == 0, run.output[-3000:]
    assert_every_request_classified(run, {"ok", "truncated"})
    steps = run.summary["l2"]["ladder"]["ladder"]["steps"]
    assert [s["users"] for s in steps] == [1, 2, 4], steps
    assert all(s["requests"] >= 1 and s["failures"] == 0 for s in steps), steps
    assert {r["scenario"] for r in run.measured} <= {"ladder@1", "ladder@2", "ladder@4"}
    # one model lock: with more users each waits longer for its first token
    ttft = [s["ttft_p50_ms"] for s in steps]
    assert ttft[2] > ttft[0], ttft


def test_l3_reference_rag_service_on_the_real_model(llama, tmp_path):
    from fourfold.targets.rag.launch import start_rag_service

    with start_rag_service(llama.url, extra_args=["--model", "smollm2-135m", "--max-tokens", "24"]) as rag:
        run = run_real(llama, tmp_path, "l3_rag.py", users=2, seconds=8, host=rag.url,
                       extra=["--warmup-requests", "0"])
    assert run.rc == 0, run.output[-3000:]
    # every question reached the real model once: the server's log has one chat completion per record
    assert_every_request_classified(run, {"ok", "truncated"})
    assert run.meta["level"] == "l3" and run.meta["dialect"] == "rag"
    rag_block = run.summary["rag"]
    assert rag_block["requests"] == run.summary["total"]["requests"] >= 3
    assert rag_block["with_retrieved_ids"] == rag_block["ok"] >= 1
    assert {"retrieve", "llm_ttft", "generate"} <= set(rag_block["stages_ms"])
    for r in run.measured:
        assert r["text"] and r["output_tokens"] > 0


def test_l4_a_few_sessions(llama, tmp_path):
    # each user stops after its one session, and the run with it: the time limit is only a backstop
    # (a session runs up to 6 turns, served one at a time; a loaded CI machine took over 12 s)
    run = run_real(llama, tmp_path, "l4_session.py", users=2, seconds=120, timeout=240,
                   extra=["--max-tokens", "24", "--think-scale", "0", "--patience-scale", "0",
                          "--sessions-per-user", "1", "--warmup-requests", "0", "--metrics-url", "off"])
    assert run.rc == 0, run.output[-3000:]
    assert_every_request_classified(run, {"ok", "truncated"})
    assert len(run.measured) >= 2
    turns = {(r["extra"]["session_id"], r["extra"]["turn"]) for r in run.measured}
    assert len(turns) == len(run.measured), turns
    for session in {r["extra"]["session_id"] for r in run.measured}:
        history = [r["extra"]["messages"] for r in run.measured if r["extra"]["session_id"] == session]
        # the conversation grows turn by turn
        assert history == sorted(history) and history[0] == 1, history
    sessions = run.summary["sessions"]["total"]
    assert (sessions["started"] == 2 and sessions["ended"] + sessions["cut"] == 2
            and sessions["ended"] >= 1), sessions

"""Tool calls against a real engine: llama-cpp-python's server with ``--chat_format
chatml-function-calling`` (SmolLM2-135M), an L1 run of the bundled tools sample's weather item with
``tool_choice`` naming the tool.

What this server really does: with a named ``tool_choice`` it constrains the model to the tool's JSON
schema (a grammar) and streams the call: every piece repeats the call's id, type and whole name beside a
piece of the arguments (tests/recorded/llamacpp_captured_tool_call.sse), then ``finish_reason:
"tool_calls"``, no usage. With ``tool_choice: "auto"`` this 135M model writes ``functions.NAME:`` as text
instead of calling: too small to choose, so the test names the tool."""

from __future__ import annotations

import json

import pytest

from fourfold.data import DATA_DIR
from tests.real.conftest import start_llama_server, stop
from tests.real.harness import assert_every_request_classified, run_real

pytestmark = [pytest.mark.real, pytest.mark.integration]


@pytest.fixture(scope="module")
def llama_tools(tmp_path_factory):
    server = start_llama_server(tmp_path_factory.mktemp("llama-tools"), chat_format="chatml-function-calling")
    yield server
    stop(server.process)


def test_a_forced_call_streams_as_answer_output_and_fits_the_schema(llama_tools, tmp_path):
    lines = (DATA_DIR / "datasets" / "tools_sample.jsonl").read_text().splitlines()
    sample = [json.loads(line) for line in lines if line.startswith("{")]
    weather = next(item for item in sample if item["id"] == "tool-weather")
    weather["tool_choice"] = {"type": "function", "function": {"name": "get_weather"}}
    dataset = tmp_path / "weather.jsonl"
    dataset.write_text(json.dumps(weather) + "\n")
    run = run_real(llama_tools, tmp_path, "l1_throughput.py", users=1, seconds=8,
                   extra=["--dataset", str(dataset), "--max-tokens", "64", "--warmup-requests", "0",
                          "--metrics-url", "off"])
    assert run.rc == 0, run.output[-3000:]
    assert_every_request_classified(run, {"ok"})
    assert len(run.measured) >= 2
    for r in run.measured:
        assert (r["finish_reason"], r["text"], r["output_tokens_source"]) == ("tool_calls", "", "chunks")
        (call,) = r["extra"]["tool_calls"]
        assert call["name"] == "get_weather"
        assert json.loads(call["arguments"])["unit"] in ("celsius", "fahrenheit")
        assert r["extra"]["tool_call_count"] == 1 and r["extra"]["tool_calls_invalid"] == 0
        assert r["ttft_ms"] == r["ttfo_ms"] and r["content_chunks"] >= 2   # reads join on a busy machine
    assert run.summary["total"]["tool_call_valid_share"] == 1.0

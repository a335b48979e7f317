"""Tool calls (issue 33, part 2): the tools an item offers, sent in each dialect's shape; a call judged
against them (name, JSON object, JSON schema); the simulator's calls fit the schema unless told to break
it; the figures in summary.json and the report agree."""

from __future__ import annotations

import json

import jsonschema
import pytest

from fourfold.client.answer import tool_call_facts
from fourfold.client.dialects import RequestOptions, get_dialect
from fourfold.data import DATA_DIR
from fourfold.measure.record import RequestRecord
from fourfold.measure.stats import LLMStats
from fourfold.reports.load import group_samples, load_run
from fourfold.targets.sim.toolcalls import arguments_for, break_arguments, choose_call, ends_with_tool_result
from fourfold.workloads.formats import load_items_as
from fourfold.workloads.items import Item
from fourfold.workloads.tools import call_problem, offered_schemas

SAMPLE = load_items_as(DATA_DIR / "datasets" / "tools_sample.jsonl")
WEATHER = next(i for i in SAMPLE if i.id == "tool-weather")
SCHEMA = WEATHER.meta["tools"][0]["function"]["parameters"]


@pytest.mark.parametrize("dialect", ["openai", "anthropic", "responses"])
def test_each_dialect_offers_the_items_tools_in_its_own_shape_and_reads_them_back(dialect):
    body = get_dialect(dialect).build(WEATHER, RequestOptions()).json
    assert body is not None
    schemas = offered_schemas(body)
    assert schemas is not None and schemas["get_weather"] == SCHEMA and set(schemas) == {
        "get_weather", "convert_currency"}
    shape = body["tools"][0]
    assert ("function" in shape) == (dialect == "openai")
    assert ("input_schema" in shape) == (dialect == "anthropic")
    plain = Item(id="x", messages=({"role": "user", "content": "hi"},))
    assert offered_schemas(get_dialect(dialect).build(plain, RequestOptions()).json) is None


@pytest.mark.parametrize("name, arguments, problem", [
    ("get_weather", '{"location": "Paris", "unit": "celsius"}', ""),
    ("get_weather", ' {"location":"Paris","unit":"celsius"} ', ""),
    ("get_weather", '{"location": "Paris"}', "arguments break the schema at /: 'unit' is a required"),
    ("get_weather", '{"location": "Paris", "unit": "K"}', "arguments break the schema at /unit: 'K'"),
    ("get_weather", '{"location": "Paris", "unit": "c", "x": 1}', "arguments break the schema at /"),
    ("get_weather", '{"location": "Par', "arguments are not JSON"),
    ("get_weather", '["Paris"]', "arguments are not a JSON object"),
    ("get_wether", '{}', "no tool named 'get_wether' was offered"),
])
def test_a_call_is_judged_by_the_offered_tools(name, arguments, problem):
    found = call_problem(name, arguments, {"get_weather": SCHEMA})
    assert found.startswith(problem) and bool(found) == bool(problem)


def test_the_record_keeps_the_count_of_calls_that_do_not_fit_and_the_first_problem():
    calls = [{"id": "a", "name": "get_weather", "arguments": '{"location": "Paris", "unit": "celsius"}'},
             {"id": "b", "name": "get_weather", "arguments": '{"location": "Paris"}'},
             {"id": "c", "name": "nope", "arguments": "{}"}]
    facts = tool_call_facts(calls, lambda s: s, {"get_weather": SCHEMA})
    assert (facts["tool_call_count"], facts["tool_calls_invalid"], facts["tool_calls_not_json"]) == (3, 2, 0)
    assert facts["tool_call_problem"].startswith("arguments break the schema at /: 'unit'")
    unjudged = tool_call_facts(calls, lambda s: s)          # no tools offered: counted, not judged
    assert "tool_calls_invalid" not in unjudged and unjudged["tool_call_count"] == 3


@pytest.mark.parametrize("item", SAMPLE, ids=lambda i: i.id)
def test_the_simulators_arguments_fit_each_sample_tool_and_broken_ones_do_not(item):
    for tool in item.meta["tools"]:
        schema = tool["function"]["parameters"]
        arguments = arguments_for(schema, item.prompt)
        jsonschema.validate(arguments, schema)
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(break_arguments(arguments, schema), schema)


def test_the_simulator_picks_the_tool_the_prompt_is_about_and_answers_a_tool_result_in_text():
    tools = tuple((t["function"]["name"], t["function"]["description"], t["function"]["parameters"])
                  for t in WEATHER.meta["tools"])
    call = choose_call(tools, "How much is 250 EUR in US dollars? Convert the currency.", 1, 0, 1.0, 0.0)
    assert call is not None and call.name == "convert_currency" and not call.broken
    again = choose_call(tools, "How much is 250 EUR in US dollars? Convert the currency.", 1, 0, 1.0, 0.0)
    assert again == call                                                   # seeded by the request
    assert choose_call(tools, WEATHER.prompt, 1, 0, 0.0, 0.0) is None     # tool_call_share 0
    followup = next(i for i in SAMPLE if i.id == "tool-followup")
    assert ends_with_tool_result(list(followup.messages))
    assert not ends_with_tool_result(list(WEATHER.messages))


def _record(i: int, calls: int | None, invalid: int | None) -> RequestRecord:
    record = RequestRecord(level="l1", scenario="saturation", item_id=f"q{i}", started_at=1_700_000_000.0 + i,
                           status=200, ttfb_ms=10.0, ttft_ms=20.0, e2e_ms=60.0,
                           chunk_offsets_ms=[20.0, 40.0, 60.0], content_chunks=3, output_tokens=3,
                           terminal=True, finish_reason="tool_calls")
    if calls is not None:
        record.extra.update(tool_call_count=calls)
    if invalid is not None:
        record.extra.update(tool_calls_invalid=invalid)
    return record


def test_summary_and_report_agree_on_the_tool_call_figures(tmp_path):
    records = [*(_record(i, 1, int(i % 4 == 0)) for i in range(40)),   # 10 of 40 judged calls invalid
               *(_record(40 + i, 2, None) for i in range(10)),          # offered no tools: not judged
               *(_record(50 + i, None, None) for i in range(10))]       # answered in text
    stats = LLMStats()
    for record in records:
        stats.add_record(record)
    group = stats.summary()["groups"][0]
    assert (group["tool_calls"], group["requests_tool_calls"], group["tool_calls_judged"]) == (60, 50, 40)
    assert group["tool_call_valid_share"] == 0.75 and group["tool_call_share"] == pytest.approx(50 / 60)
    run = tmp_path / "run"
    run.mkdir()
    (run / "records.jsonl").write_text("".join(r.to_json() + "\n" for r in records))
    (run / "meta.json").write_text(json.dumps({"record_schema": 1, "label": "t"}))
    sample = group_samples([load_run(run)])["l1:saturation"]
    assert (sample.tool_calls, sample.requests_tool_calls) == (60, 50)
    assert (sample.tool_calls_judged, sample.tool_calls_valid) == (40, 30)


def test_tool_choice_and_a_tool_history_go_out_in_each_dialects_shape():
    followup = next(i for i in SAMPLE if i.id == "tool-followup")
    choice = {"type": "function", "function": {"name": "get_weather"}}
    forced = Item(id="f", messages=followup.messages,
                  meta={"tools": followup.meta["tools"], "tool_choice": choice})
    chat = get_dialect("openai").build(forced, RequestOptions()).json
    assert chat["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    assert chat["messages"] == [dict(m) for m in followup.messages]            # OpenAI's own shape
    messages = get_dialect("anthropic").build(forced, RequestOptions()).json
    assert messages["tool_choice"] == {"type": "tool", "name": "get_weather"}
    assert [m["role"] for m in messages["messages"]] == ["user", "assistant", "user"]
    assert messages["messages"][1]["content"] == [{
        "type": "tool_use", "id": "call_sample_1", "name": "get_weather",
        "input": {"location": "Tokyo, Japan", "unit": "celsius"}}]
    assert messages["messages"][2]["content"][0]["type"] == "tool_result"
    responses = get_dialect("responses").build(forced, RequestOptions()).json
    assert responses["tool_choice"] == {"type": "function", "name": "get_weather"}
    assert [i.get("type", i.get("role")) for i in responses["input"]] == ["user", "function_call",
                                                                          "function_call_output"]
    for body in (chat, messages, responses):               # the simulator reads each as ending in a result
        history = body.get("messages") or body.get("input")
        assert ends_with_tool_result(history)


def test_the_simulator_honours_tool_choice():
    from fourfold.targets.sim.toolcalls import apply_choice
    tools = (("a", "", {}), ("b", "", {}))
    assert apply_choice(tools, "none") == ((), False)
    assert apply_choice(tools, "auto") == (tools, False) and apply_choice(tools, None) == (tools, False)
    assert apply_choice(tools, "required") == (tools, True)
    assert apply_choice(tools, {"type": "any"}) == (tools, True)
    for named in ({"type": "function", "function": {"name": "b"}}, {"type": "function", "name": "b"},
                  {"type": "tool", "name": "b"}):
        assert apply_choice(tools, named) == ((("b", "", {}),), True)
    with pytest.raises(ValueError, match="tool_choice"):
        Item.from_dict({"id": "x", "prompt": "hi", "tools": SAMPLE[0].meta["tools"],
                        "tool_choice": {"type": "function", "function": {"name": "not_offered"}}})

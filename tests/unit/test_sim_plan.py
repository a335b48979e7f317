"""Pure parts of the simulator: tokenizer, structure detection, plans, perturbation, HTTP parsing."""

from __future__ import annotations

import random
import re

import pytest

from fourfold.targets.sim.answers import (
    DEFAULT_PROMPTS_PATH,
    Answer,
    AnswerBook,
    generic_answer,
    requested_items,
)
from fourfold.targets.sim.exposition import LagHistogram, SimCounters, gpu_gauges, render_metrics
from fourfold.targets.sim.httpio import HttpParseError, RequestParser, chunk
from fourfold.targets.sim.perturb import QualityKnobs, count_items, perturb
from fourfold.targets.sim.plan import RequestFacts, choose_tokens, make_plan
from fourfold.targets.sim.profile import ProfileError, available_profiles, load_profile
from fourfold.targets.sim.tokens import count_tokens, cycle_tokens, is_chinese, tokenize


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("Hello, world.", ["Hello", ", ", "world", "."]),
        ("Why is the sky blue?", ["Why ", "is ", "the ", "sky ", "blue", "?"]),
        ("don't stop", ["don't ", "stop"]),
        ("x^2 - 5x", ["x", "^", "2 ", "- ", "5x"]),
        ("你好，世界。", ["你", "好", "，", "世", "界", "。"]),
        ("HTTP/3的优势", ["HTTP", "/", "3", "的", "优", "势"]),
        ("  lead\nline", ["  ", "lead\n", "line"]),
        ("", []),
    ],
)
def test_tokenize(text: str, tokens: list[str]) -> None:
    assert tokenize(text) == tokens
    assert "".join(tokenize(text)) == text
    assert count_tokens(text) == len(tokens)


def test_tokenize_round_trips_every_reference() -> None:
    book = AnswerBook.load()
    for prompt in ("Briefly explain quantum annealing.", "请用表格对比CNN和RNN。"):
        text = book.answer(prompt).text
        assert "".join(tokenize(text)) == text


def test_cycle_tokens() -> None:
    assert cycle_tokens(["a ", "b "], 5) == ["a ", "b ", "a ", "b ", "a "]
    assert cycle_tokens(["a "], 0) == []
    assert is_chinese("简述量子退火原理。") and not is_chinese("Explain HTTP/3.")


@pytest.mark.parametrize(
    ("prompt", "structured"),
    [
        ("Briefly explain quantum annealing.", False),
        ("Explain quantum annealing in three points.", True),
        ("List three advantages of HTTP/3.", True),
        ("Compare CNN and RNN in a table.", True),
        ("Solve the quadratic equation x^2 - 5x + 6 = 0 step by step.", True),
        ("Give five tips for writing clean code.", True),
        ("What is a large language model?", False),
        ("简述量子退火原理。", False),
        ("请分三点简述量子退火原理。", True),
        ("列出5个提高睡眠质量的方法。", True),
        ("请用表格对比CNN和RNN。", True),
        ("什么是检索增强生成？", False),
    ],
)
def test_structured_prompt_detection(prompt: str, structured: bool) -> None:
    assert load_profile("baseline").is_structured(prompt) is structured


@pytest.mark.parametrize(
    ("prompt", "n"),
    [
        ("Explain quantum annealing in three points.", 3),
        ("Give five tips for better sleep.", 5),
        ("Compare Python and Go in a table with four rows.", 4),
        ("List 7 prime numbers.", 7),
        ("列出5个提高睡眠质量的方法。", 5),
        ("请分三点说明HTTP/3的优势。", 3),
        ("Briefly explain quantum annealing.", None),
    ],
)
def test_requested_items(prompt: str, n: int | None) -> None:
    assert requested_items(prompt) == n


def test_generic_answer_is_deterministic_and_honours_requested_items() -> None:
    a = generic_answer("Tell me about unicorns.")
    assert a == generic_answer("Tell me about unicorns.") and a.item_id == ""
    listed = generic_answer("Name six colours of the rainbow in six points, in 6 points.")
    assert count_items(listed.text) == listed.requested_items == 6
    assert is_chinese(generic_answer("请介绍一下独角兽。").text)


def test_choose_tokens() -> None:
    text = "one two three"
    assert choose_tokens(text, None, False) == (["one ", "two ", "three"], "stop")
    assert choose_tokens(text, 2, False) == (["one ", "two "], "length")
    assert choose_tokens(text, 3, False) == (["one ", "two ", "three"], "stop")
    assert choose_tokens(text, 5, True) == (["one ", "two ", "three", "one ", "two "], "length")


def _facts(prompt: str, **kw) -> RequestFacts:
    return RequestFacts(prompt=prompt, input_tokens=count_tokens(prompt), **kw)


def test_flat_plan_is_exact() -> None:
    profile = load_profile("flat")
    answer = Answer("a b c d")
    plan = make_plan(profile, answer, _facts("p"), seed=0)
    assert plan.offsets_ms == [50.0, 60.0, 70.0, 80.0]
    assert plan.ttft_ms == 50.0 and plan.itl_ms == 10.0 and plan.pauses == []
    assert plan.text == "a b c d" and plan.finish_reason == "stop"


def test_plan_determinism_depends_on_seed_prompt_and_occurrence() -> None:
    profile = load_profile("candidate")
    answer = AnswerBook.load().answer("Give five tips for better sleep.")
    facts = _facts("Give five tips for better sleep.")
    a = make_plan(profile, answer, facts, seed=3)
    assert a.summary(detail=True) == make_plan(profile, answer, facts, seed=3).summary(detail=True)
    assert a.offsets_ms != make_plan(profile, answer, facts, seed=4).offsets_ms
    second = RequestFacts(**{**facts.__dict__, "occurrence": 1})
    assert a.offsets_ms != make_plan(profile, answer, second, seed=3).offsets_ms


def test_orchestrator_only_for_structured_prompts_on_baseline() -> None:
    baseline, candidate = load_profile("baseline", {"cold_requests": 0}), load_profile("candidate")
    book = AnswerBook.load()
    a, b = "Briefly explain quantum annealing.", "Explain quantum annealing in three points."
    delays = [make_plan(baseline, book.answer(b), _facts(b, occurrence=k), 0).orchestrator_ms
              for k in range(200)]
    assert 52 < sum(delays) / len(delays) < 64
    assert make_plan(baseline, book.answer(a), _facts(a), 0).orchestrator_ms == 0
    assert all(make_plan(candidate, book.answer(b), _facts(b, occurrence=k), 0).orchestrator_ms == 0
               for k in range(20))
    table = "Compare CNN and RNN in a table."
    extra = make_plan(baseline, book.answer(table), _facts(table), 0).input_tokens - count_tokens(table)
    assert extra - (make_plan(candidate, book.answer(table), _facts(table), 0).input_tokens
                    - count_tokens(table)) == 15


def test_baseline_itl_jitter_is_small() -> None:
    plan = make_plan(load_profile("baseline"), Answer("word " * 200), _facts("p"), 0)
    gaps = [b - a for a, b in zip(plan.offsets_ms, plan.offsets_ms[1:])]
    mean = sum(gaps) / len(gaps)
    sd = (sum((g - mean) ** 2 for g in gaps) / len(gaps)) ** 0.5
    assert 19 < mean < 21 and sd < 5


def test_pulse_schedule() -> None:
    profile = load_profile("candidate",
                           {"pulse.probability": 1.0, "pulse.pause_jitter_ms": 0, "itl_jitter_ms": 0})
    plan = make_plan(profile, Answer("word " * 70), _facts("p"), 0, reword=False)   # 70 tokens exactly
    assert [i for i, _ in plan.pauses] == [15, 35, 55]
    assert all(ms == 200.0 for _, ms in plan.pauses)
    gaps = [round(b - a, 6) for a, b in zip(plan.offsets_ms, plan.offsets_ms[1:])]
    assert gaps[:14] == [2.0] * 14                     # tokens 1..14: the fast burst
    assert gaps[14] == 215.0                           # pause before token 15 (+ the normal 15 ms step)
    assert gaps[15:29] == [2.0] * 14 and gaps[29:34] == [15.0] * 5
    period = sum(gaps[15:35])                          # one burst, the steps and a pause: 20 tokens
    assert period == 318.0 < 20 * load_profile("baseline").itl_ms     # ~3.1 Hz, still ahead of the baseline
    short = make_plan(profile, Answer("word " * 30), _facts("p"), 0, reword=False)
    assert short.pauses == []                          # below min_output_tokens


def test_load_factor_slows_itl_above_max_batch() -> None:
    profile = load_profile("flat", {"max_batch": 4})
    assert make_plan(profile, Answer("a b"), _facts("p", running=3), 0).itl_ms == 10.0
    assert make_plan(profile, Answer("a b"), _facts("p", running=7), 0).itl_ms == 20.0


LIST_FORMS = [
    "Intro.\n1. one\n2. two\n3. three",
    "Intro.\n- one\n- two\n- three",
    "引言：\n一、甲\n二、乙\n三、丙",
    "引言：\n①甲\n②乙\n③丙",
    "Intro.\n\n| a | b |\n|---|---|\n| 1 | 2 |\n| 3 | 4 |\n| 5 | 6 |\n\nEnd.",
]


@pytest.mark.parametrize("text", LIST_FORMS)
def test_list_item_drop(text: str) -> None:
    assert count_items(text) == 3
    dropped = perturb(text, QualityKnobs(list_item_drop_rate=1.0), random.Random(0), 3)
    assert count_items(dropped) == 2
    assert perturb(text, QualityKnobs(list_item_drop_rate=1.0), random.Random(0), None) == text


def test_perturbation_off_is_identity_and_sentences_spare_items() -> None:
    text = "First sentence. Second sentence. Third one.\n1. Item one. Still item.\n2. Item two."
    assert perturb(text, QualityKnobs(), random.Random(0), 2) == text
    dropped = perturb(text, QualityKnobs(drop_sentence_rate=1.0), random.Random(0), 2)
    assert dropped.split("\n")[0] == "First sentence."
    assert dropped.split("\n")[1:] == text.split("\n")[1:]
    filled = perturb(text, QualityKnobs(filler_sentence_rate=1.0), random.Random(0), 2)
    assert len(re.findall(r"[.!?]", filled.split("\n")[0])) == 6
    zh = perturb("第一句。第二句。", QualityKnobs(filler_sentence_rate=1.0), random.Random(0), None)
    assert zh.count("。") == 4 and " " not in zh


def test_profiles_load_and_unknown_names_list_valid_ones() -> None:
    assert {"baseline", "candidate", "reference", "flat", "degraded"} <= set(available_profiles())
    for name in available_profiles():
        assert load_profile(name).name == name
    with pytest.raises(ProfileError, match="valid profiles: baseline, candidate"):
        load_profile("nope")
    with pytest.raises(ProfileError, match="unknown profile field"):
        load_profile("baseline", {"itl": 3})
    with pytest.raises(ProfileError, match="unknown pulse field"):
        load_profile("candidate", {"pulse.speed": 3})
    assert load_profile("flat").ttft_jitter_ms == 0 and load_profile("flat").drop_sentence_rate == 0
    assert load_profile("candidate", {"pulse.pause_ms": 150}).pulse.pause_ms == 150


def test_http_parser_pipelining_and_torn_reads() -> None:
    parser = RequestParser()
    raw = (b"POST /a HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc"
           b"GET /b?x=1 HTTP/1.1\r\nConnection: close\r\n\r\n")
    parser.feed(raw[:10])
    assert parser.next_request() is None
    parser.feed(raw[10:])
    first, second = parser.next_request(), parser.next_request()
    assert (first.method, first.path, first.body, first.keep_alive) == ("POST", "/a", b"abc", True)
    assert (second.path, second.query, second.keep_alive) == ("/b", "x=1", False)
    assert parser.next_request() is None


@pytest.mark.parametrize(
    ("raw", "status"),
    [
        (b"POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", 411),
        (b"POST /a HTTP/1.1\r\nHost: x\r\n\r\n", 411),
        (b"POST /a HTTP/1.1\r\nContent-Length: abc\r\n\r\n", 400),
        (b"GARBAGE\r\n\r\n", 400),
        (b"GET / HTTP/2.0\r\n\r\n", 505),
        (b"GET / HTTP/1.1\r\nBad Header\r\n\r\n", 400),
    ],
)
def test_http_parser_rejects(raw: bytes, status: int) -> None:
    parser = RequestParser()
    parser.feed(raw)
    with pytest.raises(HttpParseError) as info:
        parser.next_request()
    assert info.value.status == status


def test_http_1_0_keep_alive_and_chunk_framing() -> None:
    parser = RequestParser()
    parser.feed(b"GET / HTTP/1.0\r\n\r\n")
    assert parser.next_request().keep_alive is False
    assert chunk(b"hello") == b"5\r\nhello\r\n" and chunk(b"") == b""


def test_lag_histogram_and_metrics_text() -> None:
    lag = LagHistogram()
    for ms in (0.05, 0.2, 0.3, 5.0):
        lag.record(ms)
    assert lag.quantile_ms(0.5) == pytest.approx(0.21) and lag.max_ms == 5.0
    lag.record_run(1.0, [0.9990, 0.9995], 0, 2)
    assert lag.count == 6 and lag.max_ms == 5.0
    profile = load_profile("candidate")
    counters = SimCounters(running=128, kv_tokens=50_000)
    by_batch = {"mem_bw_full_tokens_per_s": 0}         # bandwidth by batch share (tokens/s: test_sim_article)
    assert gpu_gauges(load_profile("candidate", by_batch), 256, 0).mem_bw_util_pct == 92.0
    assert gpu_gauges(load_profile("baseline", by_batch), 1000, 0).mem_bw_util_pct == 42.0
    text = render_metrics(profile, counters)
    names = {line.split("{")[0] for line in text.splitlines() if line and not line.startswith("#")}
    for name in ("vllm:num_requests_running", "vllm:gpu_cache_usage_perc", "DCGM_FI_DEV_MEM_COPY_UTIL"):
        assert name in names
    typed = {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE")}
    assert {n.removesuffix("_bucket").removesuffix("_sum").removesuffix("_count") for n in names} <= typed
    assert 'vllm:num_requests_running{model_name="fourfold-sim"} 128' in text


def test_bundled_dataset_contract() -> None:
    from fourfold.workloads.items import load_items  # the contract the levels read the dataset with

    items = load_items(DEFAULT_PROMPTS_PATH)
    assert len(items) >= 44
    ids = {item.id for item in items}
    assert {"qa-brief", "qa-three-points"} <= ids
    english = [item for item in items if not is_chinese(item.prompt)]
    assert 0.6 <= len(english) / len(items) <= 0.75
    prompts = {item.prompt for item in items}
    for needed in ("Briefly explain quantum annealing.", "Explain quantum annealing in three points.",
                   "List three advantages of HTTP/3.", "Compare CNN and RNN in a table.",
                   "Solve the quadratic equation x^2 - 5x + 6 = 0 step by step."):
        assert needed in prompts
    for item in items:
        reference = item.references[0]
        n = item.meta.get("requested_items")
        if n is not None:
            assert count_items(reference) == n, item.id
        if is_chinese(reference):
            assert 100 <= len(reference) <= 400, item.id
            assert not re.search(r"[\u4e00-\u9fff][,;:!?]|[\u4e00-\u9fff]\.(?!\d)", reference), item.id
        else:
            assert 60 <= len(reference.split()) <= 250, item.id
        assert count_tokens(reference) <= item.max_tokens, item.id


def test_cli_arguments_become_a_config() -> None:
    from fourfold.targets.sim.cli import build_parser, config_from_args

    args = build_parser().parse_args(["--profile", "candidate", "--itl-ms", "12", "--seed", "9", "--set",
                                      "pulse.pause_ms=150", "--max-concurrency", "4", "--over-limit", "503",
                                      "--keepalive-timeout-s", "2"])
    config = config_from_args(args)
    assert (config.profile.itl_ms, config.profile.pulse.pause_ms, config.seed) == (12.0, 150.0, 9)
    assert (config.gateway.max_concurrency, config.gateway.over_limit,
            config.gateway.keepalive_timeout_s) == (4, "503", 2.0)
    assert config.host == "127.0.0.1"
    with pytest.raises(ProfileError, match="must be a float"):
        config_from_args(build_parser().parse_args(["--set", "itl_ms=fast"]))


@pytest.mark.parametrize("field, value", [("reasoning_tokens", 1e300), ("reasoning_tokens", float("nan")),
                                          ("reasoning_tokens", -1), ("reasoning_tokens_jitter", 1e9),
                                          ("reasoning_share", 1.5), ("reasoning_field", "thoughts")])
def test_reasoning_fields_out_of_range_are_a_profile_error(field, value):
    with pytest.raises(ProfileError, match="reasoning"):
        load_profile("thinking", {field: value})

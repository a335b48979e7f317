"""The simulator's profiles differ where the article's versions differ (issue #18, item 2):
a heavy E2E tail on the candidate, connection reuse, memory bandwidth that follows tokens/s,
answers generated from the reference (reworded, with planted factual slips)."""

from __future__ import annotations

import json
import random
import re

from fourfold.targets.sim.answers import DEFAULT_PROMPTS_PATH, Answer, AnswerBook
from fourfold.targets.sim.cli import build_parser, config_from_args
from fourfold.targets.sim.exposition import SimCounters, TokenRate, gpu_gauges, render_metrics
from fourfold.targets.sim.gateway import GatewayConfig
from fourfold.targets.sim.paraphrase import EN_OPENERS, SURNAMES, GenerationKnobs, generate, slip_candidates
from fourfold.targets.sim.perturb import count_items
from fourfold.targets.sim.plan import RequestFacts, make_plan
from fourfold.targets.sim.profile import load_profile


def _plan(profile, index: int, words: int = 80):
    return make_plan(profile, Answer("word " * words), RequestFacts("p", 1, request_index=index), 0,
                     reword=False)


def test_candidate_stalls_every_33rd_request_mid_stream() -> None:
    profile = load_profile("candidate", {"pulse.probability": 0.0})     # pulses off: only the stall
    stalled = [i for i in range(99) if _plan(profile, i).pauses]
    assert stalled == [32, 65, 98]                       # a count, not a draw: n // 33 per run
    plan = _plan(profile, 32)
    [(at, ms)] = plan.pauses
    assert at == plan.output_tokens // 2 and 3000 < ms < 5000
    assert plan.duration_ms > _plan(profile, 31).duration_ms + 3000
    assert not any(_plan(load_profile("baseline"), i).pauses for i in range(99))


def test_tail_stall_raises_p99_while_p95_falls() -> None:
    """Plans alone (no server): 330 requests of each profile, the candidate's P99 above the
    baseline's, its P95 below."""
    def quantiles(name: str) -> tuple[float, float]:
        profile = load_profile(name)
        e2e = sorted(_plan(profile, i, 40 + (i * 7) % 60).duration_ms for i in range(330))
        return e2e[int(0.95 * 330)], e2e[int(0.99 * 330)]
    (b95, b99), (c95, c99) = quantiles("baseline"), quantiles("candidate")
    assert c95 < b95 and c99 > b99 + 1000


def test_keepalive_max_requests_by_profile() -> None:
    config = GatewayConfig(keepalive_max_requests=4)
    assert [config.keeps_alive(n) for n in range(1, 6)] == [True, True, True, False, False]
    assert GatewayConfig().keeps_alive(10_000)
    parse = build_parser().parse_args
    assert config_from_args(parse(["--profile", "baseline"])).gateway.keepalive_max_requests == 2
    assert config_from_args(parse(["--profile", "candidate"])).gateway.keepalive_max_requests == 10
    assert config_from_args(parse(["--profile", "flat"])).gateway.keepalive_max_requests == 0
    assert config_from_args(parse(["--profile", "baseline", "--keepalive-max-requests", "0"])
                            ).gateway.keepalive_max_requests == 0


def test_token_rate_over_a_window() -> None:
    rate = TokenRate(window_s=5.0)
    assert rate.observe(0.0, 0) is None
    assert rate.observe(1.0, 400) == 400.0
    assert rate.observe(2.0, 1000) == 500.0
    for t in range(3, 10):
        rate.observe(float(t), 1000 + 100 * (t - 2))
    assert abs(rate.observe(10.0, 1800) - 100.0) < 1e-9     # only the last 5 s count


def test_memory_bandwidth_follows_tokens_per_second() -> None:
    baseline, candidate = load_profile("baseline"), load_profile("candidate")
    assert gpu_gauges(baseline, 8, 0, 0.0).mem_bw_util_pct == 0.0
    assert gpu_gauges(baseline, 8, 0, 200.0).mem_bw_util_pct == 21.0
    assert gpu_gauges(baseline, 8, 0, 5000.0).mem_bw_util_pct == 42.0
    # the demo's L1 (8 users): ~390 tokens/s on baseline, ~520 on candidate
    assert gpu_gauges(baseline, 8, 0,
                      390.0).mem_bw_util_pct < 42 < gpu_gauges(candidate, 8, 0, 520.0).mem_bw_util_pct
    assert gpu_gauges(candidate, 8, 0, 520.0).mem_bw_util_pct > 80
    counters = SimCounters(running=8)
    render_metrics(candidate, counters, 100.0)
    counters.generation_tokens_total = 960
    text = render_metrics(candidate, counters, 102.0)
    [line] = [x for x in text.splitlines() if x.startswith("DCGM_FI_DEV_MEM_COPY_UTIL{")]
    assert line.endswith(" 92.0")                          # 480 tokens/s: the candidate's full rate


# ---- generated answers (fourfold.targets.sim.paraphrase) ----
FACT = "Rosven Robotics was founded in 2012 by Ada Lindqvist. It employs about 850 people."


def _slip_share(profile_name: str, n: int = 2000) -> tuple[float, list]:
    profile = load_profile(profile_name)
    plans = [make_plan(profile, Answer(FACT),
                       RequestFacts("Who founded Rosven Robotics?", 5, occurrence=i), 3)
             for i in range(n)]
    return sum(bool(p.slips) for p in plans) / n, plans


def test_slip_rate_by_profile_and_every_slip_is_in_the_text() -> None:
    base, plans = _slip_share("baseline")
    cand, _ = _slip_share("candidate")
    assert abs(base - 0.12) < 0.02 and abs(cand - 0.05) < 0.015, (base, cand)
    kinds = set()
    for plan in plans:
        for slip in plan.slips:
            kinds.add(slip.kind)
            assert slip.wrong in plan.text and slip.wrong != slip.right
            header = json.loads(plan.header_value())
            assert header["slips"] == [[slip.kind, slip.right, slip.wrong]]
        if not plan.slips:                         # shortened maybe, but every fact it states is right
            assert set(re.findall(r"\d+", plan.text)) <= {"2012", "850"}
            assert not set(SURNAMES) & set(plan.text.split())
    assert kinds == {"year", "number", "name"}
    # not the entity asked about
    assert not any(s.right in ("Rosven", "Robotics") for p in plans for s in p.slips)


def test_slip_values() -> None:
    rng = random.Random(1)
    for _ in range(200):
        text, [slip] = generate(FACT, GenerationKnobs(slip_rate=1.0), rng, "Who founded Rosven Robotics?")
        if slip.kind == "year":
            assert 1 <= abs(int(slip.wrong) - 2012) <= 7
        elif slip.kind == "number":
            assert 0.09 <= abs(int(slip.wrong) - 850) / 850 <= 0.41
        else:
            assert slip.right == "Lindqvist" and slip.wrong in SURNAMES
    assert generate("No facts here at all.", GenerationKnobs(slip_rate=1.0), rng) == \
        ("No facts here at all.", [])
    assert slip_candidates("In 1999 about 1,200 people met Mara Kettering.")[0][:1] == ("year",)


def test_generated_answers_are_not_the_reference_but_keep_their_lists() -> None:
    book = AnswerBook.load()
    baseline = load_profile("baseline")
    items = [json.loads(line) for line in DEFAULT_PROMPTS_PATH.read_text(encoding="utf-8").splitlines()
             if line.strip()]
    changed = 0
    for item in items:
        prompt = item.get("prompt") or item["messages"][-1]["content"]
        answer = book.answer(prompt)
        plan = make_plan(baseline, answer, RequestFacts(prompt, 5), 0)
        changed += plan.text != answer.text
        if answer.requested_items:
            assert count_items(plan.text) in (count_items(answer.text), count_items(answer.text) - 1)
    assert changed >= 0.9 * len(items)                # a list or table answer may come through as it was
    # the same request twice: the same words (seeded); reference/flat copy the reference exactly
    prompt = "Why is the sky blue?"
    assert make_plan(baseline, book.answer(prompt), RequestFacts(prompt, 5), 4).text == \
        make_plan(baseline, book.answer(prompt), RequestFacts(prompt, 5), 4).text
    for name in ("reference", "flat", "stepwise"):
        assert make_plan(load_profile(name), book.answer(prompt), RequestFacts(prompt, 5), 0).text == \
            book.answer(prompt).text


def test_paraphrase_rewords_sentences_and_items() -> None:
    rng = random.Random(0)
    knobs = GenerationKnobs(paraphrase_rate=1.0, reorder_rate=1.0)
    text, slips = generate("A cache helps because it is fast. It also uses memory. Many systems use one.\n"
                           "1. It reduces load for example.\n| a | b |", knobs, rng)
    lines = text.split("\n")
    assert lines[0].startswith(tuple(EN_OPENERS)) and "since" in lines[0] and "because" not in lines[0]
    assert lines[1].startswith("1. ") and "for instance" in lines[1] and lines[2] == "| a | b |"
    assert slips == []


def test_session_turns_keep_their_wording() -> None:
    baseline = load_profile("baseline", {"drop_sentence_rate": 0, "filler_sentence_rate": 0})  # perturb's own
    answer = Answer("The budget is 3000 dollars. Flights leave on Monday.")
    plan = make_plan(baseline, answer, RequestFacts("p", 5), 0, reword=False)
    assert plan.text == answer.text and plan.slips == []


def test_places_and_rivers_slip_and_every_rag_reference_can_slip() -> None:
    found = slip_candidates("Belani Robotics is headquartered in Pikewick, Pellan. The Lune river runs by.",
                            "Where is Belani Robotics headquartered?")
    assert [(kind, value) for kind, _, _, value in found] == [("place", "Pikewick"), ("river", "Lune")]
    assert slip_candidates("Which river runs through Stavhaven? The Lune river.", "The Lune river?") == []
    from fourfold.targets.rag import load_questions
    # L3: a slip can land anywhere
    assert all(slip_candidates(q.reference, q.prompt) for q in load_questions())

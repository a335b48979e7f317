"""The simulator's session answers (pure): facts revealed per turn, forms, and the hand-computable profile."""

from __future__ import annotations

import asyncio
import random

import pytest

from fourfold.data import DATA_DIR
from fourfold.levels.l4_scripts import Conversation, load_scripts
from fourfold.targets.sim import wire_openai
from fourfold.targets.sim.app import SimApp, SimConfig
from fourfold.targets.sim.profile import load_profile
from fourfold.targets.sim.sessions import (
    SessionBook,
    SessionKnobs,
    first_count,
    goal_from_dict,
    session_answer,
    split_sentences,
)

SESSIONS = DATA_DIR / "sessions" / "sessions.jsonl"
GOAL = goal_from_dict({
    "id": "tea", "prompt": "How do I make tea?",
    "reference": "Tea is simple. Boil the water. Steep for three minutes. "
                 "Add milk if you like. Serve it hot.",
    "facts": [{"key": "boil", "ask": "the water"}, {"key": "three minutes", "ask": "how long"},
              {"key": "milk", "ask": "what to add"}, {"key": "hot", "ask": "how to serve"}]})
STEP = SessionKnobs(first_share=0.0, facts_per_turn=1, miss_rate=0.0)


def history(*texts: str) -> list[tuple[str, str]]:
    return [("user" if i % 2 == 0 else "assistant", t) for i, t in enumerate(texts)]


@pytest.mark.parametrize(("n", "share", "count"), [(4, 0.0, 1), (4, 0.34, 1), (5, 0.34, 2), (3, 0.34, 1),
                                                   (4, 0.6, 2), (5, 0.6, 3), (6, 0.6, 4), (5, 0.5, 3),
                                                   (4, 1.0, 4)])
def test_first_count_rounds_half_up(n, share, count):
    assert first_count(n, share) == count


def test_goal_sentences_and_intro():
    assert GOAL.sentences == \
        ("Boil the water.", "Steep for three minutes.", "Add milk if you like.", "Serve it hot.")
    assert GOAL.intro == "Tea is simple."
    assert split_sentences("Python 3.13 is out. Really!\nNext line") == \
        ["Python 3.13 is out.", "Really!", "Next line"]


def test_one_new_fact_per_answer_asked_ones_first():
    first = session_answer(GOAL, history("How do I make tea?"), STEP, random.Random(0))
    assert first.text == "Tea is simple. Boil the water." and first.new_facts == (0,)
    second = session_answer(GOAL,
                            history("How do I make tea?", first.text, "Thanks. What about what to add?"),
                            STEP, random.Random(0))
    assert second.new_facts == (2,) and second.revealed_before == 1 \
        and second.text.endswith("Add milk if you like.")


def test_forms_structured_short_and_miss():
    opened = history("How do I make tea?", "Boil the water.")
    points = session_answer(GOAL, opened + [("user", "Please answer in 3 points: how long.")], STEP,
                            random.Random(0))
    assert points.text == "Here is the answer in points:\n1. Boil the water.\n2. Steep for three minutes."
    short = session_answer(GOAL, opened + [("user", "Too long. Briefly: how to serve?")], STEP,
                           random.Random(0))
    assert short.text == "Serve it hot." and short.new_facts == (3,)
    missed = session_answer(GOAL, opened + [("user", "And?")], SessionKnobs(0.0, 1, miss_rate=1.0),
                            random.Random(0))
    assert missed.new_facts == () and GOAL.revealed_in(missed.text) == set()
    whole = session_answer(GOAL, history("How do I make tea?"), SessionKnobs(first_share=1.0),
                           random.Random(0))
    assert whole.text == GOAL.reference


def test_book_finds_a_session_by_its_first_user_message_only():
    book = SessionBook([GOAL])
    assert book.find(history("How do I make tea?", "x", "other")) is GOAL
    assert book.find([("system", "be nice"), ("user", " How do I make tea? ")]) is GOAL
    assert book.find(history("other", "x", "How do I make tea?")) is None


def test_stepwise_profile_takes_min_facts_max_turns_for_every_bundled_script():
    """The hand computation the integration test relies on, through the client's own rules."""
    profile = load_profile("stepwise")
    knobs = SessionKnobs(profile.session_first_share, profile.session_facts_per_turn,
                         profile.session_miss_rate)
    book = SessionBook.load([SESSIONS])
    for script in load_scripts(SESSIONS):
        goal = book.find([("user", script.opening)])
        conversation = Conversation(script)
        while not conversation.verdict.ended:
            messages = conversation.ask(conversation.next_turn())
            answer = session_answer(goal, [(m["role"], m["content"]) for m in messages], knobs,
                                    random.Random(0))
            conversation.answer(answer.text, ttft_ms=50, e2e_ms=500)
        n, m = len(script.facts), script.max_turns
        assert conversation.turns == min(n, m), script.id
        assert conversation.verdict.outcome == ("completed" if n <= m else "max_turns"), script.id


def test_the_app_plans_a_session_turn_and_states_the_message_count():
    loop = asyncio.new_event_loop()
    try:
        app = SimApp(SimConfig(profile=load_profile("stepwise")), loop)
        body = (b'{"model":"m","messages":[{"role":"user","content":"What is PagedAttention in vLLM?"},'
                b'{"role":"assistant","content":"It stores the KV cache in fixed-size blocks."},'
                b'{"role":"user","content":"Thanks. What about how a sequence finds its blocks?"}]}')
        plan = app.plan(wire_openai.parse(body, {}, "m"))
        summary = plan.summary()
        assert summary["messages"] == 3 and summary["item_id"] == "s01-paged-attention"
        assert summary["session"] == {"id": "s01-paged-attention", "new_facts": [2], "revealed_before": 1}
        assert "block table" in plan.text
        plain = app.plan(wire_openai.parse(b'{"model":"m","messages":[{"role":"user","content":"hi"}]}',
                                           {}, "m"))
        assert plain.summary()["messages"] == 1 and "session" not in plain.summary()
    finally:
        loop.close()

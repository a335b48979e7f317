"""L4 session scripts and the user's rules (pure): the bundled data, parsing errors, next turn, verdicts."""

from __future__ import annotations

import pytest

from fourfold.data import DATA_DIR
from fourfold.levels.l4_scripts import (
    Conversation,
    ScriptError,
    SessionVerdict,
    covered_facts,
    judge,
    load_scripts,
    next_turn,
    script_from_dict,
    word_count,
)
from fourfold.targets.sim.perturb import EN_FILLERS, ZH_FILLERS
from fourfold.targets.sim.sessions import ALL_FIXED_SENTENCES, SessionBook
from fourfold.workloads.items import load_items

DEFAULT_SESSIONS = DATA_DIR / "sessions" / "sessions.jsonl"
SCRIPTS = load_scripts(DEFAULT_SESSIONS)


def make(**over):
    data = {"id": "t1", "prompt": "How do I make tea?", "rephrase": "What is the way to brew tea?",
            "reference": "Boil the water. Steep for three minutes. Add milk if you like.",
            "facts": [{"key": "boil", "ask": "the water"},
                      {"key": ["three minutes", "3 minutes"], "ask": "how long"},
                      {"key": "milk", "ask": "what to add"}],
            "max_turns": 4, "rules": ["rephrase", "shorter", "structured", "missing"],
            "persona": {"name": "tester", "think_time_s": [1, 2],
                        "patience": {"ttft_ms": 500, "e2e_ms": 2000}, "max_words": 10}}
    data.update(over)
    return script_from_dict(data)


# ---- the bundled data ----
def test_at_least_thirty_scripts_with_unique_ids_and_openings():
    assert len(SCRIPTS) >= 30
    assert len({s.id for s in SCRIPTS}) == len(SCRIPTS)
    assert len({s.opening for s in SCRIPTS}) == len(SCRIPTS)
    items = load_items(DEFAULT_SESSIONS)             # the same file is a dataset `fourfold score` reads
    assert [i.id for i in items] == [s.id for s in SCRIPTS]
    assert all(i.references == (s.reference,) for i, s in zip(items, SCRIPTS))


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda s: s.id)
def test_every_fact_has_exactly_one_reference_sentence_that_states_only_it(script):
    goal = SessionBook.load([DEFAULT_SESSIONS]).find([("user", script.opening)])
    assert goal is not None and goal.n_facts == len(script.facts)
    assert covered_facts(script, [script.reference]) == frozenset(range(len(script.facts)))
    for i, sentence in enumerate(goal.sentences):
        assert sentence, f"{script.id}: fact {i} has no sentence in the reference"
        assert covered_facts(script, [sentence]) == {i}, f"{script.id}: {sentence!r}"
    assert covered_facts(script, [goal.intro]) == frozenset()
    assert 1 <= script.max_turns <= 8 and script.rules[-1] == "missing"
    persona = script.persona
    assert 0 < persona.think_time_s[0] <= persona.think_time_s[1]
    assert persona.patience_ttft_ms and persona.patience_e2e_ms and persona.max_words


def test_no_fixed_or_filler_sentence_of_the_simulator_states_a_fact():
    for sentence in (*ALL_FIXED_SENTENCES, *EN_FILLERS, *ZH_FILLERS):
        for script in SCRIPTS:
            assert covered_facts(script, [sentence]) == frozenset(), (script.id, sentence)


# ---- parsing ----
@pytest.mark.parametrize(("override", "message"), [
    ({"facts": []}, "'facts' must be a non-empty list"),
    ({"facts": [{"key": "x"}]}, "'ask' must be a non-empty string"),
    ({"facts": [{"key": [], "ask": "x"}]}, "'key' must be a phrase or a list"),
    ({"max_turns": 0}, "'max_turns' must be an integer >= 1"),
    ({"rules": ["missing", "beg"]}, "unknown rule(s) ['beg']"),
    ({"followups": {"missing": "What about {topic}?"}}, "uses ['topic']"),
    ({"prompt": ""}, "'prompt' must be a non-empty string"),
    ({"reference": ""}, "'reference' (the goal's final answer) is required"),
    ({"persona": {"think_time_s": [3, 1]}}, "think_time_s must be [low, high]"),
])
def test_bad_scripts_say_what_is_wrong(override, message):
    with pytest.raises(ScriptError, match="session script t1") as info:
        make(**override)
    assert message in str(info.value)


def test_keys_are_casefolded_alternatives():
    script = make()
    assert script.facts[1].keys == ("three minutes", "3 minutes")
    assert covered_facts(script, ["Steep it 3 MINUTES."]) == {1}


# ---- the rules ----
def test_opening_then_missing_facts_two_at_a_time():
    script = make(rules=["missing"])
    assert next_turn(script, frozenset(), 0, 0, 0, ()).followup == "opening"
    turn = next_turn(script, frozenset({1}), 1, 1, 5, ("opening",))
    assert (turn.followup, turn.asks, turn.text) == \
        ("missing", (0, 2), "Thanks. What about the water and what to add?")


@pytest.mark.parametrize(("covered", "last_new", "last_words", "used", "followup", "asks"), [
    (frozenset(), 0, 5, ("opening",), "rephrase", ()),                          # no progress: rephrase
    (frozenset(), 0, 5, ("opening", "rephrase"), "structured", (0, 1, 2)),     # not twice in a row
    (frozenset({0}), 1, 50, ("opening",), "shorter", (1, 2)),                   # too long for the persona
    (frozenset({0}), 1, 5, ("opening",), "structured", (1, 2)),                 # >= 2 missing, first time
    (frozenset({0}), 1, 5, ("opening", "structured"), "missing", (1, 2)),       # structured only once
    (frozenset({0, 1}), 1, 5, ("opening",), "missing", (2,)),                   # one missing: not structured
])
def test_rules_apply_in_order(covered, last_new, last_words, used, followup, asks):
    turn = next_turn(make(), covered, len(used), last_new, last_words, used)
    assert (turn.followup, turn.asks) == (followup, asks)


def test_follow_up_texts_fill_the_templates():
    script = make()
    assert next_turn(script, frozenset(), 1, 0, 5, ("opening",)).text == \
        "That does not answer my question. Let me put it another way: What is the way to brew tea?"
    assert next_turn(script, frozenset({0}), 1, 1, 5, ("opening",)).text == \
        "Please answer in 2 points: how long and what to add."
    zh = make(lang="zh", rules=["missing"], facts=[{"key": "a", "ask": "甲"}, {"key": "b", "ask": "乙"},
                                                   {"key": "c", "ask": "丙"}], asks_per_turn=3,
              reference="a。b。c。")
    assert next_turn(zh, frozenset(), 1, 1, 5, ("opening",)).text == "谢谢。那么甲、乙和丙呢？"


@pytest.mark.parametrize(("covered", "turns", "ok", "ttft", "e2e", "verdict"), [
    ({0, 1, 2}, 1, False, 10, 10, SessionVerdict("abandoned", "error")),
    # slow but complete: the user had left
    ({0, 1, 2}, 1, True, 501, 600, SessionVerdict("abandoned", "ttft")),
    ({0}, 1, True, 400, 2001, SessionVerdict("abandoned", "e2e")),
    ({0, 1, 2}, 4, True, 400, 2000, SessionVerdict("completed")),
    ({0, 1}, 4, True, 400, 2000, SessionVerdict("max_turns")),
    ({0, 1}, 3, True, None, None, SessionVerdict()),
])
def test_judge_order(covered, turns, ok, ttft, e2e, verdict):
    assert judge(make(), frozenset(covered), turns, ok=ok, ttft_ms=ttft, e2e_ms=e2e) == verdict


def test_patience_scale():
    script = make()
    assert judge(script, frozenset(), 1, ok=True, ttft_ms=900, e2e_ms=100, patience_scale=2.0) == \
        SessionVerdict()
    assert judge(script, frozenset(), 1, ok=True, ttft_ms=300, e2e_ms=100, patience_scale=0.5) == \
        SessionVerdict("abandoned", "ttft")
    assert judge(script, frozenset(), 1, ok=True, ttft_ms=1e9, e2e_ms=1e9, patience_scale=0) == \
        SessionVerdict()
    assert judge(script, frozenset(), 1, ok=False, ttft_ms=1, e2e_ms=1, patience_scale=0) == \
        SessionVerdict("abandoned", "error")


def test_conversation_history_grows_by_two_messages_per_turn():
    conversation = Conversation(make(rules=["missing"]))
    sizes = []
    for answer in ("Boil the water.", "Then wait.", "Add milk and steep for three minutes."):
        sizes.append(len(conversation.ask(conversation.next_turn())))
        new = conversation.answer(answer, ttft_ms=10, e2e_ms=100)
    assert sizes == [1, 3, 5]
    assert new == (1, 2) and conversation.verdict == SessionVerdict("completed") and conversation.turns == 3
    assert [m["role"] for m in conversation.messages] == ["user", "assistant"] * 3
    with pytest.raises(RuntimeError, match="already ended"):
        conversation.ask(conversation.next_turn())


def test_a_failed_answer_is_not_added_to_the_history():
    conversation = Conversation(make())
    conversation.ask(conversation.next_turn())
    assert conversation.answer("", ok=False) == ()
    assert conversation.verdict == SessionVerdict("abandoned", "error") and len(conversation.messages) == 1


@pytest.mark.parametrize(("text", "words"),
                         [("one two  three", 3), ("首字延迟", 4), ("第一个token的时间", 7), ("", 0)])
def test_word_count(text, words):
    assert word_count(text) == words

"""L3 fact errors: the checker (fingerprint.facts), its rows and rate, the report row and the SLO gate."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest

from fourfold.data import DATA_DIR
from fourfold.errors import UsageError
from fourfold.fingerprint.facts import Fact, check_answer, fact_error_rate, load_facts, parse_facts
from fourfold.fingerprint.rag import check_facts
from fourfold.fingerprint.score import ScoreRow, summarize
from fourfold.gates.slo import parse_spec, parse_table
from fourfold.gates.slo_verdict import evaluate
from fourfold.measure.record import RequestRecord
from fourfold.reports.compare import CompareSettings, GroupSample, compare_groups

CORPUS = DATA_DIR / "rag" / "corpus.jsonl"
QUESTIONS = DATA_DIR / "rag" / "questions.jsonl"

VELORA = [
    Fact("Velora Systems", "founded", "1994", "date", ("founded", "established")),
    Fact("Velora Systems", "founder", "Mara Quell", "name", ("founded by", "founder")),
    Fact("Velora Systems", "headquarters", "Tarnwick", "name", ("headquartered", "based in")),
    Fact("Velora Systems", "country", "Valdoria", "name", ("headquartered", "based in")),
    Fact("Velora Systems", "staff", "3450", "number", ("employs", "staff")),
    Fact("Velora Systems", "chief executive", "Ilse Varn", "name", ("chief executive",)),
]


@pytest.mark.parametrize(("answer", "checked", "errors"), [
    ("Velora Systems was founded in 1994 by Mara Quell.", 2, 0),                 # correct
    ("Velora Systems employs about 3,450 people.", 1, 0),                        # number with a comma
    ("Velora Systems employs about 3460 people.", 1, 1),                         # slipped number
    ("Velora Systems was founded in 1995 by Mara Quell.", 2, 1),                 # slipped year
    ("Velora Systems was established in 1996.", 1, 1),                           # slipped year, other cue
    ("Velora Systems was founded in 1994 by Mara Reeve.", 2, 1),                 # slipped name
    ("Velora Systems was founded in 1994 by Ilse Varn.", 2, 1),                  # another fact's name
    ("Velora Systems is headquartered in Tarnwick, Valdoria.", 2, 0),            # two names, one sentence
    ("Velora Systems is headquartered in Holmwick, Valdoria.", 2, 1),            # slipped city
    ("Velora Systems is headquartered in Tarnwick, Ostreva.", 2, 1),             # slipped country
    ("Founded in 1994, Velora Systems employs many people.", 1, 0),              # the year is no staff count
    ("Velora Systems makes routers. It was founded in 1994.", 1, 0),             # subject in another sentence
    ("The Lune river runs through Tarnwick.", 0, 0),                             # unrelated: subject absent
    ("Velora Systems makes good routers.", 0, 0),                                # subject, no cue
    ("Velora Systems was founded by its chief executive.", 0, 0),                # cue, no value
])
def test_check_answer(answer, checked, errors):
    result = check_answer(answer, VELORA)
    assert (result.checked, result.errors) == (checked, errors), result.outcomes


def test_no_facts_checks_nothing():
    assert check_answer("Velora Systems was founded in 1995.", []).checked == 0
    assert fact_error_rate([check_answer("Velora Systems was founded in 1995.", [])]) is None


def test_gold_value_wins_over_a_contradicting_retrieved_source():
    directory = [Fact("Velora Systems", "founded", "1991", "date", ("founded",))]
    assert check_answer("Velora Systems was founded in 1994.", VELORA, directory).errors == 0
    assert check_answer("Velora Systems was founded in 1991.", VELORA, directory).errors == 1
    # without gold documents, the retrieved documents' values are the reference
    assert check_answer("Velora Systems was founded in 1991.", [], directory).errors == 0


def test_outcomes_say_what_was_stated():
    result = check_answer("Velora Systems was founded in 1995 by Mara Quell.", VELORA)
    assert ("Velora Systems", "founded", "1994", "contradicted", "1995") in result.outcomes
    assert ("Velora Systems", "founder", "mara quell", "supported", "") in result.outcomes


def test_fact_error_rate_counts_answers_not_facts():
    checks = [check_answer(a, VELORA) for a in (
        "Velora Systems was founded in 1995 by Mara Reeve.",        # two errors: one answer
        "Velora Systems was founded in 1994.",
        "The Lune river runs through Tarnwick.")]                   # unchecked: not in the denominator
    assert fact_error_rate(checks) == 0.5


@pytest.mark.parametrize(("raw", "message"), [
    ({"a": 1}, "a list"),
    ([{"subject": "x", "attribute": "y", "value": "1"}], "needs subject"),
    ([{"subject": "x", "attribute": "y", "value": "1", "kind": "colour"}], "not one of"),
])
def test_parse_facts_rejects_malformed(raw, message):
    with pytest.raises(ValueError, match=message):
        parse_facts(raw)


def test_parse_facts_defaults_cues_to_the_attribute():
    (fact,) = parse_facts([{"subject": "X", "attribute": "launched", "value": 2011, "kind": "date"}])
    assert fact.cues == ("launched",) and fact.value == "2011"


# ---- the bundled corpus ----
def _questions() -> list[dict]:
    return [json.loads(line) for line in QUESTIONS.read_text(encoding="utf-8").splitlines()]


def _slip(reference: str, gold: list[Fact]) -> str:
    """The reference with the first gold value it states replaced by a wrong one of its kind."""
    for fact in gold:
        if fact.value in reference and fact.value not in fact.subject:
            wrong = (str(int(fact.value) + 1) if fact.kind != "name"
                     else " ".join(["Zorvik", "Quarnel", "Pym"][:len(fact.value.split())]))
            return reference.replace(fact.value, wrong)
    raise AssertionError(f"no gold value in {reference!r}")


def test_bundled_corpus_facts_back_every_reference_answer():
    facts = load_facts(CORPUS)
    questions = _questions()
    assert len(facts) == 168 and sum(len(fs) for fs in facts.values()) == 848
    for q in questions:
        gold = [f for doc in q["gold_ids"] for f in facts.get(doc, ())]
        ok = check_answer(q["reference"], gold)
        assert ok.checked >= 1 and ok.errors == 0, (q["id"], q["reference"], ok.outcomes)
        slipped = check_answer(_slip(q["reference"], gold), gold)
        assert slipped.errors >= 1, (q["id"], _slip(q["reference"], gold), slipped.outcomes)


def test_bundled_facts_are_in_their_documents_text():
    for line in CORPUS.read_text(encoding="utf-8").splitlines():
        doc = json.loads(line)
        for fact in parse_facts(doc.get("facts")):
            assert fact.value in doc["text"] and fact.subject in doc["text"], (doc["id"], fact)


# ---- rows, quality block, report row, SLO gate ----
def _record(rid: str, text: str, gold: list[str], retrieved: list[str]) -> RequestRecord:
    return RequestRecord(request_id=rid, item_id=rid, level="l3", scenario="rag", text=text,
                         extra={"gold_ids": gold, "retrieved_ids": retrieved})


def test_check_facts_fills_rows_and_the_quality_block(tmp_path: Path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(json.dumps({"id": "d1", "title": "T", "text": "Velora Systems was founded in 1994.",
                                  "facts": [{"subject": "Velora Systems", "attribute": "founded",
                                             "value": "1994", "kind": "date"}]}) + "\n")
    records = [_record("a", "Velora Systems was founded in 1994.", ["d1"], ["d1"]),
               _record("b", "Velora Systems was founded in 1997.", ["d1"], []),
               _record("c", "Something else entirely.", ["d1"], ["d1"])]
    rows = [ScoreRow(request_id=r.request_id, item_id=r.item_id, level="l3", scenario="rag") for r in records]
    assert check_facts(rows, records, corpus).startswith("measured: 1 facts")
    assert [(r.fact_checked, r.fact_errors, r.fact_error) for r in rows] == \
        [(1, 0, False), (1, 1, True), (0, 0, None)]
    block = summarize(rows)
    assert (block["fact_checked_n"], block["fact_error_rate"]) == (2, 0.5)
    assert rows[1].to_dict()["fact_error"] is True


def test_without_facts_the_rate_is_not_measured_never_zero(tmp_path: Path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(json.dumps({"id": "d1", "title": "T",
                                  "text": "Velora Systems was founded in 1994."}) + "\n")
    records = [_record("a", "Velora Systems was founded in 1997.", ["d1"], ["d1"])]
    rows = [ScoreRow(request_id="a", item_id="a", level="l3", scenario="rag")]
    assert check_facts(rows, records, corpus).startswith("not measured")
    block = summarize(rows)
    assert block["fact_error_rate"] is None and block["fact_checked_n"] == 0
    (verdict,) = evaluate(parse_spec("fact_error_rate<10%"), {"quality": {"total": block}})
    assert verdict.status == "no_data" and "labelled fact" in verdict.reason


def test_slo_gate_is_a_ceiling():
    summary = {"quality": {"total": {"fact_error_rate": 0.124},
                           "by_scenario": {"l3:rag": {"fact_error_rate": 0.05}}}}
    (miss,) = evaluate(parse_spec("fact_error_rate<10%"), summary)
    (ok,) = evaluate(parse_spec("fact_error_rate@l3:rag<10%"), summary)
    assert (miss.status, miss.measured, ok.status) == ("miss", 0.124, "pass")
    (bare,) = parse_table({"fact_error_rate": 0.1}, where="slo.toml")
    assert (bare.op, bare.threshold) == ("<=", 0.1)


def _facts_sample(errors: int, n: int) -> GroupSample:
    values = np.array([1.0] * errors + [0.0] * (n - errors))
    return GroupSample(fact_error=values,
                       fact_error_items=np.array([f"q{i}" for i in range(n)], dtype=object))


def test_report_row_is_lower_is_better_with_a_ci():
    settings = CompareSettings(resamples=500)
    base, cand = _facts_sample(62, 500), _facts_sample(25, 500)     # 12.4 % -> 5.0 %, same items
    (row,) = [r for r in compare_groups("l3:rag", base, cand, settings) if r.metric == "fact_error_rate"]
    assert (row.baseline, row.candidate, row.better, row.unit) == \
        (pytest.approx(12.4), pytest.approx(5.0), "lower", "%")
    assert row.ci_low < row.delta < row.ci_high < 0 and row.verdict == "better"
    same = [r for r in compare_groups("l3:rag", base, _facts_sample(62, 500), settings)
            if r.metric == "fact_error_rate"]
    assert same[0].verdict == "no change"       # the same answers judged the same
    assert not [r for r in compare_groups("l1:x", GroupSample(), GroupSample(), settings)
                if r.metric == "fact_error_rate"]


def test_a_malformed_fact_is_one_usage_error_with_file_and_line(tmp_path: Path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"id": "d1", "text": "x"}\n{"id": "d2", "text": "y", "facts": [{"subject": "X"}]}\n')
    with pytest.raises(UsageError, match=r"corpus.jsonl:2: a fact needs subject"):
        check_facts([], [], corpus)


def test_the_check_finds_exactly_the_simulators_planted_slips():
    """The simulator's generated answers (reworded, reordered, chatty, with slips): every answer with
    a planted slip is a fact error, and no answer without one is."""
    sim = pytest.importorskip("fourfold.targets.sim.paraphrase")
    facts = load_facts(CORPUS)
    knobs = sim.GenerationKnobs(paraphrase_rate=0.5, reorder_rate=0.5, chatter_rate=0.5, slip_rate=0.5)
    outcomes = []
    for seed in range(5):
        rng = random.Random(seed)
        for q in _questions():
            gold = [f for doc in q["gold_ids"] for f in facts.get(doc, ())]
            text, slips = sim.generate(q["reference"], knobs, rng, q["prompt"])
            result = check_answer(text, gold)
            assert result.checked >= 1 and (result.errors > 0) == bool(slips), (text, slips, result.outcomes)
            outcomes.append(bool(slips))
    assert 0.2 < sum(outcomes) / len(outcomes) < 0.5          # slips planted where there is a value to slip

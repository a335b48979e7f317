"""L3 fact errors: numbers, years and names an answer states, held against the corpus's labelled facts.

A corpus document may carry ``facts``: ``[{"subject", "attribute", "value", "kind", "cues"?}]``,
``kind`` one of ``number``, ``date``, ``name``; ``cues`` are the words that state the attribute in
a sentence (default: the attribute's own words), e.g. ``{"subject": "Velora Systems", "attribute":
"founded", "value": "1994", "kind": "date", "cues": ["founded", "established"]}``.

:func:`check_answer` (pure, no model) checks one answer against the facts of its question's gold
documents and of the documents the service retrieved:

1. the expected value of a (subject, attribute) is the gold documents' value(s) when a gold
   document states it, else the retrieved documents' (a contradicting source never overrides gold);
2. a fact is looked for only when its subject occurs in the answer (the subject's capitalised words
   and digits, case-insensitive), and only in sentences where one of its cues occurs (a cue word
   matches a word with the same first five letters: "founded" matches "founding");
3. in such a sentence, the stated values of the fact's kind are the years (1500-2199) and ISO dates
   for ``date``, the numbers for ``number`` (commas dropped), the runs of capitalised words with as
   many words as the expected value for ``name`` (leading stop words, cue words and the subject's
   words left out); values of the other facts checked in the same sentence are left out too (a
   founding year does not contradict a staff count);
4. the expected value in the sentence: **supported**; other values of the kind and not the expected
   one: **contradicted** (a fact error); neither: not stated. Contradicted in any sentence wins.

``fact_checked`` = supported + contradicted facts; ``fact_errors`` = contradicted facts. Over a
run, ``fact_error_rate`` = answers with ≥ 1 error / answers with ≥ 1 checked fact; ``None`` ("not
measured", never 0) when no answer had a checkable fact, e.g. a corpus without ``facts``.

Limits: a value stated in words ("nineteen ninety-four"), a pronoun-only answer that never names
its subject, a name written in lower case, or a paraphrase that uses none of the cues is not
checked; a stray number or capitalised word in a cue sentence that is not the expected value
counts as a contradiction.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fourfold.workloads.items import jsonl_lines

__all__ = ["FACT_KINDS", "Fact", "FactCheck", "check_answer", "fact_error_rate", "load_facts", "parse_facts"]

FACT_KINDS = ("number", "date", "name")
PREFIX = 5
STOP = frozenset("the a an it its in on at of by this that these their our his her he she they who which "
                 "when where what and but also as for from with".split())
_SENTENCE = re.compile(r"(?<=[.!?;])\s+|\n+")
_WORD = re.compile(r"\d[\d,]*(?:\.\d+)?|[^\W\d_][\w'-]*")
_YEAR = re.compile(r"(?<![\d,.])(?:1[5-9]\d\d|2[01]\d\d)(?!\d|[,.]\d)")
_ISO_DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")
_NUMBER = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?")


@dataclass(frozen=True)
class Fact:
    subject: str
    attribute: str
    value: str
    kind: str
    cues: tuple[str, ...] = ()

    @property
    def key(self) -> tuple[str, str]:
        return (self.subject.casefold(), self.attribute.casefold())


@dataclass(frozen=True)
class FactCheck:
    """One answer's result: (subject, attribute, expected, status, stated) per looked-for fact."""

    supported: int
    errors: int
    outcomes: tuple[tuple[str, str, str, str, str], ...] = ()

    @property
    def checked(self) -> int:
        return self.supported + self.errors


def parse_facts(raw: Any) -> list[Fact]:
    """A document's ``facts`` list as :class:`Fact` (ValueError on a malformed one)."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ValueError("facts must be a list of {subject, attribute, value, kind}")
    facts = []
    for entry in raw:
        if not isinstance(entry, dict) or not all(entry.get(k) not in (None, "") for k in
                                                   ("subject", "attribute", "value", "kind")):
            raise ValueError(f"a fact needs subject, attribute, value and kind, got {entry!r}")
        kind = str(entry["kind"])
        if kind not in FACT_KINDS:
            raise ValueError(f"fact kind {kind!r} is not one of {', '.join(FACT_KINDS)}")
        cues = entry.get("cues") or [str(entry["attribute"])]
        facts.append(Fact(str(entry["subject"]), str(entry["attribute"]), str(entry["value"]), kind,
                          tuple(str(c) for c in cues)))
    return facts


def load_facts(path: str | Path) -> dict[str, list[Fact]]:
    """doc id -> its facts, for the documents of a corpus JSONL that have any."""
    out: dict[str, list[Fact]] = {}
    for n, line in jsonl_lines(path):
        try:
            data = json.loads(line)
            facts = parse_facts(data.get("facts")) if isinstance(data, dict) else []
        except ValueError as exc:
            raise ValueError(f"{path}:{n}: {exc}") from None
        if facts:
            out[str(data["id"])] = facts
    return out


# ---- pieces of a sentence ----
def _words(text: str) -> list[str]:
    return _WORD.findall(text)


def _stem(word: str) -> str:
    return word.casefold()[:PREFIX]


def _has_cue(stems: set[str], cues: Sequence[str]) -> bool:
    return any(all(_stem(w) in stems for w in _words(cue)) for cue in cues)


def _subject_words(subject: str) -> list[str]:
    words = _words(subject)
    key = [w for w in words if w[0].isupper() or w[0].isdigit()]
    return [w.casefold() for w in (key or words)]


def _norm_name(text: str) -> str:
    return " ".join(_words(text)).casefold()


def _number(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def _names(sentence: str, skip: set[str]) -> list[str]:
    """Runs of capitalised words (a number may follow one), broken by punctuation; leading stop
    and cue words dropped."""
    runs: list[list[str]] = [[]]
    end = 0
    for match in _WORD.finditer(sentence):
        word = match.group(0)
        joined = not sentence[end:match.start()].strip()
        end = match.end()
        if word[0].isupper() or (runs[-1] and joined and word[0].isdigit()):
            if runs[-1] and not joined:
                runs.append([])
            runs[-1].append(word)
        elif runs[-1]:
            runs.append([])
    out = []
    for run in runs:
        while run and (run[0].casefold() in STOP or _stem(run[0]) in skip):
            run.pop(0)
        if run:
            out.append(" ".join(run))
    return out


def _stated(fact: Fact, sentence: str, cue_stems: set[str]) -> list[str]:
    """The values of ``fact.kind`` a sentence states, normalised for comparison."""
    if fact.kind == "date":
        return ([m.group(0) for m in _ISO_DATE.finditer(sentence)]
                + [m.group(0) for m in _YEAR.finditer(sentence)])
    if fact.kind == "number":
        return [f"{n:g}" for n in (_number(m.group(0)) for m in _NUMBER.finditer(sentence)) if n is not None]
    subject = set(_subject_words(fact.subject))
    width = len(_words(fact.value))
    names = [_norm_name(n) for n in _names(sentence, cue_stems)]
    return [n for n in names if len(n.split()) == width and not set(n.split()) <= subject]


def _norm(fact: Fact, value: str) -> str:
    if fact.kind == "number":
        n = _number(value.strip())
        return value.strip() if n is None else f"{n:g}"
    if fact.kind == "name":
        return _norm_name(value)
    return value.strip()


# ---- the check ----
def _expected(gold: Iterable[Fact],
              retrieved: Iterable[Fact]) -> dict[tuple[str, str], tuple[Fact, set[str]]]:
    out: dict[tuple[str, str], tuple[Fact, set[str]]] = {}
    for fact in gold:
        out.setdefault(fact.key, (fact, set()))[1].add(_norm(fact, fact.value))
    from_gold = set(out)
    for fact in retrieved:
        if fact.key not in from_gold:
            out.setdefault(fact.key, (fact, set()))[1].add(_norm(fact, fact.value))
    return out


def check_answer(answer: str, gold: Iterable[Fact], retrieved: Iterable[Fact] = ()) -> FactCheck:
    """Check one answer's stated values against the facts (see module docstring)."""
    expected = _expected(gold, retrieved)
    answer_words = {w.casefold() for w in _words(answer)}
    relevant = {key: pair for key, pair in expected.items()
                if set(_subject_words(pair[0].subject)) <= answer_words}
    if not relevant:
        return FactCheck(0, 0)
    cue_stems = {_stem(w) for fact, _ in relevant.values() for cue in fact.cues for w in _words(cue)}
    status: dict[tuple[str, str], tuple[str, str]] = {}
    for sentence in _SENTENCE.split(answer):
        stems = {_stem(w) for w in _words(sentence)}
        here = {key: pair for key, pair in relevant.items() if _has_cue(stems, pair[0].cues)}
        for key, (fact, values) in here.items():
            stated = _stated(fact, sentence, cue_stems)
            if not stated:
                continue
            others = {_norm(fact, v) for k, (_, vs) in here.items() if k != key for v in vs}
            if values & set(stated) or (fact.kind == "name" and any(
                    re.search(rf"\b{re.escape(v)}\b", _norm_name(sentence)) for v in values)):
                status.setdefault(key, ("supported", ""))
                continue
            wrong = [v for v in stated if v not in others]
            if wrong:
                status[key] = ("contradicted", wrong[0])
    outcomes = tuple((relevant[k][0].subject, relevant[k][0].attribute, "|".join(sorted(relevant[k][1])),
                      s, v) for k, (s, v) in sorted(status.items()))
    errors = sum(s == "contradicted" for s, _ in status.values())
    return FactCheck(len(status) - errors, errors, outcomes)


def fact_error_rate(checks: Iterable[FactCheck]) -> float | None:
    """Answers with ≥ 1 fact error / answers with ≥ 1 checked fact (None: none checked)."""
    judged = [c for c in checks if c.checked]
    return sum(c.errors > 0 for c in judged) / len(judged) if judged else None

"""Multi-turn sessions in the simulator (pure): answers that reveal a goal's facts step by step.

The session scripts in ``data/sessions/*.jsonl`` (read here directly, without ``measure`` or
``levels``) give each conversation a goal: facts, each with key phrases and the way a user asks
for it, and a reference final answer with one sentence per fact. A chat request whose *first*
user message is a script's opening question is a session turn, answered from that script:

- facts already *revealed* are those whose key phrase appears in an earlier assistant message of
  the history the client sent (the simulator keeps no per-session state: the history is the
  session, as with a real chat API);
- the first answer states ``round(session_first_share × facts)`` facts (at least one; with a
  share of 1 it is the reference answer itself); every later answer states
  ``session_facts_per_turn`` facts not yet revealed, or none with probability
  ``session_miss_rate`` (an off-target answer), facts the last user message asks about first;
- the last user message sets the form: "in N points" (or 分N点) → a numbered list of every
  fact revealed so far plus the new ones; "briefly", "shorter", "too long" (简短, 太长) → only
  the new facts' sentences; anything else → a lead sentence (in a first answer, the reference's
  sentences that state no fact, when it has any) and the new facts' sentences.

The profile's quality knobs (dropped or filler sentences) then apply as to any answer, so a
dropped fact sentence stays unrevealed. Under a profile without jitter or perturbation, the
number of turns each script needs follows from these counts alone (see ``stepwise.json``).
"""

from __future__ import annotations

import json
import math
import random
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from fourfold.data import bundled
from fourfold.targets.sim.tokens import is_chinese

DEFAULT_SESSIONS_DIR = bundled("sessions")
_SENTENCE_RE = re.compile(r".+?(?:[.!?](?=\s|$)|[。！？]|$)\s*", re.S)
_STRUCTURED_RE = re.compile(
    r"\bin (?:\d+|two|three|four|five|six|seven|eight|nine|ten) (?:points|bullets|items)\b|numbered list"
    r"|分\s*[\d二两三四五六七八九十]+\s*[点条]", re.I)
_SHORT_RE = re.compile(r"\b(?:briefly|brief|shorter|too long|in short)\b|简短|太长|简单说", re.I)

EN_LEADS_FIRST = ("Here is the short answer.", "Good question.", "Let me start with the main point.")
EN_LEADS_MORE = ("You are right, I left that out.", "Sure, here is more detail.",
                 "Good point, let me add that.")
EN_MISSES = ("It depends on your workload and on how the system is configured.",
             "There are several factors to weigh, and the best choice varies from case to case.")
ZH_LEADS_FIRST = ("这是一个好问题。", "先说最重要的一点。")
ZH_LEADS_MORE = ("你说得对，我刚才漏掉了。", "好的，补充如下。")
ZH_MISSES = ("这取决于具体的场景和配置。", "需要综合考虑多种因素，不同情况下答案也不同。")
ALL_FIXED_SENTENCES = (EN_LEADS_FIRST + EN_LEADS_MORE + EN_MISSES + ZH_LEADS_FIRST + ZH_LEADS_MORE + ZH_MISSES
                       + ("Here is the answer in points:", "分点回答如下："))


@dataclass(frozen=True)
class SessionGoal:
    """One script as the simulator needs it; ``keys`` and ``asks`` are casefolded."""

    id: str
    opening: str
    reference: str
    keys: tuple[tuple[str, ...], ...]
    asks: tuple[str, ...]
    sentences: tuple[str, ...]       # the reference sentence stating each fact
    chinese: bool = False
    intro: str = ""                  # reference sentences stating no fact (opens a first answer)

    @property
    def n_facts(self) -> int:
        return len(self.keys)

    def revealed_in(self, text: str) -> set[int]:
        folded = text.casefold()
        return {i for i, keys in enumerate(self.keys) if any(k in folded for k in keys)}


@dataclass(frozen=True)
class SessionKnobs:
    """The profile's session fields (targets/profiles/README.md)."""

    first_share: float = 1.0
    facts_per_turn: int = 1
    miss_rate: float = 0.0


@dataclass(frozen=True)
class SessionAnswer:
    text: str
    new_facts: tuple[int, ...]
    revealed_before: int


def split_sentences(text: str) -> list[str]:
    return [s.strip() for line in text.split("\n") for s in _SENTENCE_RE.findall(line) if s.strip()]


def goal_from_dict(data: dict) -> SessionGoal | None:
    """A goal from one script line, or None when the line is not a usable session script."""
    opening, reference, facts = data.get("prompt"), data.get("reference"), data.get("facts")
    if (not isinstance(opening, str) or not isinstance(reference, str) or not isinstance(facts, list)
            or not facts):
        return None
    sentences = split_sentences(reference)
    keys, asks, stated = [], [], []
    for fact in facts:
        raw = fact.get("key") if isinstance(fact, dict) else None
        alternatives = tuple(k.strip().casefold() for k in ([raw] if isinstance(raw, str) else raw or [])
                             if isinstance(k, str) and k.strip())
        ask = fact.get("ask") if isinstance(fact, dict) else None
        if not alternatives or not isinstance(ask, str):
            return None
        keys.append(alternatives)
        asks.append(ask.strip().casefold())
        stated.append(next((s for s in sentences if any(k in s.casefold() for k in alternatives)), ""))
    zh = is_chinese(reference)
    intro = ("" if zh else " ").join(s for s in sentences if s not in stated)
    return SessionGoal(str(data.get("id", "")), opening.strip(), reference, tuple(keys), tuple(asks),
                       tuple(stated), zh, intro)


class SessionBook:
    """Opening question -> goal, from JSONL files or directories of them."""

    def __init__(self, goals: Iterable[SessionGoal] = ()) -> None:
        self._by_opening = {goal.opening: goal for goal in goals}

    def __len__(self) -> int:
        return len(self._by_opening)

    @classmethod
    def load(cls, paths: Sequence[Path] = (DEFAULT_SESSIONS_DIR,)) -> SessionBook:
        goals: list[SessionGoal] = []
        for path in paths:
            path = Path(path)
            files = sorted(path.glob("*.jsonl")) if path.is_dir() else [path] if path.is_file() else []
            for file in files:
                goals.extend(_read_goals(file))
        return cls(goals)

    def find(self, messages: Sequence[tuple[str, str]]) -> SessionGoal | None:
        """The goal whose opening question is the history's first user message."""
        for role, content in messages:
            if role == "user":
                return self._by_opening.get(content.strip())
        return None


def _read_goals(path: Path) -> list[SessionGoal]:
    goals = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            try:
                data = json.loads(line)
            except ValueError:
                continue
            goal = goal_from_dict(data) if isinstance(data, dict) else None
            if goal is not None:
                goals.append(goal)
    return goals


def first_count(n_facts: int, share: float) -> int:
    """Facts in a first answer: ``share × n`` rounded half up, at least 1, at most n."""
    return max(1, min(n_facts, math.floor(share * n_facts + 0.5 + 1e-9)))


def session_rng(seed: int, goal_id: str, n_messages: int, last_user: str, occurrence: int) -> random.Random:
    return random.Random(f"{seed}\x1fsession\x1f{goal_id}\x1f{n_messages}\x1f{last_user}\x1f{occurrence}")


def session_answer(goal: SessionGoal, messages: Sequence[tuple[str, str]], knobs: SessionKnobs,
                   rng: random.Random) -> SessionAnswer:
    """The next assistant answer of a session (see the module docstring)."""
    before: set[int] = set()
    assistant_turns = 0
    for role, content in messages:
        if role == "assistant":
            assistant_turns += 1
            before |= goal.revealed_in(content)
    last_user = next((content for role, content in reversed(messages) if role == "user"), "")
    first = assistant_turns == 0
    if first and knobs.first_share >= 1.0:
        return SessionAnswer(goal.reference, tuple(range(goal.n_facts)), 0)
    unrevealed = [i for i in range(goal.n_facts) if i not in before and goal.sentences[i]]
    miss = rng.random() < knobs.miss_rate         # drawn every turn: later draws stay aligned
    if first:
        count = first_count(goal.n_facts, knobs.first_share)
    else:
        count = 0 if miss else max(0, knobs.facts_per_turn)
    folded = last_user.casefold()
    asked = [i for i in unrevealed if goal.asks[i] and goal.asks[i] in folded]
    new = (asked + [i for i in unrevealed if i not in asked])[:count]
    zh = goal.chinese
    sep = "" if zh else " "
    if _STRUCTURED_RE.search(last_user) and (new or before):
        listed = sorted((before & {i for i in range(goal.n_facts) if goal.sentences[i]}) | set(new))
        intro = "分点回答如下：" if zh else "Here is the answer in points:"
        text = "\n".join([intro] + [f"{k}. {goal.sentences[i]}" for k, i in enumerate(listed, 1)])
    elif not new:
        text = rng.choice(ZH_MISSES if zh else EN_MISSES)
    else:
        body = sep.join(goal.sentences[i] for i in new)
        if _SHORT_RE.search(last_user):
            text = body
        else:
            leads = ((ZH_LEADS_FIRST if first else ZH_LEADS_MORE) if zh
                     else (EN_LEADS_FIRST if first else EN_LEADS_MORE))
            lead = rng.choice(leads)          # drawn even when the intro is used: later draws stay aligned
            text = (goal.intro if first and goal.intro else lead) + sep + body
    return SessionAnswer(text, tuple(new), len(before))


__all__ = ["ALL_FIXED_SENTENCES", "DEFAULT_SESSIONS_DIR", "SessionAnswer", "SessionBook", "SessionGoal",
           "SessionKnobs", "first_count", "goal_from_dict", "session_answer", "session_rng",
           "split_sentences"]

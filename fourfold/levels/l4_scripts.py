"""L4 session scripts and the rules a simulated user follows (pure: no sockets, no Locust).

A script (one line of ``data/sessions/*.jsonl``, format in ``data/sessions/README.md``) is what
one user wants from a conversation: the *goal* (facts, each a short key phrase that must appear
in some answer, and a reference final answer), the opening question, the follow-up rules, the
maximum number of turns and a persona (think time, patience, preferred answer length).

:class:`Conversation` keeps the chat history of one session. After each answer
:func:`judge` decides whether the session ends (in this order):

1. ``abandoned``: the response failed (``error``), or its TTFT / E2E exceeded the persona's
   patience × ``--patience-scale`` (``ttft`` / ``e2e``; judged when the response ended, so its
   latency is still measured). A slow answer that completes the goal is still abandoned: the
   user had left.
2. ``completed``: every goal fact is covered by the answers so far.
3. ``max_turns``: the user has asked ``max_turns`` times.

Otherwise :func:`next_turn` writes the next user message from the script's ``rules``, tried in
order (``missing`` always applies, so it is the fallback):

- ``rephrase``: the last answer covered no new fact (and the last follow-up was no rephrase):
  ask the opening question again in other words;
- ``shorter``: the last answer was longer than the persona's ``max_words``: ask briefly for
  what is still missing;
- ``structured``: two or more facts are missing and no structured follow-up was used yet: ask
  for the missing facts "in N points";
- ``missing``: ask about the first ``asks_per_turn`` missing facts.

Coverage is a case-insensitive substring test of each fact's key phrases (any alternative)
against the assistant answers: string checks only, never a model, so the rules cannot block the
gevent hub while streams are being timed.
"""

from __future__ import annotations

import json
import string
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fourfold.errors import ScriptError
from fourfold.workloads.items import jsonl_lines

OUTCOMES = ("completed", "max_turns", "abandoned")
ABANDON_REASONS = ("ttft", "e2e", "error")
FOLLOWUPS = ("opening", "rephrase", "shorter", "structured", "missing")
RULES = ("rephrase", "shorter", "structured", "missing")
TEMPLATE_FIELDS = frozenset({"asks", "n", "rephrase", "opening"})

DEFAULT_TEMPLATES = {
    "en": {
        "missing": "Thanks. What about {asks}?",
        "rephrase": "That does not answer my question. Let me put it another way: {rephrase}",
        "shorter": "That is too long for me. Briefly: {asks}?",
        "structured": "Please answer in {n} points: {asks}.",
    },
    "zh": {
        "missing": "谢谢。那么{asks}呢？",
        "rephrase": "这没有回答我的问题。我换个说法：{rephrase}",
        "shorter": "太长了，请简短地说说{asks}。",
        "structured": "请分{n}点回答：{asks}。",
    },
}
JOINERS = {"en": (", ", " and "), "zh": ("、", "和")}


@dataclass(frozen=True)
class NeededFact:
    """One thing the user needs: key phrases (any one counts) and how the user asks for it."""

    keys: tuple[str, ...]
    ask: str

    def covered_by(self, folded_text: str) -> bool:
        """True when ``folded_text`` (already ``casefold()``-ed) contains one of the keys."""
        return any(key in folded_text for key in self.keys)


@dataclass(frozen=True)
class Persona:
    name: str = "user"
    think_time_s: tuple[float, float] = (1.0, 3.0)
    patience_ttft_ms: float | None = None
    patience_e2e_ms: float | None = None
    max_words: int | None = None


@dataclass(frozen=True)
class SessionScript:
    id: str
    opening: str
    reference: str
    facts: tuple[NeededFact, ...]
    max_turns: int
    persona: Persona = field(default_factory=Persona)
    rephrase: str = ""
    rules: tuple[str, ...] = ("missing",)
    templates: dict[str, str] = field(default_factory=dict, hash=False, compare=False)
    asks_per_turn: int = 2
    max_tokens: int | None = None
    lang: str = "en"


@dataclass(frozen=True)
class Turn:
    """What the user says next, and why (``followup`` is one of FOLLOWUPS)."""

    text: str
    followup: str
    asks: tuple[int, ...] = ()


@dataclass(frozen=True)
class SessionVerdict:
    """How the session stands after an answer; ``outcome`` is "" while it goes on."""

    outcome: str = ""
    abandon_reason: str = ""

    @property
    def ended(self) -> bool:
        return bool(self.outcome)


# ---- reading scripts ----
def script_from_dict(data: dict[str, Any]) -> SessionScript:
    """Build and check a script (raises ScriptError saying what is wrong and where)."""
    sid = str(data.get("id") or "")
    where = f"session script {sid or '(no id)'}"
    try:
        opening = _text(data, "prompt", where)
        reference = data.get("reference") or (data.get("references") or [""])[0]
        if not isinstance(reference, str) or not reference.strip():
            raise ScriptError(f"{where}: 'reference' (the goal's final answer) is required")
        raw_facts = data.get("facts")
        if not isinstance(raw_facts, list) or not raw_facts:
            raise ScriptError(f"{where}: 'facts' must be a non-empty list of {{key, ask}}")
        facts = tuple(_fact(raw, f"{where} fact {i}") for i, raw in enumerate(raw_facts))
        max_turns = data.get("max_turns")
        if isinstance(max_turns, bool) or not isinstance(max_turns, int) or max_turns < 1:
            raise ScriptError(f"{where}: 'max_turns' must be an integer >= 1, got {max_turns!r}")
        rules = tuple(data.get("rules") or ("missing",))
        unknown = sorted(set(rules) - set(RULES))
        if unknown:
            raise ScriptError(f"{where}: unknown rule(s) {unknown}; valid: {', '.join(RULES)}")
        lang = str(data.get("lang") or "en")
        templates = {**DEFAULT_TEMPLATES.get(lang, DEFAULT_TEMPLATES["en"]), **(data.get("followups") or {})}
        for name, template in templates.items():
            names = {f for _, f, _, _ in string.Formatter().parse(template) if f}
            if names - TEMPLATE_FIELDS:
                raise ScriptError(f"{where}: follow-up {name!r} uses {sorted(names - TEMPLATE_FIELDS)}; "
                                  f"valid fields: {', '.join(sorted(TEMPLATE_FIELDS))}")
        return SessionScript(
            id=sid, opening=opening, reference=reference, facts=facts, max_turns=max_turns,
            persona=_persona(data.get("persona") or {}, where), rephrase=str(data.get("rephrase") or opening),
            rules=rules, templates=templates, asks_per_turn=max(1, int(data.get("asks_per_turn", 2))),
            max_tokens=data.get("max_tokens"), lang=lang)
    except (TypeError, ValueError) as exc:
        if isinstance(exc, ScriptError):
            raise
        raise ScriptError(f"{where}: {exc}") from exc


def load_scripts(path: str | Path) -> list[SessionScript]:
    """Every script of a JSONL file (blank lines and ``#`` comments skipped)."""
    scripts = []
    for n, line in jsonl_lines(path):
        try:
            scripts.append(script_from_dict(json.loads(line)))
        except ValueError as exc:
            raise ScriptError(f"{path}:{n}: {exc}") from exc
    if not scripts:
        raise ScriptError(f"{path}: no session scripts found")
    return scripts


def _text(data: dict[str, Any], name: str, where: str) -> str:
    value = data.get(name)
    if not isinstance(value, str) or not value.strip():
        raise ScriptError(f"{where}: {name!r} must be a non-empty string")
    return value.strip()


def _fact(raw: Any, where: str) -> NeededFact:
    if not isinstance(raw, dict):
        raise ScriptError(f"{where}: expected an object with 'key' and 'ask'")
    keys = raw.get("key")
    keys = [keys] if isinstance(keys, str) else keys
    if not isinstance(keys, list) or not keys or not all(isinstance(k, str) and k.strip() for k in keys):
        raise ScriptError(f"{where}: 'key' must be a phrase or a list of phrases")
    ask = raw.get("ask")
    if not isinstance(ask, str) or not ask.strip():
        raise ScriptError(f"{where}: 'ask' must be a non-empty string")
    return NeededFact(tuple(k.strip().casefold() for k in keys), ask.strip())


def _persona(raw: dict[str, Any], where: str) -> Persona:
    think = raw.get("think_time_s", (1.0, 3.0))
    low, high = ((float(think), float(think)) if isinstance(think, (int, float))
                 else (float(think[0]), float(think[1])))
    if low < 0 or high < low:
        raise ScriptError(f"{where}: persona think_time_s must be [low, high] with 0 <= low <= high")
    patience = raw.get("patience") or {}
    max_words = raw.get("max_words")
    return Persona(name=str(raw.get("name") or "user"), think_time_s=(low, high),
                   patience_ttft_ms=_opt_float(patience.get("ttft_ms")),
                   patience_e2e_ms=_opt_float(patience.get("e2e_ms")),
                   max_words=int(max_words) if max_words else None)


def _opt_float(value: Any) -> float | None:
    return None if value is None else float(value)


# ---- the rules (pure) ----
def covered_facts(script: SessionScript, answers: list[str] | tuple[str, ...]) -> frozenset[int]:
    """Indexes of the goal facts that some answer contains."""
    folded = [a.casefold() for a in answers]
    return frozenset(i for i, fact in enumerate(script.facts) if any(fact.covered_by(t) for t in folded))


def word_count(text: str) -> int:
    """Words of an answer; a CJK character counts as one word."""
    n = 0
    for word in text.split():
        cjk = sum(1 for ch in word if "\u3400" <= ch <= "\u9fff")
        latin = any(ch.isascii() and ch.isalnum() for ch in word)
        n += cjk + latin if cjk else 1
    return n


def join_asks(script: SessionScript, asks: list[str]) -> str:
    comma, last = JOINERS.get(script.lang, JOINERS["en"])
    return asks[0] if len(asks) == 1 else comma.join(asks[:-1]) + last + asks[-1]


def next_turn(script: SessionScript, covered: frozenset[int], turns: int, last_new: int,
              last_words: int, used: tuple[str, ...]) -> Turn:
    """The next user message (see the module docstring); ``turns`` = turns already taken."""
    if turns == 0:
        return Turn(script.opening, "opening")
    missing = [i for i in range(len(script.facts)) if i not in covered]
    max_words = script.persona.max_words
    for rule in (*script.rules, "missing"):
        if rule == "rephrase" and last_new == 0 and used[-1:] != ("rephrase",):
            return Turn(_fill(script, "rephrase", []), "rephrase")
        if rule == "shorter" and max_words is not None and last_words > max_words and missing:
            asks = missing[: script.asks_per_turn]
            return Turn(_fill(script, "shorter", asks), "shorter", tuple(asks))
        if rule == "structured" and len(missing) >= 2 and "structured" not in used:
            return Turn(_fill(script, "structured", missing), "structured", tuple(missing))
        if rule == "missing" and missing:
            asks = missing[: script.asks_per_turn]
            return Turn(_fill(script, "missing", asks), "missing", tuple(asks))
    return Turn(_fill(script, "rephrase", []), "rephrase")    # nothing missing: only reached by misuse


def _fill(script: SessionScript, name: str, asks: list[int]) -> str:
    return script.templates[name].format(
        asks=join_asks(script, [script.facts[i].ask for i in asks]) if asks else "",
        n=len(asks), rephrase=script.rephrase, opening=script.opening)


def judge(script: SessionScript, covered: frozenset[int], turns: int, *, ok: bool,
          ttft_ms: float | None, e2e_ms: float | None, patience_scale: float = 1.0) -> SessionVerdict:
    """Whether the session ends after this answer (see the module docstring for the order).

    ``patience_scale`` multiplies the persona's patience; 0 means it never runs out.
    """
    persona = script.persona
    if not ok:
        return SessionVerdict("abandoned", "error")
    for reason, limit_ms, value_ms in (("ttft", persona.patience_ttft_ms, ttft_ms),
                                       ("e2e", persona.patience_e2e_ms, e2e_ms)):
        if limit_ms is not None and value_ms is not None and patience_scale > 0 \
                and value_ms > limit_ms * patience_scale:
            return SessionVerdict("abandoned", reason)
    if len(covered) == len(script.facts):
        return SessionVerdict("completed")
    if turns >= script.max_turns:
        return SessionVerdict("max_turns")
    return SessionVerdict()


@dataclass
class Conversation:
    """One session's state: the history sent each turn and what the answers covered so far."""

    script: SessionScript
    patience_scale: float = 1.0
    messages: list[dict[str, str]] = field(default_factory=list)
    answers: list[str] = field(default_factory=list)
    used: list[str] = field(default_factory=list)
    covered: frozenset[int] = frozenset()
    last_new: int = 0
    last_words: int = 0
    verdict: SessionVerdict = field(default_factory=SessionVerdict)

    @property
    def turns(self) -> int:
        return len(self.used)

    def next_turn(self) -> Turn:
        return next_turn(self.script, self.covered, self.turns, self.last_new, self.last_words,
                         tuple(self.used))

    def ask(self, turn: Turn) -> tuple[dict[str, str], ...]:
        """Add the user's message; returns the whole history to send (1, 3, 5, ... messages)."""
        if self.verdict.ended:
            raise RuntimeError(f"session {self.script.id} already ended ({self.verdict.outcome})")
        self.messages.append({"role": "user", "content": turn.text})
        self.used.append(turn.followup)
        return tuple(dict(m) for m in self.messages)

    def answer(self, text: str, *, ok: bool = True, ttft_ms: float | None = None,
               e2e_ms: float | None = None) -> tuple[int, ...]:
        """Take the assistant's answer; returns the indexes of newly covered facts."""
        new: tuple[int, ...] = ()
        if ok:
            self.messages.append({"role": "assistant", "content": text})
            self.answers.append(text)
            before = self.covered
            self.covered = covered_facts(self.script, self.answers)
            new = tuple(sorted(self.covered - before))
            self.last_words = word_count(text)
        self.last_new = len(new)
        self.verdict = judge(self.script, self.covered, self.turns, ok=ok, ttft_ms=ttft_ms, e2e_ms=e2e_ms,
                             patience_scale=self.patience_scale)
        return new


__all__ = ["ABANDON_REASONS", "FOLLOWUPS", "OUTCOMES", "RULES", "Conversation", "NeededFact", "Persona",
           "ScriptError", "SessionScript", "Turn", "SessionVerdict", "covered_facts", "judge", "load_scripts",
           "next_turn", "script_from_dict", "word_count"]

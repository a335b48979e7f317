"""Answers *generated* from the reference, not copied (pure): paraphrased, reordered, with factual slips.

A real model never repeats the reference word for word, so a simulator that does makes every
answer score ~0.98 against its reference and hides any quality change. Three knobs of a profile,
all drawn from the request's own ``random.Random`` (after :mod:`fourfold.targets.sim.perturb`,
which shortens and adds filler):

- ``shorten_rate``, ``aside_rate``: per sentence of a prose line of two or more sentences, left
  out / followed by an off-topic aside (:func:`fourfold.targets.sim.perturb.perturb`'s sentence
  knobs, here for generated answers only: session turns keep theirs, so L4's facts are not hidden
  by them; a one-sentence answer, such as an L3 fact, keeps its one sentence and gains no aside);
- ``paraphrase_rate``: per prose sentence, the sentence is reworded: phrases swapped for
  equivalents from a fixed table ("for example" -> "for instance", "因为" -> "由于"), and, in a
  line of two or more sentences, an opener ("In short, ", "简单来说，") put in front of it;
- ``chatter_rate``: per answer of more than one sentence, a conversational preamble ("Good
  question. Here is an overview.") and a closing line ("I hope this helps.") framing the content,
  as chat models write;
- ``reorder_rate``: per prose line of three or more sentences, two adjacent sentences after the
  first swap places;
- ``slip_rate``: per answer, one *factual slip*: a number, a year or a person's name stated in
  the answer is replaced by a wrong one (a year moved by 1-7, another number by 10-40 %, a
  surname, a city ("in Castrel, Valdoria") or a river ("the Lune river") swapped for another);
  :class:`Slip` records what changed, and the plan header lists the slips
  (``"slips": [["year", "2012", "2015"]]``), so tests and the fact check can count them.
  An answer with nothing to slip on gets none.

List items keep their marker and their place (only their phrases change) and table rows are
never touched (structure compliance stays the list-item knob's business); slips may land
anywhere. With every rate at 0 nothing is drawn and the text comes back unchanged.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from fourfold.targets.sim.perturb import ITEM_LINE_RE, TABLE_ROW_RE, QualityKnobs, perturb
from fourfold.targets.sim.tokens import is_chinese

__all__ = ["GenerationKnobs", "Slip", "generate", "slip_candidates"]

_SENTENCE_RE = re.compile(r".+?(?:[.!?](?=\s|$)|[。！？]|$)\s*", re.S)

EN_PHRASES = (
    ("for example", "for instance"), ("because", "since"), ("However,", "That said,"), ("such as", "like"),
    ("is a way of", "is a method for"), ("uses", "relies on"), ("important", "key"),
    ("helps", "makes it easier"), ("can be", "may be"), ("also", "as well"), ("many", "numerous"),
    ("large", "big"), ("small", "little"), ("quickly", "fast"), ("usually", "typically"),
    ("often", "frequently"), ("makes", "renders"), ("improves", "boosts"), ("reduces", "cuts"),
    ("increases", "raises"), ("the same", "identical"), ("in order to", "to"), ("a lot of", "plenty of"),
    ("very", "highly"), ("needs", "requires"), ("was founded in", "was established in"),
    ("is headquartered in", "has its head office in"), ("employs about", "has roughly"),
    ("the current chief executive is", "the company is now led by"),
)
EN_OPENERS = ("In short, ", "Put simply, ", "Broadly, ", "In practice, ", "Essentially, ")
ZH_PHRASES = (("因为", "由于"), ("可以", "能够"), ("但是", "不过"), ("例如", "比如"), ("重要", "关键"),
              ("通常", "一般"), ("非常", "十分"), ("所以", "因此"), ("使用", "采用"), ("提高", "提升"))
ZH_OPENERS = ("简单来说，", "总体而言，", "换句话说，", "实际上，")
EN_PREAMBLES = ("Good question. Here is an overview based on what is generally known.",
                "Sure, happy to help with that. Below is a short explanation.",
                "Certainly. Let me walk you through the main ideas.")
EN_CLOSINGS = ("I hope this helps; let me know if you would like more detail on any part.",
               "Feel free to ask a follow-up question if anything is unclear.",
               "If you tell me more about your situation, I can tailor the answer further.")
ZH_PREAMBLES = ("好的，下面简要说明一下。", "这是个好问题，我来概括一下要点。", "当然可以，以下是主要内容。")
ZH_CLOSINGS = ("希望对你有帮助，如需更多细节欢迎继续提问。", "如果还有不清楚的地方，可以随时追问。")

YEAR_RE = re.compile(r"\b(1[5-9]\d\d|20\d\d)\b")
NUMBER_RE = re.compile(r"(?<![\w.])(\d{2,}(?:,\d{3})*)(?![\w.])")
NAME_RE = re.compile(r"(?<=[a-z,] )([A-Z][a-z]+) ([A-Z][a-z]+)\b")   # "... is Mara Kettering"
PLACE_RE = re.compile(r"\b(?:in|near|through) ([A-Z][a-z]+)(?=, [A-Z])")   # "in Castrel, Valdoria"
RIVER_RE = re.compile(r"\b[Tt]he ([A-Z][a-z]+) river\b")
CITIES = ("Castrel", "Yewfold", "Fernrel", "Pikewick", "Elmmere", "Stavhaven", "Holmbridge", "Kesthaven",
          "Dunstead")
RIVERS = ("Lune", "Serra", "Ottow", "Brisk", "Idle", "Marrow")
SURNAMES = ("Halvorsen", "Okafor", "Brandt", "Moreau", "Castell", "Ivers", "Lindgren", "Pryce", "Tanaka",
            "Voss")


@dataclass(frozen=True)
class GenerationKnobs:
    """The generation rates of a profile (see module docstring)."""

    paraphrase_rate: float = 0.0
    reorder_rate: float = 0.0
    slip_rate: float = 0.0
    chatter_rate: float = 0.0
    shorten_rate: float = 0.0
    aside_rate: float = 0.0

    @property
    def active(self) -> bool:
        return bool(self.paraphrase_rate or self.reorder_rate or self.slip_rate or self.chatter_rate
                    or self.shorten_rate or self.aside_rate)


@dataclass(frozen=True)
class Slip:
    """One planted factual error: ``kind`` (year, number, name), the right and the wrong value."""

    kind: str
    right: str
    wrong: str


def generate(text: str, knobs: GenerationKnobs, rng: random.Random,
             prompt: str = "") -> tuple[str, list[Slip]]:
    """The answer as this version words it, and the slips planted in it (see module docstring);
    ``prompt`` names what a slip must not touch (the entity asked about)."""
    if not knobs.active:
        return text, []
    lines = text.split("\n")
    if knobs.shorten_rate or knobs.aside_rate:
        sentence_knobs = QualityKnobs(knobs.shorten_rate, knobs.aside_rate)
        lines = [perturb(line, sentence_knobs, rng, None) if _prose_sentences(line) >= 2 else line
                 for line in lines]
    if knobs.paraphrase_rate or knobs.reorder_rate:
        lines = [line if not line.strip() or TABLE_ROW_RE.match(line)
                 else _reword_item(line, knobs, rng) if ITEM_LINE_RE.match(line)
                 else _reword_line(line, knobs, rng) for line in lines]
    text = "\n".join(lines)
    if knobs.chatter_rate and _long(lines) and rng.random() < knobs.chatter_rate:
        chinese = is_chinese(text)
        preambles, closings = (ZH_PREAMBLES, ZH_CLOSINGS) if chinese else (EN_PREAMBLES, EN_CLOSINGS)
        text = f"{preambles[rng.randrange(len(preambles))]}\n{text}\n{closings[rng.randrange(len(closings))]}"
    slips: list[Slip] = []
    if knobs.slip_rate and rng.random() < knobs.slip_rate:
        text, slip = _plant_slip(text, rng, prompt)
        if slip is not None:
            slips.append(slip)
    return text, slips


def _long(lines: list[str]) -> bool:
    """More than one sentence or line of content (a one-sentence fact gets no chatter)."""
    return sum(1 for line in lines if line.strip()) > 1 or sum(map(_prose_sentences, lines)) > 1


def _prose_sentences(line: str) -> int:
    """Sentences of a prose line (0 for a blank line, a list item or a table row)."""
    if not line.strip() or ITEM_LINE_RE.match(line) or TABLE_ROW_RE.match(line):
        return 0
    return len([s for s in _SENTENCE_RE.findall(line) if s.strip()])


def _reword_line(line: str, knobs: GenerationKnobs, rng: random.Random) -> str:
    sentences = [s.strip() for s in _SENTENCE_RE.findall(line) if s.strip()]
    if not sentences:
        return line
    chinese = is_chinese(line)
    if knobs.reorder_rate and len(sentences) >= 3 and rng.random() < knobs.reorder_rate:
        i = rng.randrange(1, len(sentences) - 1)
        sentences[i], sentences[i + 1] = sentences[i + 1], sentences[i]
    if knobs.paraphrase_rate:
        opener = len(sentences) > 1           # a one-sentence answer (an L3 fact) is not lengthened
        sentences = [_paraphrase(s, chinese, rng, opener) if rng.random() < knobs.paraphrase_rate else s
                     for s in sentences]
    indent = line[: len(line) - len(line.lstrip())]
    return indent + ("" if chinese else " ").join(sentences)


_EN_RES = tuple((re.compile(rf"\b{re.escape(old)}\b" if old[-1].isalpha() else rf"\b{re.escape(old)}"), new)
                for old, new in EN_PHRASES)


def _swap_phrases(text: str, chinese: bool) -> str:
    if chinese:
        for old, new in ZH_PHRASES:
            text = text.replace(old, new)
        return text
    for rx, new in _EN_RES:
        text = rx.sub(new, text)
    return text


def _reword_item(line: str, knobs: GenerationKnobs, rng: random.Random) -> str:
    """A list item keeps its marker and stays one item; only its phrases change."""
    if not knobs.paraphrase_rate or rng.random() >= knobs.paraphrase_rate:
        return line
    return _swap_phrases(line, is_chinese(line))


def _paraphrase(sentence: str, chinese: bool, rng: random.Random, with_opener: bool = True) -> str:
    openers = ZH_OPENERS if chinese else EN_OPENERS
    sentence = _swap_phrases(sentence, chinese)
    opener = openers[rng.randrange(len(openers))]
    if not with_opener:
        return sentence
    if chinese:
        return sentence if sentence[:6].find("，") >= 0 else opener + sentence
    if sentence.split(" ", 1)[0].endswith(","):       # it opens with a phrase already ("Incidentally, ...")
        return sentence
    if sentence[:1].isupper() and not sentence[1:2].isupper() and not NAME_RE.match(sentence):
        sentence = sentence[0].lower() + sentence[1:]
    return opener + sentence


def slip_candidates(text: str, prompt: str = "") -> list[tuple[str, int, int, str]]:
    """(kind, start, end, value) of every fact a slip may change: years, numbers of two or more
    digits, two-word person-like names, cities and rivers, none that the prompt mentions."""
    out: list[tuple[str, int, int, str]] = []
    years = {m.start() for m in YEAR_RE.finditer(text)}
    out += [("year", m.start(), m.end(), m.group(1)) for m in YEAR_RE.finditer(text)]
    out += [("number", m.start(), m.end(), m.group(1)) for m in NUMBER_RE.finditer(text)
            if m.start() not in years]
    out += [("name", m.start(2), m.end(2), m.group(2)) for m in NAME_RE.finditer(text)
            if m.group(0) not in prompt and m.group(1) not in prompt]
    out += [("place", m.start(1), m.end(1), m.group(1)) for m in PLACE_RE.finditer(text)
            if m.group(1) not in prompt]
    out += [("river", m.start(1), m.end(1), m.group(1)) for m in RIVER_RE.finditer(text)
            if m.group(1) not in prompt]
    return sorted(out, key=lambda c: c[1])


def _plant_slip(text: str, rng: random.Random, prompt: str) -> tuple[str, Slip | None]:
    candidates = slip_candidates(text, prompt)
    if not candidates:
        return text, None
    kind, start, end, value = candidates[rng.randrange(len(candidates))]
    if kind == "year":
        wrong = str(int(value) + rng.choice((-1, 1)) * rng.randint(1, 7))
    elif kind == "number":
        number = int(value.replace(",", ""))
        wrong_n = max(1, round(number * (1 + rng.choice((-1, 1)) * rng.uniform(0.1, 0.4))))
        wrong_n = wrong_n if wrong_n != number else number + 1
        wrong = f"{wrong_n:,}" if "," in value else str(wrong_n)
    else:
        pool = {"place": CITIES, "river": RIVERS}.get(kind, SURNAMES)
        wrong = rng.choice([s for s in pool if s != value])
    return text[:start] + wrong + text[end:], Slip(kind, value, wrong)

"""Quality perturbation of an answer (pure): what makes one simulated version answer worse.

Three independent knobs, all driven by the request's own ``random.Random``:

- ``list_item_drop_rate``: per request, when the answer is a list (numbered, bullets, "一、",
  "①", or table rows) with at least two items and the prompt asked for N items, the last item is
  left out, so the answer delivers N-1 (structure compliance).
- ``drop_sentence_rate``: per sentence of a prose line (never a list item or table row), the
  sentence is left out (a line keeps at least one sentence).
- ``filler_sentence_rate``: per sentence of a prose line, an off-topic sentence is added after it.

With every rate at 0 the text comes back unchanged, byte for byte.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from fourfold.targets.sim.tokens import is_chinese

ITEM_LINE_RE = re.compile(r"^\s*(?:\d+[.)、]|第[一二三四五六七八九十\d]+步|[-*•]\s|[一二三四五六七八九十]+、"
                          r"|[①-⑳]|\(\d+\)|（\d+）)")
TABLE_ROW_RE = re.compile(r"^\s*\|")
TABLE_SEPARATOR_RE = re.compile(r"^\s*\|?\s*:?-{3,}")
_SENTENCE_RE = re.compile(r".+?(?:[.!?](?=\s|$)|[。！？]|$)\s*", re.S)

EN_FILLERS = (
    "Incidentally, many office kitchens run out of coffee on Monday mornings.",
    "On an unrelated note, the weather has been unusually mild this season.",
    "Some people prefer to read long documents on paper rather than on a screen.",
    "As an aside, a good night's sleep improves almost every kind of work.",
    "Interestingly, the first computer bug was a real moth found in a relay.",
    "Many cities now have more bicycles than cars in their historic centres.",
)
ZH_FILLERS = (
    "顺便一提，很多办公室的咖啡在周一早上最先喝完。",
    "另外，今年这个季节的天气格外温和。",
    "有些人更喜欢在纸上而不是屏幕上阅读长文档。",
    "题外话，充足的睡眠几乎能提升所有工作的效率。",
    "有趣的是，很多城市老城区的自行车比汽车还多。",
)


@dataclass(frozen=True)
class QualityKnobs:
    """The three perturbation rates of a profile (see module docstring)."""

    drop_sentence_rate: float = 0.0
    filler_sentence_rate: float = 0.0
    list_item_drop_rate: float = 0.0

    @property
    def active(self) -> bool:
        return bool(self.drop_sentence_rate or self.filler_sentence_rate or self.list_item_drop_rate)


def item_line_indexes(lines: list[str]) -> list[int]:
    """Indexes of list-item lines, or of table body rows when the text has no list items."""
    items = [i for i, line in enumerate(lines) if ITEM_LINE_RE.match(line)]
    if items:
        return items
    rows = [i for i, line in enumerate(lines) if TABLE_ROW_RE.match(line)]
    separators = [i for i in rows if TABLE_SEPARATOR_RE.match(lines[i])]
    if not separators:
        return []
    return [i for i in rows if i > separators[0]]


def count_items(text: str) -> int:
    """Number of list items (or table body rows) in ``text``."""
    return len(item_line_indexes(text.split("\n")))


def perturb(text: str, knobs: QualityKnobs, rng: random.Random, requested_items: int | None) -> str:
    """The answer as this version delivers it (see module docstring)."""
    if not knobs.active:
        return text
    lines = text.split("\n")
    items = item_line_indexes(lines)
    if requested_items and len(items) >= 2 and rng.random() < knobs.list_item_drop_rate:
        del lines[items[-1]]
        items = items[:-1]
    structural = set(items) | {i for i, line in enumerate(lines) if TABLE_ROW_RE.match(line)}
    if knobs.drop_sentence_rate or knobs.filler_sentence_rate:
        lines = [
            line if i in structural or not line.strip() else _perturb_prose(line, knobs, rng)
            for i, line in enumerate(lines)
        ]
    return "\n".join(lines)


def _perturb_prose(line: str, knobs: QualityKnobs, rng: random.Random) -> str:
    sentences = [s.strip() for s in _SENTENCE_RE.findall(line) if s.strip()]
    if not sentences:
        return line
    chinese = is_chinese(line)
    fillers = ZH_FILLERS if chinese else EN_FILLERS
    out: list[str] = []
    changed = False
    kept = 0
    for sentence in sentences:
        if len(sentences) > 1 and rng.random() < knobs.drop_sentence_rate:
            changed = True
        else:
            out.append(sentence)
            kept += 1
        if rng.random() < knobs.filler_sentence_rate:
            out.append(fillers[rng.randrange(len(fillers))])
            changed = True
    if not changed:
        return line
    if not kept:                  # every sentence drawn for dropping: the line keeps its first
        out.insert(0, sentences[0])
    indent = line[: len(line) - len(line.lstrip())]
    return indent + ("" if chinese else " ").join(out)

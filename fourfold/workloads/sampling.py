"""Which dataset items a run sends, and in what order per user (pure, seeded).

Three steps, each a plain function over a list of items:

- :func:`apply_filter` keeps the items whose lengths pass ``--dataset-filter`` (``input<=4096``,
  ``output<=512``; ``<``, ``>``, ``>=`` too; comma-separated, all must hold). The input length is
  counted over every message's text by the counter given (the target's tokenizer, or the
  synthetic word estimate); the output length is the item's ``max_tokens``, else its first
  reference's count; an item with neither passes an ``output`` clause (its length is unknown).
- :func:`sample` draws ``--dataset-sample N`` items without replacement with ``random.Random(seed)``
  (all of them, in that seeded order, when N is at least the dataset's size); users then cycle
  through the sample.
- :func:`user_order` is the endless sequence of item indices user ``k`` sends. Without
  ``--shuffle`` it is today's rotation (start at ``k mod n``, then in file order); with it, each
  pass through the items is a fresh permutation drawn from ``Random(f"{seed}:{k}")``, so user k's
  order is a function of (seed, k) alone: two runs with the same seed send the same items in the
  same order per user.
"""

from __future__ import annotations

import itertools
import operator
import random
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from fourfold.errors import DatasetError, OptionError
from fourfold.workloads.items import Item

_OPS: dict[str, Callable[[int, int], bool]] = {"<=": operator.le, ">=": operator.ge, "<": operator.lt,
                                               ">": operator.gt}
_CLAUSE = re.compile(r"\s*(input|output)\s*(<=|>=|<|>)\s*(\d+)\s*")
FIELDS = ("input", "output")


@dataclass(frozen=True)
class LengthClause:
    """One ``field op tokens`` condition of ``--dataset-filter``."""

    field: str
    op: str
    tokens: int

    def holds(self, length: int | None) -> bool:
        return length is None or _OPS[self.op](length, self.tokens)

    def __str__(self) -> str:
        return f"{self.field}{self.op}{self.tokens}"


def parse_filter(text: str) -> tuple[LengthClause, ...]:
    """``'input<=4096,output<512'`` -> clauses; :class:`OptionError` naming the bad clause."""
    clauses = []
    for part in (text or "").split(","):
        if not part.strip():
            continue
        match = _CLAUSE.fullmatch(part)
        if match is None:
            raise OptionError(f"--dataset-filter {part.strip()!r}: expected input|output followed by "
                              "<=, >=, < or > and a number of tokens, e.g. 'input<=4096,output<=512'")
        clauses.append(LengthClause(match[1], match[2], int(match[3])))
    return tuple(clauses)


def message_text(item: Item) -> str:
    """Every message's text of ``item`` (content parts of type text included), one per line."""
    texts = []
    for message in item.messages:
        content: Any = message.get("content", "")
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts.extend(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return "\n".join(texts)


def input_length(item: Item, count: Callable[[str], int]) -> int:
    """The item's input tokens: a trace entry's own ``input_length``, else ``count`` of its messages."""
    known = item.meta.get("input_length")
    if isinstance(known, int) and not isinstance(known, bool):
        return known
    return count(message_text(item))


def output_length(item: Item, count: Callable[[str], int]) -> int | None:
    """The item's output tokens: ``max_tokens``, else its first reference's count, else None."""
    if item.max_tokens is not None:
        return item.max_tokens
    return count(item.references[0]) if item.references else None


def apply_filter(items: Sequence[Item], clauses: Sequence[LengthClause], count: Callable[[str], int],
                 source: str = "the dataset") -> list[Item]:
    """The items whose lengths keep every clause; :class:`DatasetError` when none is left."""
    if not clauses:
        return list(items)
    wanted = {clause.field for clause in clauses}
    kept = []
    for item in items:
        lengths = {"input": input_length(item, count) if "input" in wanted else None,
                   "output": output_length(item, count) if "output" in wanted else None}
        if all(clause.holds(lengths[clause.field]) for clause in clauses):
            kept.append(item)
    if not kept:
        spec = ",".join(str(c) for c in clauses)
        raise DatasetError(f"--dataset-filter {spec!r} leaves 0 of the {len(items)} items of {source}")
    return kept


def sample(items: Sequence[Item], n: int, seed: int) -> list[Item]:
    """``n`` items drawn without replacement (all of them, shuffled, when ``n >= len(items)``)."""
    return random.Random(seed).sample(list(items), min(n, len(items)))


def user_order(n_items: int, user_index: int, *, shuffle: bool = False, seed: int = 0) -> Iterator[int]:
    """Endless item indices for user ``user_index`` (see the module docstring)."""
    if n_items < 1:
        raise ValueError("no items to send")
    if not shuffle:
        start = user_index % n_items
        return itertools.cycle([*range(start, n_items), *range(start)])
    return _shuffled_passes(n_items, random.Random(f"{seed}:{user_index}"))


def _shuffled_passes(n_items: int, rng: random.Random) -> Iterator[int]:
    order = list(range(n_items))
    while True:
        rng.shuffle(order)
        yield from order


@dataclass(frozen=True)
class Selection:
    """The run's sampling options: which items (filter, then sample) and each user's order."""

    sample_n: int = 0            # 0: every item
    seed: int = 0
    shuffle: bool = False
    filter: str = ""

    @property
    def active(self) -> bool:
        return bool(self.sample_n or self.shuffle or self.filter)

    def select(self, items: Sequence[Item], count: Callable[[str], int],
               source: str = "the dataset") -> list[Item]:
        kept = apply_filter(items, parse_filter(self.filter), count, source)
        return sample(kept, self.sample_n, self.seed) if self.sample_n else kept

    def order(self, n_items: int, user_index: int) -> Iterator[int]:
        return user_order(n_items, user_index, shuffle=self.shuffle, seed=self.seed)


__all__ = ["FIELDS", "LengthClause", "Selection", "apply_filter", "input_length", "message_text",
           "output_length", "parse_filter", "sample", "user_order"]

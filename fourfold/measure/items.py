"""Dataset items: what a level sends, and what a good answer looks like."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Item:
    """One prompt: chat messages, the answer(s) we expect, and level-specific facts."""

    id: str
    messages: tuple[dict[str, str], ...]
    references: tuple[str, ...] = ()
    max_tokens: int | None = None
    meta: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)

    @property
    def prompt(self) -> str:
        """The last user message (what structure compliance and the simulator look at)."""
        for message in reversed(self.messages):
            if message.get("role") == "user":
                return message.get("content", "")
        return ""

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Item:
        if "messages" in data:
            messages = tuple(dict(m) for m in data["messages"])
        else:
            messages = ({"role": "user", "content": data["prompt"]},)
        refs = data.get("references") or ([data["reference"]] if data.get("reference") else [])
        known = {"id", "messages", "prompt", "references", "reference", "max_tokens"}
        return cls(
            id=str(data["id"]),
            messages=messages,
            references=tuple(refs),
            max_tokens=data.get("max_tokens"),
            meta={k: v for k, v in data.items() if k not in known},
        )


def jsonl_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """(line number, text) of every line of a JSONL file that is not blank or a ``#`` comment."""
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            line = line.strip()
            if line and not line.startswith("#"):
                yield n, line


def load_items(path: str | Path) -> list[Item]:
    """Read a JSONL file of items (one JSON object a line, blank lines and # comments skipped)."""
    items = []
    for n, line in jsonl_lines(path):
        try:
            items.append(Item.from_dict(json.loads(line)))
        except (ValueError, KeyError) as exc:
            raise ValueError(f"{path}:{n}: not a valid item ({exc}); expected JSON with id and prompt/messages") from exc
    if not items:
        raise ValueError(f"{path}: no items found")
    return items

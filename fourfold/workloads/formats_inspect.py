"""What fourfold understood of a dataset (``fourfold dataset inspect``) and its conversion to
fourfold's own JSONL (``fourfold dataset convert``). Pure functions over loaded items, plus one
writer.

Lengths are in tokens: with a tokenizer (``--tokenizer``, :mod:`fourfold.workloads.tokenizer`) its
exact counts, else :func:`fourfold.workloads.synthetic.estimate_tokens` (one token per word and one
per other non-space character: the simulator's count, and what ``--dataset-filter`` and
``--synthetic`` use without a tokenizer). Input is every message of the prompt; output is the
item's ``max_tokens``, else its reference's count (as ``--dataset-filter`` counts them:
:func:`fourfold.workloads.sampling.output_length`).
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fourfold.errors import DatasetError
from fourfold.measure.histogram import nearest_rank
from fourfold.workloads.formats import Dataset
from fourfold.workloads.items import Item, file_kind
from fourfold.workloads.sampling import input_length, output_length

EXAMPLES = 3
PREVIEW_CHARS = 160


@dataclass(frozen=True)
class Lengths:
    """min / p50 / p95 / max of a list of token counts (None when there are none)."""

    n: int
    min: int | None
    p50: int | None
    p95: int | None
    max: int | None

    @classmethod
    def of(cls, values: Sequence[int]) -> Lengths:
        if not values:
            return cls(0, None, None, None, None)
        ordered = sorted(values)
        n = len(ordered)
        return cls(n, ordered[0], ordered[nearest_rank(0.50, n) - 1], ordered[nearest_rank(0.95, n) - 1],
                   ordered[-1])


@dataclass(frozen=True)
class Inspection:
    """``fourfold dataset inspect``'s findings."""

    path: str
    format: str
    container: str
    items: int
    with_reference: int
    multi_turn: int
    input: Lengths
    output: Lengths
    counter: str
    examples: tuple[Item, ...]
    columns: tuple[tuple[str, str], ...] = ()


def inspect(dataset: Dataset, count: Callable[[str], int], counter: str) -> Inspection:
    """Count and measure ``dataset``'s items with ``count`` (named ``counter`` in the output)."""

    items = dataset.items
    outputs = [n for n in (output_length(item, count) for item in items) if n is not None]
    turns = sum(1 for item in items if sum(1 for t in item.meta.get("turns") or [] if isinstance(t, dict)
                                           and t.get("role") == "user") > 1)
    return Inspection(
        path=dataset.path, format=dataset.format, container=dataset.container, items=len(items),
        with_reference=sum(1 for item in items if item.references), multi_turn=turns,
        input=Lengths.of([input_length(item, count) for item in items]), output=Lengths.of(outputs),
        counter=counter, examples=tuple(items[:EXAMPLES]), columns=dataset.columns)


def _preview(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= PREVIEW_CHARS else flat[:PREVIEW_CHARS - 1] + "…"


def _row(name: str, lengths: Lengths) -> str:
    if not lengths.n:
        return f"  {name:<7} -"
    return (f"  {name:<7} min {lengths.min}  p50 {lengths.p50}  p95 {lengths.p95}  max {lengths.max}"
            f"  ({lengths.n} items)")


def format_inspection(found: Inspection) -> str:
    """The inspection as plain text for the terminal."""
    container = {"json": "a JSON array", "jsonl": "JSON lines", "csv": "CSV", "parquet": "Parquet"}.get(
        found.container, found.container)
    lines = [f"{found.path}", f"format:     {found.format} ({container})"]
    if found.columns:
        lines.append("columns:    " + ", ".join(f"{field}={column}" for field, column in found.columns))
    lines += [f"items:      {found.items}",
              f"references: {found.with_reference} of {found.items}",
              f"multi-turn: {found.multi_turn} (whole conversations kept in meta['turns'])",
              f"tokens ({found.counter}):", _row("input", found.input), _row("output", found.output),
              "", f"first {len(found.examples)} items:"]
    for item in found.examples:
        system = next((m.get("content") for m in item.messages if m.get("role") == "system"), None)
        lines.append(f"  [{item.id}]" + (f" max_tokens={item.max_tokens}" if item.max_tokens else ""))
        if isinstance(system, str):
            lines.append(f"    system:    {_preview(system)}")
        lines.append(f"    prompt:    {_preview(item.prompt)}"
                     + (f"  (+{len(item.messages) - 1 - (system is not None)} earlier messages)"
                        if len(item.messages) - (system is not None) > 1 else ""))
        if item.references:
            lines.append(f"    reference: {_preview(item.references[0])}")
    return "\n".join(lines)


def inspection_dict(found: Inspection) -> dict[str, Any]:
    """The inspection as JSON (``--json``)."""
    return {"path": found.path, "format": found.format, "container": found.container, "items": found.items,
            "with_reference": found.with_reference, "multi_turn": found.multi_turn,
            "token_counter": found.counter, "input_tokens": vars(found.input),
            "output_tokens": vars(found.output), "columns": [list(pair) for pair in found.columns],
            "examples": [item.to_dict() for item in found.examples]}


def write_jsonl(items: Sequence[Item], out: str | Path) -> int:
    """Write ``items`` as fourfold's own JSONL (written to a new temporary file beside ``out``, then
    renamed over it); the byte count. ``out`` must be a new name or a regular file: a symlink, FIFO,
    device or directory there is a DatasetError, never replaced (as root a rename would replace a
    device node)."""
    path = Path(out)
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        mode = None
    if mode is not None and not stat.S_ISREG(mode):
        raise DatasetError(f"{path}: is {file_kind(mode)}; the output is written only to a regular file or "
                           f"a new name")
    text = "".join(json.dumps(item.to_dict(), ensure_ascii=False, default=str) + "\n" for item in items)
    data = text.encode("utf-8")
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)   # O_EXCL
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        umask = os.umask(0o22)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)          # as a plain write would (mkstemp makes it 0600)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return len(data)


__all__ = ["Inspection", "Lengths", "format_inspection", "inspect", "inspection_dict", "write_jsonl"]

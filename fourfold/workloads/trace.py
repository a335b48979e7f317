"""Timed traces: the Mooncake layout AIPerf replays (``--custom-dataset-type mooncake_trace``).

One JSON object a line::

    {"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": [46, 47, ...]}

- ``timestamp``: when the request arrives, in milliseconds (any origin: replay starts at the
  smallest one); a number in [0, 1e15].
- ``input_length``: input tokens, an integer in [1, 2,000,000]; or ``text_input``, the exact prompt
  text.
- ``output_length``: the answer's tokens, sent as ``max_tokens`` (optional; at most 2,000,000).
- ``hash_ids``: optional; one id per block of :data:`BLOCK_TOKENS` (512) input tokens, in order,
  the last block possibly partial (so at most ``ceil(input_length / 512)`` ids). Entries sharing a
  leading run of ids share that prompt prefix: the prefix-cache case. Each id's block is the same
  text wherever it appears (``synthetic.block_text``); tokens not covered by ids are text unique to
  the entry (``synthetic.make_text`` seeded by the line number).

:func:`entry_from_dict` checks one line (a ValueError naming the field; the format registry of
:mod:`fourfold.workloads.formats` adds the file and line), :func:`entry_item` makes its item: ``meta``
keeps ``arrival_ms`` (the timestamp as written), ``input_length`` and ``hash_ids``, and
:func:`arrival_offsets_s` counts the arrivals from the trace's first timestamp. The format is
registered as ``trace`` (detected from a first line with ``timestamp`` and ``input_length``, or
forced with ``--dataset-format trace``). Prompts follow the word estimate
(:func:`fourfold.workloads.synthetic.estimate_tokens`); :func:`exact_trace_items` makes them exact by
the run's ``--tokenizer``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from fourfold.errors import DatasetError
from fourfold.workloads.format_registry import DatasetFormat, register_format
from fourfold.workloads.items import Item, jsonl_objects
from fourfold.workloads.synthetic import trace_text

BLOCK_TOKENS = 512
MAX_TIMESTAMP_MS = 1e15       # ~31,700 years: Unix-epoch stamps fit, and offsets stay exact to the ms
MAX_TOKENS = 2_000_000        # per entry: beyond any served context; larger would hang building the prompt
FIELDS = frozenset({"timestamp", "input_length", "output_length", "hash_ids", "text_input"})


@dataclass(frozen=True)
class TraceEntry:
    line: int
    timestamp_ms: float
    input_length: int | None
    output_length: int | None
    hash_ids: tuple[int, ...] = ()
    text_input: str | None = None


def is_trace_object(data: Any) -> bool:
    """True for a JSON object that reads as a trace line (``timestamp`` and ``input_length``)."""
    return isinstance(data, dict) and "timestamp" in data and ("input_length" in data or "text_input" in data)


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _short(value: Any) -> str:
    """A value for an error line: a huge integer's repr would be thousands of digits."""
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:20]}...({len(text)} characters)"


def entry_from_dict(data: dict[str, Any], line: int) -> TraceEntry:
    """One trace line; ValueError saying which field is wrong and what it must be."""
    ts = data.get("timestamp")
    if (isinstance(ts, bool) or not isinstance(ts, (int, float)) or not math.isfinite(ts)
            or not 0 <= ts <= MAX_TIMESTAMP_MS):
        raise ValueError("'timestamp' is missing" if ts is None else
                         f"'timestamp' must be a number of milliseconds in [0, {MAX_TIMESTAMP_MS:g}], "
                         f"got {_short(ts)}")
    text = data.get("text_input")
    if text is not None and (not isinstance(text, str) or not text.strip()):
        raise ValueError("'text_input' must be a non-empty text")
    n_in = data.get("input_length")
    if n_in is None and text is None:
        raise ValueError("'input_length' is missing (or give 'text_input')")
    if n_in is not None and (not _count(n_in) or not 1 <= n_in <= MAX_TOKENS):
        raise ValueError(f"'input_length' must be an integer in [1, {MAX_TOKENS}], got {_short(n_in)}")
    n_out = data.get("output_length")
    if n_out is not None and (not _count(n_out) or not 1 <= n_out <= MAX_TOKENS):
        raise ValueError(f"'output_length' must be an integer in [1, {MAX_TOKENS}], got {_short(n_out)}")
    ids = data.get("hash_ids", [])
    if not isinstance(ids, list) or not all(_count(h) and h >= 0 for h in ids):
        raise ValueError("'hash_ids' must be a list of integers >= 0")
    if ids and n_in is not None and len(ids) > math.ceil(n_in / BLOCK_TOKENS):
        raise ValueError(f"'hash_ids' has {len(ids)} blocks of {BLOCK_TOKENS} tokens, more than "
                         f"'input_length' {n_in} fills ({math.ceil(n_in / BLOCK_TOKENS)})")
    return TraceEntry(line, float(ts), n_in, n_out, tuple(ids), text)


def parse_trace(path: str | Path) -> list[TraceEntry]:
    """Every entry of a trace file; :class:`DatasetError` naming the file, line and field."""
    entries = []
    for n, data in jsonl_objects(path):
        try:
            entries.append(entry_from_dict(data, n))
        except ValueError as exc:
            raise DatasetError(f"{path}:{n}: not a trace entry: {exc}") from None
    if not entries:
        raise DatasetError(f"{path}: no trace entries (the file is empty, or holds only blank lines and # "
                           f"comments)")
    return entries


def entry_prompt(entry: TraceEntry, tokenizer: Any = None) -> str:
    """The prompt of an entry: ``text_input`` as given, else its hash-id blocks, then unique text,
    ``input_length`` tokens in all (by ``tokenizer`` when given, else the word estimate)."""

    if entry.text_input is not None:
        return entry.text_input
    return trace_text(list(entry.hash_ids), entry.input_length or 1, seed=entry.line,
                      block_tokens=BLOCK_TOKENS, tokenizer=tokenizer)


def entry_item(entry: TraceEntry, tokenizer: Any = None) -> Item:
    """The item of one entry: id ``t<line>``, the prompt, ``max_tokens`` = ``output_length``."""
    meta: dict[str, Any] = {"arrival_ms": entry.timestamp_ms, "hash_ids": list(entry.hash_ids)}
    if entry.input_length is not None:
        meta["input_length"] = entry.input_length
    return Item(id=f"t{entry.line}", messages=({"role": "user", "content": entry_prompt(entry, tokenizer)},),
                max_tokens=entry.output_length, meta=meta)


def trace_items(entries: Sequence[TraceEntry], tokenizer: Any = None) -> list[Item]:
    """Items for ``entries``, in order."""
    return [entry_item(e, tokenizer) for e in entries]


def exact_trace_items(items: Sequence[Item], tokenizer: Any) -> list[Item]:
    """Trace items with prompts rebuilt to exactly ``input_length`` tokens by ``tokenizer`` (the
    registry reads a file without one); ``text_input`` entries and other items stay as they are."""

    out = []
    for item in items:
        n_tokens, line = item.meta.get("input_length"), item.id[1:]
        if "arrival_ms" not in item.meta or not isinstance(n_tokens, int) or not line.isdigit():
            out.append(item)
            continue
        prompt = trace_text(list(item.meta.get("hash_ids", [])), n_tokens, seed=int(line),
                            block_tokens=BLOCK_TOKENS, tokenizer=tokenizer)
        out.append(replace(item, messages=({"role": "user", "content": prompt},)))
    return out


def load_trace(path: str | Path, tokenizer: Any = None) -> list[Item]:
    """:func:`parse_trace` then :func:`trace_items`."""
    return trace_items(parse_trace(path), tokenizer)


def arrival_offsets_s(items: Iterable[Item], speed: float = 1.0) -> list[float]:
    """Each item's arrival in seconds from the trace's first timestamp, divided by ``speed`` (2: twice
    as fast)."""
    stamps = [float(item.meta["arrival_ms"]) for item in items]
    origin = min(stamps, default=0.0)
    return [(ms - origin) / 1000.0 / speed for ms in stamps]


def is_trace(items: Sequence[Item]) -> bool:
    """True when every item came from a trace (it carries an arrival time)."""
    return bool(items) and all("arrival_ms" in item.meta for item in items)


def _converter(first: dict[str, Any], columns: Any, path: Path) -> Any:
    if columns:
        raise DatasetError(f"{path}: --dataset-column does not apply to a trace (its fields are fixed: "
                           f"{', '.join(sorted(FIELDS))})")
    return lambda record, row: entry_item(entry_from_dict(record, row))


register_format(DatasetFormat("trace", _converter, "Mooncake trace (AIPerf): timestamp ms, input_length, "
                                                   "output_length, hash_ids of 512-token blocks"))

__all__ = ["BLOCK_TOKENS", "TraceEntry", "arrival_offsets_s", "entry_from_dict", "entry_item",
           "exact_trace_items", "entry_prompt", "is_trace", "is_trace_object", "load_trace", "parse_trace",
           "trace_items"]

"""The lines of ``records.jsonl`` as blocks of columns: one fast path and one exact fallback.

Of each record a report needs the SCALARS, the EXTRA_KEYS facts of its ``extra`` and its chunk
offsets (most of a line's bytes, with its answer text); never a Python object per offset.

- **Fast path**: ``_records_scan`` (``reports/_records_scan.c``, compiled by ``pip install``
  where a C compiler is) walks each line of a block once, as a JSON parser would, checking every
  value and reading only the columns: numbers as ``float(json.loads(number))`` reads them, bit
  for bit, straight into columns. A line it cannot read plainly (an escape in a kept text or a key, a
  value of another type, a key missing, anything that is not strict JSON) it hands back.
- **Exact fallback**: each handed-back line, and every line where the scanner was not built, is
  decoded whole (orjson; the :mod:`json` module where orjson refuses, so a line reads as
  ``json.loads`` reads it) and checked: a line that is not JSON (a torn last line of a killed run)
  or a record with a value of the wrong kind (a text where a number goes, offsets that are no
  list of numbers, NaN) is skipped and counted; a line that is JSON but no record at all (not an
  object, a required key missing) raises :class:`~fourfold.errors.RecordsFormatError`
  (:class:`~fourfold.errors.SchemaError` for a newer schema), naming the file and line.
- **Impossible values**, on the blocks of both paths alike (:class:`_Screen`, the rules of
  :mod:`fourfold.rundir.plausible`): a start far from the run's other records, a negative
  latency, NaN or absurd chunk offsets, negative or astronomic tokens: the record is skipped and
  counted with the unreadable lines, so one damaged line can neither sink a report nor make its
  per-second timeline span centuries (a ``started_at`` 1e11 s away once asked for 745 GiB).

A line the scanner reads gives the row the fallback would give, so both paths make the same blocks
(``tests/unit/test_records_native.py``, also on randomly damaged files); rows are in file order.
"""

from __future__ import annotations

import itertools
import json
import math
import operator
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import orjson

from fourfold.errors import RecordsFormatError, SchemaError
from fourfold.measure.metrics import PHASES
from fourfold.measure.record import SCHEMA_VERSION
from fourfold.rundir import plausible

try:
    from fourfold.reports import _records_scan  # compiled from reports/_records_scan.c where a compiler was
except ImportError:  # pragma: no cover - the fallback reads every line then: the same blocks, slower
    _records_scan = None  # type: ignore[assignment]

__all__ = ["BLOCK_BYTES", "EXTRA_KEYS", "NUMBER_COLUMNS", "SCALARS", "TEXT_COLUMNS", "Block", "loads_or_none",
           "read_blocks"]

SCALARS = ("level", "scenario", "variant", "item_id", "warmup", "started_at", "status",
           "error_class", "ttfb_ms", "ttft_ms", "e2e_ms", "queue_ms", "output_tokens", "terminal",
           "conn_reused", *plausible.OPTIONAL_FIELDS)
REQUIRED = ("level", "scenario", "error_class", "started_at")
# read from ``extra``: L4 on the record that ends a session, L3 retrieval quality and the conflict
# flag (true/false: 1/0; :func:`fourfold.measure.rag.annotate`)
EXTRA_KEYS = ("session_completed", "rounds", "recall_at_k", "precision_at_k", "conflict", "tool_call_count",
              "tool_calls_invalid", "session_tool_calls", "inputs", *PHASES)
# the SCALARS as a block holds them: numbers (float64, NaN for null; a flag 0/1) and texts (str or None)
NUMBER_COLUMNS = plausible.NUMBER_FIELDS     # ("started_at", "status", ..., "warmup", "terminal")
FLAG_COLUMNS = ("warmup", "terminal")
TEXT_COLUMNS = plausible.TEXT_FIELDS
OFFSETS = plausible.OFFSETS
BLOCK_BYTES = 16 << 20

# the scanner's columns: (name, kind) with kind 0 number, 1 flag, 2 text, 3 offsets, 4 schema, 5 extra
# (+ 8: a number, flag or text that may be missing: plausible.OPTIONAL_FIELDS, OPTIONAL_TEXT_FIELDS)
_OPTIONAL = 8
_SCAN_COLUMNS = (*((name.encode(), (1 if name in FLAG_COLUMNS else 0)
                    + (_OPTIONAL if name in plausible.OPTIONAL_FIELDS else 0)) for name in NUMBER_COLUMNS),
                 *((name.encode(), 2 + (_OPTIONAL if name in plausible.OPTIONAL_TEXT_FIELDS else 0))
                   for name in TEXT_COLUMNS), (OFFSETS.encode(), 3), (b"schema", 4),
                 (b"extra", 5))
_SCAN_EXTRA = tuple(name.encode() for name in EXTRA_KEYS)
_NUMBER_TYPES = frozenset({int, float, bool})
_NUMBER_OR_NULL = _NUMBER_TYPES | {type(None)}
_TEXT_OR_NULL = frozenset({str, type(None)})
_PLAIN_NUMBERS = tuple(name for name in NUMBER_COLUMNS if name not in FLAG_COLUMNS)   # (the flags come last)
_GET_NUMBERS, _GET_FLAGS, _GET_TEXTS = (operator.itemgetter(*names)
                                        for names in (_PLAIN_NUMBERS, FLAG_COLUMNS, TEXT_COLUMNS))
_NO_FACTS = (math.nan,) * len(EXTRA_KEYS)


class Block(NamedTuple):
    """The records of a block of lines, in file order."""

    nums: np.ndarray            # records x NUMBER_COLUMNS, float64
    texts: list[list[Any]]      # per TEXT_COLUMNS: str or None per record
    extras: np.ndarray          # records x EXTRA_KEYS, float64 (NaN where absent or not a number)
    lens: np.ndarray            # int64: each record's number of chunk offsets
    flat: np.ndarray            # float64: all their chunk offsets, record after record
    starts: np.ndarray          # int64: where each record's line starts in the file
    unreadable: int = 0         # lines skipped: not JSON, a value of the wrong kind, an impossible value
    first_unreadable: str = ""  # "<file>:<line>: skipped ...: <why>" of the first of them
    first_unreadable_at: int = -1   # where that line starts in the file


def read_blocks(path: Path, *, block_bytes: int = BLOCK_BYTES, native: bool | None = None) -> Iterator[Block]:
    """The blocks of ``path``, a records.jsonl (see module docstring). ``native``: read with the
    compiled scanner (True), with the fallback alone (False), or with the scanner when it was built.
    Records with impossible values are left out of every block and counted (:class:`_Screen`)."""
    screen = _Screen(path)
    for block in _blocks(path, block_bytes, native):
        yield screen.apply(block)


def _blocks(path: Path, block_bytes: int, native: bool | None) -> Iterator[Block]:
    if native is None:
        native = _records_scan is not None
    elif native and _records_scan is None:
        raise RuntimeError("fourfold.reports._records_scan was not built (no C compiler at install time?)")
    with open(path, "rb") as fh:
        if not native:
            position = lineno = 0
            while lines := fh.readlines(block_bytes):
                starts = list(itertools.accumulate(map(len, lines), initial=position))
                yield _fallback(path, list(zip(lines, starts, itertools.count(lineno + 1))))
                position, lineno = starts[-1], lineno + len(lines)
            return
        # one buffer for the whole file, refilled in place (a fresh 16 MB object per block costs
        # more in page faults than the scanner spends on it)
        buf = bytearray(block_bytes)
        have = position = lineno = 0
        while True:
            if have == len(buf):           # one line longer than the buffer
                buf.extend(bytes(len(buf)))
            with memoryview(buf) as view:
                got = fh.readinto(view[have:])
                end = (buf.rfind(b"\n", 0, have + got) + 1) if got else have
                if end:
                    block, lineno = _scan(path, view[:end], position, lineno)
                    yield block
                    view[:have + got - end] = view[end:have + got]
            have, position = have + got - end, position + end
            if not got:
                return


def _scan(path: Path, view: memoryview, position: int, lineno: int) -> tuple[Block, int]:
    """One block of whole lines through the scanner; the lines it hands back through the fallback."""
    assert _records_scan is not None
    nums, texts, extras, read, back, starts, lens, flat = _records_scan.scan(
        view, position, _SCAN_COLUMNS, _SCAN_EXTRA, SCHEMA_VERSION)
    line_starts = np.frombuffer(starts, dtype=np.int64)
    block = Block(np.frombuffer(nums).reshape(-1, len(NUMBER_COLUMNS)), list(texts),
                  np.frombuffer(extras).reshape(-1, len(EXTRA_KEYS)), np.frombuffer(lens, dtype=np.int64),
                  np.frombuffer(flat), line_starts[np.frombuffer(read, dtype=np.int64)])
    handed_back = np.frombuffer(back, dtype=np.int64).tolist()
    if handed_back:
        bounds = (line_starts - position).tolist()
        block = _in_file_order(block, _fallback(path, [
            (bytes(view[bounds[i]:bounds[i + 1]]), position + bounds[i], lineno + i + 1)
            for i in handed_back]))
    return block, lineno + len(line_starts) - 1


def _in_file_order(a: Block, b: Block) -> Block:
    """The records of two blocks as one, ordered by where their lines start."""
    starts = np.concatenate([a.starts, b.starts])
    order = np.argsort(starts, kind="stable")
    lens = np.concatenate([a.lens, b.lens])
    first = np.cumsum(lens) - lens                  # where each record's offsets begin in flat
    lens = lens[order]
    take = np.repeat(first[order] - (np.cumsum(lens) - lens), lens) + np.arange(int(lens.sum()))
    index = order.tolist()
    texts = [[both[i] for i in index] for both in (x + y for x, y in zip(a.texts, b.texts))]
    first = min((x for x in (a, b) if x.first_unreadable), key=lambda x: x.first_unreadable_at, default=a)
    return Block(np.concatenate([a.nums, b.nums])[order], texts, np.concatenate([a.extras, b.extras])[order],
                 lens, np.concatenate([a.flat, b.flat])[take], starts[order], a.unreadable + b.unreadable,
                 first.first_unreadable, first.first_unreadable_at)


def _fallback(path: Path, lines: list[tuple[bytes, int, int]]) -> Block:
    """Lines (bytes, file position, line number) decoded whole, in order; blank lines skipped."""
    rows: list[tuple[Any, ...]] = []
    flat: list[Any] = []
    unreadable, first_unreadable, first_at = 0, "", -1
    for line, start, lineno in lines:
        if not line.strip():
            continue
        try:
            data = _loads(line)
        except (ValueError, RecursionError) as exc:    # not JSON: a torn or damaged line
            row: tuple[Any, Any, Any, Any, list[Any]] | str = f"an unreadable line ({len(line)} bytes): {exc}"
        else:
            row = _row(data, path, lineno)             # (no record at all raises)
        if isinstance(row, str):                       # ... or a record with a value of the wrong kind
            unreadable += 1
            if not first_unreadable:
                first_unreadable, first_at = f"{path}:{lineno}: skipped {row}", start
            continue
        numbers, flags, texts, facts, offsets = row
        rows.append((numbers, flags, texts, facts, len(offsets), start))
        flat += offsets
    numbers, flags, texts, facts, lens, starts = zip(*rows) if rows else ((),) * 6
    nums = np.hstack([_floats(list(numbers)).reshape(-1, len(_PLAIN_NUMBERS)),
                      np.array(flags, dtype=bool).reshape(-1, len(FLAG_COLUMNS))])
    return Block(nums, [list(column) for column in zip(*texts)] if rows else [[] for _ in TEXT_COLUMNS],
                 _floats(list(facts)).reshape(-1, len(EXTRA_KEYS)), np.array(lens, dtype=np.int64),
                 _floats(flat), np.array(starts, dtype=np.int64), unreadable, first_unreadable, first_at)


def _floats(values: list[Any]) -> np.ndarray:
    """Numbers (or rows of them) as float64: None is NaN, true/false 1/0, an integer too large for
    a float +-inf (as json reads 1e400)."""
    try:
        return np.array(values, dtype=np.float64)
    except OverflowError:
        return np.array([list(map(_huge, v)) if type(v) is tuple else _huge(v) for v in values],
                        dtype=np.float64)


def _huge(value: Any) -> Any:
    try:
        return float(value) if type(value) is int else value
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def _loads(line: bytes) -> Any:
    """``json.loads(line)``; orjson first (3-4 times faster), json where orjson refuses the line
    (NaN, a lone surrogate, a number too large for a float: json takes them)."""
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        return json.loads(line)


def _row(data: Any, path: Path, lineno: int) -> tuple[Any, Any, Any, Any, list[Any]] | str:
    """The numbers, flags, texts, extra facts and chunk offsets of one decoded record. A number
    is a JSON number, true/false (1/0) or null (NaN; a flag: 0); a text a string or null; the
    offsets a list of numbers or null; ``extra`` facts that are not numbers are NaN. A value of
    another kind (or NaN, which only json's extension writes): why the record is skipped. No
    record at all (not an object, a required key missing, a newer schema) raises."""
    if type(data) is not dict:
        raise RecordsFormatError(f"{path}:{lineno}: expected a JSON object (a fourfold record), "
                                 f"got {type(data).__name__}")
    try:
        numbers, flags, texts = _GET_NUMBERS(data), _GET_FLAGS(data), _GET_TEXTS(data)
    except KeyError:                          # a column missing: null, unless a record must have it
        missing = [k for k in REQUIRED if k not in data]
        if missing:
            raise RecordsFormatError(f"{path}:{lineno}: not a fourfold record (missing "
                                     f"{', '.join(missing)}); is this a run directory written by "
                                     "fourfold?") from None
        numbers, flags, texts = (tuple(map(data.get, names))
                                 for names in (_PLAIN_NUMBERS, FLAG_COLUMNS, TEXT_COLUMNS))
    schema = data.get("schema", 1)
    if type(schema) is not int or schema > SCHEMA_VERSION:
        raise SchemaError(f"{path}:{lineno}: record schema {schema!r} is newer than the {SCHEMA_VERSION} "
                          "this fourfold reads; upgrade fourfold to read this run")
    offsets = data.get(OFFSETS)
    if offsets is None:
        offsets = []
    if not (_NUMBER_OR_NULL.issuperset(map(type, numbers)) and _NUMBER_OR_NULL.issuperset(map(type, flags))
            and _TEXT_OR_NULL.issuperset(map(type, texts)) and type(offsets) is list
            and _NUMBER_TYPES.issuperset(map(type, offsets))):
        return plausible.wrong_kind(data) or "a record with a value of the wrong kind"
    for value in numbers:
        if value != value:                    # NaN (a float; null is None): say which
            return plausible.wrong_kind(data) or "a record with NaN"
    extra = data.get("extra")
    facts = (tuple(_plain_number(extra.get(k)) for k in EXTRA_KEYS) if type(extra) is dict and extra
             else _NO_FACTS)
    return numbers, flags, texts, facts, offsets


def _plain_number(value: Any) -> float:
    """A number or bool from ``extra``; anything else (a text, a list, null) -> NaN."""
    return float(_huge(value)) if type(value) in _NUMBER_TYPES else math.nan


def loads_or_none(text: bytes) -> Any:
    """``json.loads(text)``, or None where it is not JSON (also for :mod:`fourfold.reports.scores`)."""
    try:
        return _loads(text)
    except (ValueError, RecursionError):
        return None


class _Screen:
    """Leaves records with impossible values (:mod:`fourfold.rundir.plausible`) out of the blocks
    of one file, counting them with the unreadable lines; the same rules on the scanner's and the
    fallback's blocks, so both paths keep the same rows."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.anchor = plausible.anchor(path)
        self.first = ""             # the first skipped line of the file (in file order), once found

    def apply(self, block: Block) -> Block:
        n = len(block.nums)
        columns = {name: block.nums[:, j] for j, name in enumerate(NUMBER_COLUMNS)}
        bad = (plausible.impossible_rows(columns, block.flat, block.lens, self.anchor) if n
               else np.zeros(0, bool))
        first, first_at = block.first_unreadable, block.first_unreadable_at
        if bad.any() and not self.first:
            row = int(np.argmax(bad))
            at = int(block.starts[row])
            if not first or at < first_at:
                first, first_at = (f"{self.path}:{_line_number(self.path, at)}: skipped "
                                   f"{self._why(block, row)}", at)
        self.first = self.first or first
        if not bad.any():
            return block._replace(first_unreadable=first, first_unreadable_at=first_at)
        keep = ~bad
        index = np.flatnonzero(keep).tolist()
        return Block(block.nums[keep], [[column[i] for i in index] for column in block.texts],
                     block.extras[keep], block.lens[keep], block.flat[np.repeat(keep, block.lens)],
                     block.starts[keep], block.unreadable + int(bad.sum()), first, first_at)

    def _why(self, block: Block, row: int) -> str:
        values = {name: None if math.isnan(v) else v
                  for name, v in zip(NUMBER_COLUMNS, block.nums[row].tolist())}
        begin = int(block.lens[:row].sum())
        offsets = block.flat[begin:begin + int(block.lens[row])].tolist()
        return plausible.impossible(values, offsets, self.anchor) or "a record with an impossible value"


def _line_number(path: Path, position: int) -> int:
    """The number of the line that starts at byte ``position`` of ``path`` (for one message)."""
    count = 0
    with open(path, "rb") as fh:
        while position > 0 and (chunk := fh.read(min(position, 1 << 20))):
            count += chunk.count(b"\n")
            position -= len(chunk)
    return count + 1

"""Fast reader of ``records.jsonl`` for reports: the columns a comparison needs, and the chunk
offsets reduced to what the statistics use, with bounded memory.

A record line is mostly its chunk offsets (one number per content chunk) and its answer text. The
reader never turns those into Python objects per record:

- **Fast path** (lines written by ``RequestRecord.to_json``: top-level scalars, then
  ``server_timing``/``plan``/``extra``, ``schema`` last): byte searches cut the offsets array and
  the answer text out of the line; the rest, a few hundred bytes of top-level scalars, is decoded
  by one ``json.loads`` per block of lines; the offsets of a block are parsed in one go by pandas'
  C number parser. A key such as ``,"text":"`` cannot occur *inside* a JSON string (every quote
  there is escaped), so the searches only find the real keys.
- **Compiled**: where ``reports/_records_scan.c`` was built (``pip install`` with a C compiler),
  it does the fast path's cuts per block in C, parses the offsets as ``float()`` does and reads
  the SCALARS straight into columns, handing back to the decoders above only the lines it cannot
  read plainly; the table is the same (``tests/unit/test_records_native.py``), 2.3 times faster.
- **Slow path**: any other line (another key order, a line the fast path cannot cut, a record
  whose ``extra`` holds one of ``EXTRA_KEYS``: an L4 session end, an L3 retrieval) is decoded
  whole with ``json.loads``. A line that is not JSON (a torn last line of a killed run) is
  skipped and counted, like :mod:`measure.runread` does.

Per record the reader keeps the scalar columns plus ``n_chunks``, ``max_gap_ms``, ``stalls``
(gaps above the stall threshold) and ``line_offset`` (where the line starts, to fetch the whole
record later for a waveform). Per (level, scenario, variant) it keeps the pooled ITL gaps of ok
records as log-bucket counts (:class:`GapHistogram`, the same buckets as
:class:`measure.histogram.LogHistogram`), output tokens per second of arrival, and the gaps of
an evenly spread sample of ok records (at most ``GAP_SAMPLE_RECORDS``) for the ITL bootstrap.
Warm-up and cancelled records are counted and left out, as in every fourfold statistic.
"""

from __future__ import annotations

import io
import itertools
import json
import math
import operator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pandas as pd
from pandas.api.types import union_categoricals

from fourfold.errors import RecordsFormatError, SchemaError
from fourfold.measure.histogram import ZERO_KEY, bucket_keys
from fourfold.measure.metrics import end_offset_ms_array, is_stall, ok_array, token_seconds_array
from fourfold.measure.record import SCHEMA_VERSION

try:
    from fourfold.reports import (
        _records_scan,  # compiled from reports/_records_scan.c when a compiler was there
    )
except ImportError:  # pragma: no cover - the pure-Python path below does the same, slower
    _records_scan = None  # type: ignore[assignment]

__all__ = ["GAP_SAMPLE_RECORDS", "GapHistogram", "RecordTable", "RecordsFormatError", "read_record_table"]

SCALARS = ("level", "scenario", "variant", "item_id", "warmup", "started_at", "status",
           "error_class", "ttfb_ms", "ttft_ms", "e2e_ms", "queue_ms", "output_tokens", "terminal", "conn_reused")
CATEGORIES = ("level", "scenario", "variant", "item_id", "error_class")
REQUIRED = ("level", "scenario", "error_class", "started_at")
# read from ``extra`` (slow path): L4 on the record that ends a session, L3 retrieval quality
EXTRA_KEYS = ("session_completed", "rounds", "recall_at_k", "precision_at_k")
# the SCALARS as a block holds them: numbers (float64, NaN for null; a flag 0/1) and texts (str or None)
NUMBER_COLUMNS = ("started_at", "status", "ttfb_ms", "ttft_ms", "e2e_ms", "queue_ms", "output_tokens",
                  "conn_reused", "warmup", "terminal")
FLAG_COLUMNS = ("warmup", "terminal")
TEXT_COLUMNS = ("level", "scenario", "variant", "item_id", "error_class")
GAP_SAMPLE_RECORDS = 2000
BLOCK_BYTES = 16 << 20

_CUT = b',"server_timing":'
_OFFSETS = b',"chunk_offsets_ms":['
_TEXT = b',"text":"'
_TEXT_END = b'","text_truncated":'
_EXTRA_MARKS = (b'"session_completed"', b'"recall_at_k"')
_SCHEMA_TAIL = b',"schema":%d}' % SCHEMA_VERSION
_SCHEMA_KEY = b',"schema":'
_GET_SCALARS = operator.itemgetter(*SCALARS)


@dataclass
class GapHistogram:
    """Pooled gaps as log-bucket counts (exact merge), with exact count, sum, min and max."""

    counts: dict[int, int] = field(default_factory=dict)
    count: int = 0
    sum: float = 0.0
    min: float = math.inf
    max: float = -math.inf

    def add(self, gaps: np.ndarray) -> None:
        valid = np.isfinite(gaps) & (gaps >= 0)
        if not valid.all():
            gaps = gaps[valid]
        if not gaps.size:
            return
        keys = bucket_keys(gaps)
        zero = keys == ZERO_KEY
        counts = self.counts
        if zero.any():
            counts[ZERO_KEY] = counts.get(ZERO_KEY, 0) + int(zero.sum())
            keys = keys[~zero]
        if keys.size:
            low = int(keys.min())
            tally = np.bincount(keys - low)
            for offset in np.flatnonzero(tally).tolist():
                key = low + offset
                counts[key] = counts.get(key, 0) + int(tally[offset])
        self.count += int(gaps.size)
        self.sum += float(gaps.sum())
        self.min = min(self.min, float(gaps.min()))
        self.max = max(self.max, float(gaps.max()))

    def merge(self, other: GapHistogram) -> None:
        for key, c in other.counts.items():
            self.counts[key] = self.counts.get(key, 0) + c
        self.count += other.count
        self.sum += other.sum
        self.min, self.max = min(self.min, other.min), max(self.max, other.max)

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """Sorted bucket keys and their counts."""
        keys = np.array(sorted(self.counts), dtype=np.int64)
        return keys, np.array([self.counts[k] for k in keys.tolist()], dtype=np.int64)


class _GapSampler:
    """Keeps the gaps of every ``stride``-th record offered; halves itself when it holds twice
    ``cap`` records, so the sample stays evenly spread over the file whatever its length."""

    def __init__(self, cap: int) -> None:
        self.cap, self.stride, self.seen = cap, 1, 0
        self.kept: list[np.ndarray] = []

    def offer(self, gaps: np.ndarray, begin: np.ndarray, end: np.ndarray) -> None:
        """Offer records whose gaps are ``gaps[begin[i]:end[i]]``, in order."""
        m, pos = len(begin), 0
        while pos < m:
            first = pos + (-self.seen) % self.stride
            take = np.arange(first, m, self.stride)[: 2 * self.cap - len(self.kept)]
            for k in take.tolist():
                self.kept.append(gaps[begin[k]:end[k]].astype(np.float32))
            if len(self.kept) >= 2 * self.cap:
                last = int(take[-1])
                self.seen += last + 1 - pos
                pos = last + 1
                self.kept = self.kept[::2]
                self.stride *= 2
            else:
                self.seen += m - pos
                pos = m


GroupKey = tuple[str, str, str]    # (level, scenario, variant)


@dataclass
class RecordTable:
    """What :func:`read_record_table` returns (see module docstring)."""

    frame: pd.DataFrame
    itl: dict[GroupKey, GapHistogram]
    gap_samples: dict[GroupKey, list[np.ndarray]]
    ok_with_gaps: dict[GroupKey, int]
    tokens_per_s: dict[GroupKey, dict[int, float]]
    warmup: int = 0
    cancelled: int = 0
    unreadable: int = 0
    first_unreadable: str = ""


class _Accumulator:
    def __init__(self, path: Path, stall_ms: float, sample_cap: int) -> None:
        self.path, self.stall_ms, self.sample_cap = path, stall_ms, sample_cap
        self.frames: list[pd.DataFrame] = []
        self.categories: list[dict[str, pd.Categorical]] = []
        self.itl: dict[GroupKey, GapHistogram] = {}
        self.samplers: dict[GroupKey, _GapSampler] = {}
        self.ok_with_gaps: dict[GroupKey, int] = {}
        self.tokens: dict[GroupKey, dict[int, float]] = {}
        self.warmup = self.cancelled = self.unreadable = 0
        self.first_unreadable = ""

    def unreadable_line(self, lineno: int, nbytes: int, exc: Exception) -> None:
        self.unreadable += 1
        if not self.first_unreadable:
            self.first_unreadable = f"{self.path}:{lineno}: skipped an unreadable line ({nbytes} bytes): {exc}"

    def add_block(self, nums: np.ndarray, texts: list[list[Any]], extras: np.ndarray, lens: np.ndarray,
                  flat: np.ndarray, line_offsets: list[int]) -> None:
        """One block of records: ``nums`` (records x NUMBER_COLUMNS), ``texts`` (TEXT_COLUMNS, a list
        each), ``extras`` (records x EXTRA_KEYS, NaN where absent), ``lens`` (each record's number of
        chunk offsets), ``flat`` (all the offsets, record after record), ``line_offsets`` (where
        each record's line starts in the file)."""
        if not len(nums):
            return
        col = {name: nums[:, j] for j, name in enumerate(NUMBER_COLUMNS)}
        text = dict(zip(TEXT_COLUMNS, texts))
        warm = col["warmup"] != 0
        error_class = np.array(text["error_class"], dtype=object)
        cancelled = error_class == "cancelled"
        keep = ~warm & ~cancelled
        self.warmup += int(warm.sum())
        self.cancelled += int((cancelled & ~warm).sum())
        lens = np.asarray(lens, dtype=np.int64)
        flat = np.asarray(flat, dtype=np.float64)
        starts = np.zeros(len(lens) + 1, dtype=np.int64)
        np.cumsum(lens, out=starts[1:])

        frame = pd.DataFrame({
            "started_at": col["started_at"].copy(),
            "status": np.nan_to_num(col["status"], nan=0.0).astype(np.int32),
            "ttfb_ms": col["ttfb_ms"].copy(), "ttft_ms": col["ttft_ms"].copy(), "e2e_ms": col["e2e_ms"].copy(),
            "queue_ms": col["queue_ms"].copy(),
            "output_tokens": col["output_tokens"].copy(),
            "terminal": col["terminal"] != 0,
            "conn_reused": col["conn_reused"].astype(np.float32),
            **{name: extras[:, i].astype(np.float32) for i, name in enumerate(EXTRA_KEYS)},
            "line_offset": np.array(line_offsets, dtype=np.int64), "n_chunks": lens.astype(np.int32),
        })
        frame["output_tokens"] = frame["output_tokens"].fillna(0.0)
        ok = ok_array(error_class)
        frame["ok"] = ok

        # gaps between consecutive chunks of the same record
        n = len(lens)
        gap_lens = np.maximum(lens - 1, 0)
        gap_starts = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(gap_lens, out=gap_starts[1:])
        if flat.size > 1:
            inside = np.ones(flat.size - 1, dtype=bool)
            bounds = starts[1:-1] - 1
            inside[bounds[(bounds >= 0) & (bounds < inside.size)]] = False
            gaps = np.diff(flat)[inside]
        else:
            gaps = np.zeros(0)
        gap_rec = np.repeat(np.arange(n), gap_lens)
        chunk_rec = np.repeat(np.arange(n), lens)
        has_gaps = gap_lens > 0
        max_gap = np.full(n, np.nan)
        if gaps.size:
            max_gap[has_gaps] = np.maximum.reduceat(gaps, gap_starts[:-1][has_gaps])
        non_empty = lens > 0
        first, last = np.full(n, np.nan), np.full(n, np.nan)
        first[non_empty] = flat[starts[:-1][non_empty]]
        last[non_empty] = flat[starts[1:][non_empty] - 1]
        frame["stalls"] = np.bincount(gap_rec[is_stall(gaps, self.stall_ms)], minlength=n).astype(np.int32)
        frame["max_gap_ms"] = max_gap            # float64, like queue_ms: goodput compares them with limits
        frame["first_chunk_ms"], frame["last_chunk_ms"] = first.astype(np.float32), last

        frame = frame[keep].reset_index(drop=True)
        kept = np.flatnonzero(keep)
        self.categories.append({
            "level": pd.Categorical(np.array(text["level"], dtype=object)[kept]),
            "scenario": pd.Categorical(np.array(text["scenario"], dtype=object)[kept]),
            "variant": pd.Categorical([text["variant"][i] or "" for i in kept.tolist()]),
            "item_id": pd.Categorical([text["item_id"][i] or "" for i in kept.tolist()]),
            "error_class": pd.Categorical(error_class[kept])})

        # per group: pooled ITL of ok records, gap samples, output tokens per second of arrival
        names = [f"{a}\x1f{b}\x1f{c or ''}" for a, b, c in zip(text["level"], text["scenario"], text["variant"])]
        codes, uniques = pd.factorize(pd.Series(names, dtype=object))
        started = col["started_at"]
        tokens = np.nan_to_num(col["output_tokens"])
        end = started + end_offset_ms_array(col["e2e_ms"], col["ttft_ms"], col["ttfb_ms"], last) / 1000
        for code, name in enumerate(uniques):
            level, scenario, variant = str(name).split("\x1f")
            key = (level, scenario, variant)
            member = (codes == code) & keep
            if not member.any():
                continue
            ok_member = member & ok
            self.itl.setdefault(key, GapHistogram()).add(gaps if ok_member.all() else gaps[ok_member[gap_rec]])
            with_gaps = np.flatnonzero(ok_member & has_gaps)
            self.ok_with_gaps[key] = self.ok_with_gaps.get(key, 0) + int(with_gaps.size)
            sampler = self.samplers.setdefault(key, _GapSampler(self.sample_cap))
            sampler.offer(gaps, gap_starts[with_gaps], gap_starts[with_gaps + 1])
            self._add_tokens(key, member, lens, flat, chunk_rec, started, tokens, end)
        self.frames.append(frame)

    def _add_tokens(self, key: GroupKey, member: np.ndarray, lens: np.ndarray, flat: np.ndarray,
                    chunk_rec: np.ndarray, started: np.ndarray, tokens: np.ndarray, end: np.ndarray) -> None:
        """Output tokens by Unix second of arrival (:func:`measure.metrics.token_seconds_array`;
        ``chunk_rec``: the record of each offset in ``flat``)."""
        if not (member & (tokens > 0)).any():
            return
        if member.all():          # every record of the block is in the group: no selection
            sec, w = token_seconds_array(started, end, tokens, lens, flat)
        else:
            sec, w = token_seconds_array(started[member], end[member], tokens[member], lens[member],
                                         flat[member[chunk_rec]])
        if not sec.size:
            return
        base = int(sec.min())
        sums = np.bincount(sec - base, weights=w)
        target = self.tokens.setdefault(key, {})
        for offset in np.flatnonzero(sums).tolist():
            target[base + offset] = target.get(base + offset, 0.0) + float(sums[offset])

    def result(self) -> RecordTable:
        if not self.frames:
            frame = _empty_frame()
        else:
            frame = pd.concat(self.frames, ignore_index=True)
            self.frames.clear()
            for name in CATEGORIES:       # (a block of only warm-up records has no categories to union)
                parts = [block[name] for block in self.categories if len(block[name])]
                frame[name] = union_categoricals(parts) if parts else pd.Categorical([])
        return RecordTable(frame, self.itl, {k: s.kept for k, s in self.samplers.items()}, self.ok_with_gaps,
                           self.tokens, self.warmup, self.cancelled, self.unreadable, self.first_unreadable)


def _empty_frame() -> pd.DataFrame:
    cols = [*SCALARS, *EXTRA_KEYS, "line_offset", "n_chunks", "ok", "stalls", "max_gap_ms",
            "first_chunk_ms", "last_chunk_ms"]
    return pd.DataFrame({c: pd.Series(dtype="category" if c in CATEGORIES else float)
                         for c in cols if c != "warmup"})


def _floats(values: Any) -> np.ndarray:
    """None -> NaN, True/False -> 1/0."""
    return np.array(values, dtype=np.float64)


def _parse_offsets(offsets: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """Each record's number of offsets (its commas + 1), and all offsets in one array: the lists
    joined with commas and parsed by pandas' C reader in one call, with the comma as its line
    terminator (an empty list is a blank line, which it skips)."""
    if not offsets:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    lens = np.fromiter((o.count(b",") + 1 if o else 0 for o in offsets), dtype=np.int64, count=len(offsets))
    expected = int(lens.sum())
    if not expected:
        return lens, np.zeros(0)
    if expected < 2000:
        flat = np.array(json.loads(b"[" + b",".join(o for o in offsets if o) + b"]"), dtype=np.float64)
    else:
        flat = pd.read_csv(io.BytesIO(b",".join(offsets)), header=None, names=["v"], dtype=np.float64,
                           engine="c", na_filter=False, lineterminator=",", sep=";")["v"].to_numpy()
    if flat.size != expected:
        raise ValueError(f"parsed {flat.size} chunk offsets, expected {expected}")
    return lens, flat


def _offsets_parse(text: bytes) -> bool:
    """One line's offsets (the text between the brackets) are a list of JSON numbers."""
    try:
        values = json.loads(b"[" + text + b"]")
    except ValueError:
        return False
    return all(type(v) in (int, float) for v in values)


def _require_record(data: Any, path: Path, lineno: int) -> None:
    """A decoded line must be a JSON object with every REQUIRED key of a fourfold record."""
    if not isinstance(data, dict):
        raise RecordsFormatError(f"{path}:{lineno}: expected a JSON object (a fourfold record), "
                                 f"got {type(data).__name__}")
    missing = [k for k in REQUIRED if k not in data]
    if missing:
        raise RecordsFormatError(f"{path}:{lineno}: not a fourfold record (missing {', '.join(missing)}); "
                                 "is this a run directory written by fourfold?")


def _slow_row(data: Any, path: Path, lineno: int) -> tuple[tuple[Any, ...], tuple[Any, ...], np.ndarray]:
    """Scalars, EXTRA_KEYS facts and chunk offsets of one whole-line-decoded record."""
    _require_record(data, path, lineno)
    _check_schema(data.get("schema", 1), path, lineno)
    extra = data.get("extra")
    if not isinstance(extra, dict):
        extra = {}
    offsets = data.get("chunk_offsets_ms") or []
    return (tuple(data.get(k) for k in SCALARS),
            tuple(_plain_number(extra.get(k)) for k in EXTRA_KEYS),
            np.array([float(v) for v in offsets], dtype=np.float64))


def _plain_number(value: Any) -> float | None:
    """A number or bool from ``extra``; anything else (a string, a list) -> None."""
    return float(value) if isinstance(value, (int, float)) else None


def _check_schema(schema: Any, path: Path, lineno: int) -> None:
    if not isinstance(schema, int) or isinstance(schema, bool) or schema > SCHEMA_VERSION:
        raise SchemaError(f"{path}:{lineno}: record schema {schema!r} is newer than the {SCHEMA_VERSION} "
                          "this fourfold reads; upgrade fourfold to read this run")


def read_record_table(path: str | Path, *, stall_ms: float = 150.0, sample_cap: int = GAP_SAMPLE_RECORDS,
                      block_bytes: int = BLOCK_BYTES, native: bool | None = None) -> RecordTable:
    """Read ``path`` (a records.jsonl) into a :class:`RecordTable` (see module docstring).

    ``native``: cut the lines with the compiled scanner (True), with Python (False), or with the
    scanner when it was built (None). Both give the same table.

    Raises :class:`SchemaError` for a record of a newer schema, :class:`RecordsFormatError` for a
    line that is JSON but not a fourfold record; skips (and counts) lines that are not JSON.
    """
    path = Path(path)
    if native is None:
        native = _records_scan is not None
    elif native and _records_scan is None:
        raise RuntimeError("fourfold.reports._records_scan was not built (no C compiler at install time?)")
    acc = _Accumulator(path, stall_ms, sample_cap)
    lineno = position = 0
    with open(path, "rb") as fh:
        if native:
            # one buffer for the whole file, refilled in place (a fresh 16 MB object per block costs
            # more in page faults than the scanner spends on it)
            buf = bytearray(block_bytes)
            view = memoryview(buf)
            have = 0
            while True:
                if have == len(buf):           # one line longer than the buffer
                    view.release()
                    buf.extend(bytes(len(buf)))
                    view = memoryview(buf)
                got = fh.readinto(view[have:])
                if not got:
                    if have:
                        lineno, position = _process_block(acc, view[:have], lineno, position)
                    break
                have += got
                end = buf.rfind(b"\n", 0, have) + 1
                if end:
                    lineno, position = _process_block(acc, view[:end], lineno, position)
                    view[:have - end] = view[end:have]
                    have -= end
            view.release()
        else:
            while True:
                lines = fh.readlines(block_bytes)
                if not lines:
                    break
                lineno, position = _process_lines(acc, lines, lineno, position)
    return acc.result()


_LINE_TAIL = _SCHEMA_TAIL + b"\n"
_NO_EXTRA_TAIL = b',"extra":{}' + _LINE_TAIL
# _cut_positions_note: ``,"server_timing":`` and ``","text_truncated":`` are found with rfind, so
# the search does not cross the chunk offsets and the answer text. A key can occur only as a key
# (inside a JSON string its quotes are escaped); if plan or extra held a nested "server_timing",
# the cut would land inside that object, the cut-down line would not be valid JSON, and the line
# would go the slow path. ``"extra":{}`` last means no EXTRA_KEYS to look for.
_SCAN_KEYS = (_LINE_TAIL, _NO_EXTRA_TAIL, _CUT, _OFFSETS, _TEXT, _TEXT_END, *_EXTRA_MARKS)
_SCAN_COLUMNS = tuple((name.encode(), 1 if name in FLAG_COLUMNS else 0) for name in NUMBER_COLUMNS) + tuple(
    (name.encode(), 2) for name in TEXT_COLUMNS)


def _process_block(acc: _Accumulator, block: memoryview, lineno: int, position: int) -> tuple[int, int]:
    """The compiled twin of :func:`_process_lines` for a block of whole lines
    (``reports/_records_scan.c``): the same cuts, the offsets parsed as ``float()`` parses them,
    and the SCALARS of each cut-down line read straight into columns; a line whose scalars it
    does not read plainly (an escape in a text it keeps, a value of another type, a key missing)
    comes back as its cut-down line, decoded here as the Python path decodes it."""
    assert _records_scan is not None
    (nums, texts, undecided, joined, part_ends, fast, slow, starts, lens,
     flat) = _records_scan.scan(block, position, _SCAN_COLUMNS, *_SCAN_KEYS)
    line_starts = np.frombuffer(starts, dtype=np.int64).tolist()
    fast_index = np.frombuffer(fast, dtype=np.int64).tolist()
    table = np.frombuffer(nums, dtype=np.float64).reshape(len(fast_index), len(NUMBER_COLUMNS)).copy()
    which = np.frombuffer(undecided, dtype=np.int64).tolist()
    dicts: list[Any] = []
    if which:
        try:
            dicts = list(orjson.loads(joined))
        except orjson.JSONDecodeError:
            ends = np.frombuffer(part_ends, dtype=np.int64).tolist()
            dicts = [loads_or_none(joined[a + 1:b]) for a, b in zip([0, *ends[:-1]], ends)]

    def line(i: int) -> bytes:
        return bytes(block[line_starts[i] - position:line_starts[i + 1] - position])

    slow_lines = [(line(i), line_starts[i], lineno + i + 1) for i in np.frombuffer(slow, dtype=np.int64).tolist()]
    _finish_block(acc, table, [list(t) for t in texts], which, dicts, fast_index,
                  [line_starts[i] for i in fast_index], np.frombuffer(lens, dtype=np.int64),
                  np.frombuffer(flat, dtype=np.float64), slow_lines, line, lineno)
    return lineno + len(line_starts) - 1, line_starts[-1]


def _process_lines(acc: _Accumulator, lines: list[bytes], lineno: int, position: int) -> tuple[int, int]:
    """Cut the fast-path lines down (see module docstring), decode the rest whole, hand the block on."""
    line_starts = list(itertools.accumulate(map(len, lines), initial=position))
    parts: list[bytes] = []                   # the cut-down lines, 4 pieces each: one join per block
    fast_offsets: list[bytes] = []
    fast_index: list[int] = []
    slow_index: list[int] = []
    add_part, add_offsets, add_index = parts.extend, fast_offsets.append, fast_index.append
    tail, cut_key, offsets_key, text_key, text_end = _LINE_TAIL, _CUT, _OFFSETS, _TEXT, _TEXT_END
    session_mark, retrieval_mark = _EXTRA_MARKS
    for i, line in enumerate(lines):
        if line.endswith(tail):
            # searched from the end: the keys after the text are near it (see _cut_positions_note)
            cut = line.rfind(cut_key)
            if cut > 0 and (line.endswith(_NO_EXTRA_TAIL) or (line.find(session_mark, cut) < 0
                                                              and line.find(retrieval_mark, cut) < 0)):
                a = line.find(offsets_key, 0, cut)
                b = line.find(b"]", a + 21) if a > 0 else -1
                t = line.find(text_key, b, cut) if b > 0 else -1
                e = line.rfind(text_end, t + 9, cut) if t > 0 else -1
                if e > 0:
                    add_part((line[:a], line[b + 1:t], line[e + 1:cut], b"},"))
                    add_offsets(line[a + 21:b])
                    add_index(i)
                    continue
        if line.strip():
            slow_index.append(i)
    slow = [(lines[i], line_starts[i], lineno + i + 1) for i in slow_index]
    try:
        lens, flat = _parse_offsets(fast_offsets)
    except ValueError:                   # a damaged offsets list: those lines go the slow path
        good = [k for k, text in enumerate(fast_offsets) if _offsets_parse(text)]
        if len(good) < len(fast_index):
            slow += [(lines[fast_index[k]], line_starts[fast_index[k]], lineno + fast_index[k] + 1)
                     for k in sorted(set(range(len(fast_index))) - set(good))]
            slow.sort(key=operator.itemgetter(1))
            fast_index = [fast_index[k] for k in good]
            fast_offsets = [fast_offsets[k] for k in good]
            parts = [piece for k in good for piece in parts[4 * k:4 * k + 4]]
        lens, flat = _parse_offsets(fast_offsets)
    n = len(fast_index)
    _finish_block(acc, np.full((n, len(NUMBER_COLUMNS)), np.nan), [[None] * n for _ in TEXT_COLUMNS],
                  list(range(n)), _decode_all(parts), fast_index, [line_starts[i] for i in fast_index], lens, flat,
                  slow, lines.__getitem__, lineno)
    return lineno + len(lines), line_starts[-1]


def _columns_of(rows: list[tuple[Any, ...]]) -> tuple[np.ndarray, list[list[Any]]]:
    """SCALARS tuples -> (numbers, texts) as a block holds them: a number column as
    ``np.array(values, dtype=float)`` makes it (None is NaN, a bool 1/0), a flag as
    ``np.array(values, dtype=bool)`` (None is 0)."""
    by = dict(zip(SCALARS, zip(*rows))) if rows else {name: () for name in SCALARS}
    nums = np.empty((len(rows), len(NUMBER_COLUMNS)))
    for j, name in enumerate(NUMBER_COLUMNS):
        nums[:, j] = np.array(by[name], dtype=bool) if name in FLAG_COLUMNS else _floats(by[name])
    return nums, [list(by[name]) for name in TEXT_COLUMNS]


def _finish_block(acc: _Accumulator, nums: np.ndarray, texts: list[list[Any]], undecided: list[int],
                  dicts: list[Any], fast_index: list[int], fast_starts: list[int], lens: np.ndarray,
                  flat: np.ndarray, slow: list[tuple[bytes, int, int]], line: Any, lineno: int) -> None:
    """Complete the fast lines' columns (``nums``, ``texts``) with the ``undecided`` ones, whose
    cut-down lines decoded to ``dicts`` (None where one did not decode: that line is decoded
    whole), add the ``slow`` lines (bytes, file position, line number) after them, hand the block on."""
    keep: np.ndarray | None = None
    if undecided:
        rows: list[tuple[Any, ...]] = []
        filled = undecided
        try:
            if None in dicts:
                raise TypeError
            rows = list(map(_GET_SCALARS, dicts))
        except (KeyError, TypeError):    # a cut-down line did not decode, or lacks a key: one by one
            keep = np.ones(len(fast_index), dtype=bool)
            filled = []
            for k, data in zip(undecided, dicts):
                i = fast_index[k]
                if data is None:         # try the whole line
                    keep[k] = False
                    slow.append((line(i), fast_starts[k], lineno + i + 1))
                    continue
                rows.append(_scalars_of(data, acc.path, lineno + i + 1))
                filled.append(k)
        sub_nums, sub_texts = _columns_of(rows)
        if len(filled) == len(fast_index):
            nums, texts = sub_nums, sub_texts
        elif filled:
            nums[filled] = sub_nums
            for column, values in zip(texts, sub_texts):
                for k, value in zip(filled, values):
                    column[k] = value
    if keep is not None and not keep.all():
        flat = flat[np.repeat(keep, lens)]
        lens, nums = lens[keep], nums[keep]
        texts = [list(itertools.compress(column, keep)) for column in texts]
        fast_starts = list(itertools.compress(fast_starts, keep))
    extras = np.full((len(nums), len(EXTRA_KEYS)), np.nan)
    slow_rows: list[tuple[Any, ...]] = []
    slow_extras: list[tuple[Any, ...]] = []
    slow_offsets: list[np.ndarray] = []
    starts = list(fast_starts)
    for text, start, number in slow:
        try:
            data = json.loads(text)
        except ValueError as exc:        # JSONDecodeError and UnicodeDecodeError: a torn or damaged line
            acc.unreadable_line(number, len(text), exc)
            continue
        row, extra, offsets = _slow_row(data, acc.path, number)
        slow_rows.append(row)
        slow_extras.append(extra)
        slow_offsets.append(offsets)
        starts.append(start)
    if slow_rows:
        more_nums, more_texts = _columns_of(slow_rows)
        nums = np.concatenate([nums, more_nums])
        texts = [column + more for column, more in zip(texts, more_texts)]
        extras = np.concatenate([extras, _floats(slow_extras).reshape(len(slow_rows), len(EXTRA_KEYS))])
        lens = np.concatenate([lens, [len(o) for o in slow_offsets]]).astype(np.int64)
        flat = np.concatenate([flat, *slow_offsets])
    acc.add_block(nums, texts, extras, lens, flat, starts)


def _decode_all(parts: list[bytes]) -> list[Any]:
    """Each cut-down line (four of ``parts`` each, the last ending ``},``) decoded: one
    ``orjson.loads`` for the block; line by line (None for a line that fails) when that fails."""
    if not parts:
        return []
    joined = b"".join(parts)
    try:
        return list(orjson.loads(b"[" + joined[:-1] + b"]"))
    except orjson.JSONDecodeError:
        pass
    return [loads_or_none(b"".join(parts[k:k + 3]) + b"}") for k in range(0, len(parts), 4)]


def loads_or_none(text: bytes) -> Any:
    """``json.loads(text)``, or None where it is not JSON (also for ``reports.load``'s scores)."""
    try:
        return json.loads(text)
    except ValueError:
        return None


def _scalars_of(data: Any, path: Path, lineno: int) -> tuple[Any, ...]:
    try:
        return _GET_SCALARS(data)  # type: ignore[no-any-return]
    except (KeyError, TypeError):
        pass
    _require_record(data, path, lineno)
    return tuple(data.get(k) for k in SCALARS)

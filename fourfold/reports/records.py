"""``records.jsonl`` as a table for reports: the columns a comparison needs, and the chunk
offsets reduced to what the statistics use, with bounded memory.

:mod:`fourfold.reports.recordlines` reads the lines (the compiled scanner and its exact
fallback) into blocks of columns; here each block is reduced and the blocks are joined. Per
record the table keeps the scalar columns plus ``n_chunks``, ``max_gap_ms``, ``stalls`` (gaps
above the stall threshold), ``first_chunk_ms``, ``last_chunk_ms`` and ``line_offset`` (where the
line starts, to fetch the whole record later for a waveform), in file order. Per (level,
scenario, variant) it keeps the pooled ITL gaps of ok records as log-bucket counts
(:class:`GapHistogram`, the buckets of :class:`fourfold.measure.histogram.LogHistogram`), output
tokens per second of arrival, and the gaps of an evenly spread sample of ok records (at most
``GAP_SAMPLE_RECORDS``) for the ITL bootstrap; the same two per token (``itl_token``,
``token_gap_samples``: a chunk of k tokens gives k gaps of gap / k, :mod:`fourfold.measure.tokentiming`).
Warm-up and cancelled records are counted and
left out, as in every fourfold statistic; lines that are not JSON, and records with a value of the
wrong kind or an impossible one (:mod:`fourfold.reports.recordlines`), are skipped and counted
(``unreadable``, the first named in ``first_unreadable``).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from pandas.api.types import union_categoricals

from fourfold.errors import RecordsFormatError, SchemaError
from fourfold.measure.histogram import ZERO_KEY, bucket_keys
from fourfold.measure.metrics import end_offset_ms_array, is_stall, ok_array, token_seconds_array
from fourfold.measure.rhythm import gap_tokens
from fourfold.measure.tokentiming import streamed_tokens_array
from fourfold.reports.recordlines import (
    BLOCK_BYTES,
    EXTRA_KEYS,
    NUMBER_COLUMNS,
    SCALARS,
    TEXT_COLUMNS,
    Block,
    loads_or_none,
    read_blocks,
)
from fourfold.reports.tenants import tenant_scenario
from fourfold.rundir import plausible

# L3 retrieval fractions stay float64, so their means equal summary.json's; rounds and session flags
# are exact in float32
EXACT_EXTRAS = ("recall_at_k", "precision_at_k")

__all__ = ["GAP_SAMPLE_RECORDS", "GapHistogram", "RecordTable", "RecordsFormatError", "SchemaError",
           "loads_or_none", "merged_gaps", "read_record_table", "variant_users"]

CATEGORIES = ("level", "scenario", "variant", "item_id", "error_class", "tenant")
GAP_SAMPLE_RECORDS = 2000
FAR_S = 10**15          # a second of arrival beyond +-FAR_S is not a time (NaN or inf cast, a damaged line)


@dataclass
class GapHistogram:
    """Pooled gaps as log-bucket counts (exact merge), with exact count, sum, min and max."""

    counts: dict[int, int] = field(default_factory=dict)
    count: int = 0
    sum: float = 0.0
    min: float = math.inf
    max: float = -math.inf

    def add(self, gaps: np.ndarray, weights: np.ndarray | None = None) -> None:
        """Add ``gaps``, each counted once or ``weights`` times (whole numbers: a chunk's tokens)."""
        valid = np.isfinite(gaps) & (gaps >= 0)
        if not valid.all():
            gaps = gaps[valid]
            weights = weights[valid] if weights is not None else None
        if not gaps.size:
            return
        keys = bucket_keys(gaps)
        zero = keys == ZERO_KEY
        counts = self.counts
        if zero.any():
            zeros = zero.sum() if weights is None else weights[zero].sum()
            counts[ZERO_KEY] = counts.get(ZERO_KEY, 0) + int(zeros)
            keys = keys[~zero]
        if keys.size:
            low = int(keys.min())
            tally = np.bincount(keys - low, weights=None if weights is None else weights[~zero])
            for offset in np.flatnonzero(tally).tolist():
                key = low + offset
                counts[key] = counts.get(key, 0) + int(tally[offset])
        self.count += int(gaps.size if weights is None else weights.sum())
        self.sum += float(gaps.sum() if weights is None else (gaps * weights).sum())
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
    # the same per token (a chunk of k tokens: k gaps of gap / k; measure.tokentiming), and a sample
    itl_token: dict[GroupKey, GapHistogram] = field(default_factory=dict)
    token_gap_samples: dict[GroupKey, list[np.ndarray]] = field(default_factory=dict)


MAX_GROUPS = 128          # (level, scenario, variant) groups a run may hold; records of more are skipped
MAX_GROUP_NAME = 200      # characters of a level, scenario or variant name
_BAD_TEXT = re.compile("[\x00-\x1f\x7f\ud800-\udfff]")


def group_problem(key: GroupKey) -> str:
    """Why a group name cannot be used ("" when it can): control characters or lone surrogates
    (nothing could print or write it as UTF-8), or a name longer than MAX_GROUP_NAME."""
    for part in key:
        if _BAD_TEXT.search(part):
            return "its group name holds control characters or lone surrogates"
        if len(part) > MAX_GROUP_NAME:
            return f"its group name is longer than {MAX_GROUP_NAME} characters"
    return ""


class _Accumulator:
    def __init__(self, stall_ms: float, sample_cap: int, path: Path | None = None) -> None:
        self.stall_ms, self.sample_cap, self.path = stall_ms, sample_cap, path
        self.frames: list[pd.DataFrame] = []
        self.categories: list[dict[str, pd.Categorical]] = []
        self.itl: dict[GroupKey, GapHistogram] = {}
        self.samplers: dict[GroupKey, _GapSampler] = {}
        self.itl_token: dict[GroupKey, GapHistogram] = {}
        self.token_samplers: dict[GroupKey, _GapSampler] = {}
        self.ok_with_gaps: dict[GroupKey, int] = {}
        self.tokens: dict[GroupKey, dict[int, float]] = {}
        self.warmup = self.cancelled = self.unreadable = 0
        self.first_unreadable = ""
        self.seen: set[GroupKey] = set()

    def add_block(self, block: Block) -> None:
        """One block of records, in file order (see :class:`fourfold.reports.recordlines.Block`)."""
        self.unreadable += block.unreadable
        self.first_unreadable = self.first_unreadable or block.first_unreadable
        if not len(block.nums):
            return
        lens, flat = block.lens, block.flat
        col = {name: block.nums[:, j] for j, name in enumerate(NUMBER_COLUMNS)}
        text = dict(zip(TEXT_COLUMNS, block.texts))
        warm = col["warmup"] != 0
        error_class = np.array(text["error_class"], dtype=object)
        cancelled = error_class == "cancelled"
        names = [f"{a}\x1f{b}\x1f{c or ''}\x1f{t or ''}"
                 for a, b, c, t in zip(text["level"], text["scenario"], text["variant"], text["tenant"])]
        codes, uniques = pd.factorize(pd.Series(names, dtype=object))
        usable = np.array([self._usable(str(a), str(b), str(c or "")) and (not t or self._usable(
                               str(a), tenant_scenario(str(b), str(c), str(t)), str(c)))
                           for a, b, c, t in (u.split("\x1f", 3) for u in uniques)], dtype=bool)
        bad = ~usable[codes] if len(uniques) else np.zeros(len(codes), dtype=bool)
        if bad.any():
            self.unreadable += int(bad.sum())
        keep = ~warm & ~cancelled & ~bad
        self.warmup += int((warm & ~bad).sum())
        self.cancelled += int((cancelled & ~warm & ~bad).sum())
        starts = np.zeros(len(lens) + 1, dtype=np.int64)
        np.cumsum(lens, out=starts[1:])

        frame = pd.DataFrame({
            "started_at": col["started_at"].copy(),
            "status": np.nan_to_num(col["status"], nan=0.0).astype(np.int32),
            "ttfb_ms": col["ttfb_ms"].copy(), "ttft_ms": col["ttft_ms"].copy(),
            "e2e_ms": col["e2e_ms"].copy(), "queue_ms": col["queue_ms"].copy(),
            "output_tokens": col["output_tokens"].copy(),
            "terminal": col["terminal"] != 0,
            "conn_reused": col["conn_reused"].astype(np.float32),
            **{name: col[name].copy() for name in plausible.OPTIONAL_FIELDS},   # NaN where a record has none
            **{name: block.extras[:, i].astype(np.float64 if name in EXACT_EXTRAS else np.float32)
               for i, name in enumerate(EXTRA_KEYS)},
            "line_offset": block.starts.copy(), "n_chunks": lens.astype(np.int32),
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
        # per token: the tokens each gap's chunk carried (measure.tokentiming), each its share of the gap
        streamed = streamed_tokens_array(col["output_tokens"], col["reasoning_tokens"],
                                         col["reasoning_chunks"])
        weights = gap_tokens(np.arange(gaps.size, dtype=np.int64) - gap_starts[gap_rec],
                             streamed.astype(np.int64)[gap_rec], lens.astype(np.int64)[gap_rec])
        token_gaps = gaps / weights if gaps.size else gaps
        token_ends = np.zeros(gaps.size + 1, dtype=np.int64)
        np.cumsum(weights, out=token_ends[1:])
        per_token = token_gaps if token_ends[-1] == gaps.size else np.repeat(token_gaps, weights)
        frame["stalls"] = np.bincount(gap_rec[is_stall(gaps, self.stall_ms)], minlength=n).astype(np.int32)
        frame["max_gap_ms"] = max_gap            # float64, like queue_ms: goodput compares them with limits
        frame["first_chunk_ms"], frame["last_chunk_ms"] = first.astype(np.float32), last

        frame = frame[keep].reset_index(drop=True)
        kept = np.flatnonzero(keep)
        self.categories.append({
            "level": pd.Categorical(np.array(text["level"], dtype=object)[kept]),
            "scenario": pd.Categorical(np.array(text["scenario"], dtype=object)[kept]),
            "variant": pd.Categorical([text["variant"][i] or "" for i in kept.tolist()]),
            "tenant": pd.Categorical([text["tenant"][i] or "" for i in kept.tolist()]),
            "item_id": pd.Categorical([text["item_id"][i] or "" for i in kept.tolist()]),
            "error_class": pd.Categorical(error_class[kept])})

        # per group: pooled ITL of ok records, gap samples, output tokens per second of arrival
        started = col["started_at"]
        tokens = np.nan_to_num(col["output_tokens"])
        end = started + end_offset_ms_array(col["e2e_ms"], col["ttft_ms"], col["ttfb_ms"], last) / 1000

        def add_group(key: GroupKey, member: np.ndarray) -> None:
            ok_member = member & ok
            self.itl.setdefault(key, GapHistogram()).add(gaps if ok_member.all()
                                                         else gaps[ok_member[gap_rec]])
            with_gaps = np.flatnonzero(ok_member & has_gaps)
            self.ok_with_gaps[key] = self.ok_with_gaps.get(key, 0) + int(with_gaps.size)
            sampler = self.samplers.setdefault(key, _GapSampler(self.sample_cap))
            sampler.offer(gaps, gap_starts[with_gaps], gap_starts[with_gaps + 1])
            gap_ok = ok_member[gap_rec]
            self.itl_token.setdefault(key, GapHistogram()).add(token_gaps[gap_ok], weights[gap_ok])
            self.token_samplers.setdefault(key, _GapSampler(self.sample_cap)).offer(
                per_token, token_ends[gap_starts[with_gaps]],
                token_ends[gap_starts[with_gaps + 1]])
            self._add_tokens(key, member, lens, flat, chunk_rec, started, tokens, end)

        for code, name in enumerate(uniques):
            if not usable[code]:
                continue
            level, scenario, variant, tenant = str(name).split("\x1f", 3)
            member = (codes == code) & keep
            if not member.any():
                continue
            # a --mix tenant's records count in their group and in the tenant's own (scenario#tenant)
            for key in ((level, scenario, variant),
                        *(((level, tenant_scenario(scenario, variant, tenant), variant),) if tenant else ())):
                add_group(key, member)
        self.frames.append(frame)

    def _usable(self, level: str, scenario: str, variant: str) -> bool:
        """A group name this reader can keep: see :func:`group_problem`; past MAX_GROUPS groups, new
        ones are not kept (each costs a frame category and a histogram). Skipped records are counted
        with the unreadable lines, the first one named."""
        key = (level, scenario, variant)
        if key in self.seen:
            return True
        why = group_problem(key) or (f"the run already has {MAX_GROUPS} groups"
                                     if len(self.seen) >= MAX_GROUPS else "")
        if why:
            if not self.first_unreadable:
                shown = ascii(":".join(part[:40] for part in key if part))
                self.first_unreadable = f"{self.path or 'records'}: skipped records: {why} ({shown})"
            return False
        self.seen.add(key)
        return True

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
        # a null start or an absurd offset (a damaged line): left out
        usable = (sec > -FAR_S) & (sec < FAR_S)
        if not usable.all():
            sec, w = sec[usable], w[usable]
        if not sec.size:
            return
        base = int(sec.min())
        if int(sec.max()) - base < 1 << 24:          # a run's seconds: one count each
            sums = np.bincount(sec - base, weights=w)
            at = np.flatnonzero(sums)
            at, sums = at + base, sums[at]
        else:                                        # seconds far apart: only those that occur
            at, inverse = np.unique(sec, return_inverse=True)
            sums = np.bincount(inverse, weights=w)
        target = self.tokens.setdefault(key, {})
        for second, total in zip(at.tolist(), sums.tolist()):
            target[second] = target.get(second, 0.0) + total

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
                           self.tokens, self.warmup, self.cancelled, self.unreadable, self.first_unreadable,
                           self.itl_token, {k: s.kept for k, s in self.token_samplers.items()})


def _empty_frame() -> pd.DataFrame:
    cols = [*SCALARS, *EXTRA_KEYS, "line_offset", "n_chunks", "ok", "stalls", "max_gap_ms",
            "first_chunk_ms", "last_chunk_ms"]
    return pd.DataFrame({c: pd.Series(dtype="category" if c in CATEGORIES else float)
                         for c in cols if c != "warmup"})


def merged_gaps(parts: list[tuple[RecordTable, list[GroupKey]]],
                per_token: bool = False) -> tuple[GapHistogram, list[np.ndarray], int]:
    """The pooled gaps of the given keys of each table (``per_token``: the per-token gaps), their gap
    samples, and the ok requests with gaps behind them."""
    merged, records = GapHistogram(), 0
    sample: list[np.ndarray] = []
    for table, keys in parts:
        hists, samples = ((table.itl_token, table.token_gap_samples) if per_token
                          else (table.itl, table.gap_samples))
        for key in keys:
            if key in hists:
                merged.merge(hists[key])
                sample.extend(samples.get(key, []))
                records += table.ok_with_gaps.get(key, 0)
    return merged, sample, records


def read_record_table(path: str | Path, *, stall_ms: float = 150.0, sample_cap: int = GAP_SAMPLE_RECORDS,
                      block_bytes: int = BLOCK_BYTES, native: bool | None = None) -> RecordTable:
    """Read ``path`` (a records.jsonl) into a :class:`RecordTable` (see module docstring).

    ``native``: read the lines with the compiled scanner and its exact fallback (True), with the
    fallback alone (False), or with the scanner when it was built (None). Both give the same table.

    Raises :class:`SchemaError` for a record of a newer schema, :class:`RecordsFormatError` for a
    line that is JSON but no fourfold record (not an object, a required key missing); skips (and
    counts) lines that are not JSON and records with wrong kinds of values or impossible ones.
    """
    acc = _Accumulator(stall_ms, sample_cap, Path(path))
    for block in read_blocks(Path(path), block_bytes=block_bytes, native=native):
        acc.add_block(block)
    return acc.result()


def variant_users(records_path: Path, variant: str,
                  base_scenario: Callable[[str, str], str]) -> dict[str, set[int]]:
    """``level:scenario`` -> the user ids with a non-warm-up record of ``variant`` (one pass over
    the lines naming that variant; only an A/B comparison asks). ``base_scenario`` drops the
    ``@variant`` suffix (:func:`fourfold.reports.load.base_scenario`)."""
    needle = f'"variant": "{variant}"'.encode()
    out: dict[str, set[int]] = {}
    with open(records_path, "rb") as lines:
        for line in lines:
            if needle not in line and needle.replace(b" ", b"") not in line:
                continue
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if (not isinstance(record, dict) or record.get("variant") != variant or record.get("warmup")
                    or not isinstance(record.get("user_id"), int)):
                continue
            name = f"{record.get('level')}:{base_scenario(str(record.get('scenario')), variant)}"
            out.setdefault(name, set()).add(record["user_id"])
    return out

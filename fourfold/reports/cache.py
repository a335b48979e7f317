"""A columnar copy of what ``fourfold compare`` reads from a run directory: ``compare-cache.npz``.

Reading a million-record run costs about 15 s of CPU (``records.jsonl`` ~9 s with the compiled
scanner, ``scores.jsonl`` the rest); what the comparison keeps of it
(:class:`fourfold.reports.records.RecordTable`: the per-record columns, stall counts, max gaps,
the pooled ITL bucket counts, the gap sample, tokens per second) loads from this file in well
under a second. :func:`fourfold.reports.load.load_run` writes it next to ``records.jsonl`` on the
first read and uses it afterwards. It holds, as plain numpy arrays (``np.load(..., allow_pickle=False)``:
loading it runs no code):

- ``records.*``: the record table, valid for one ``records.jsonl`` (its :class:`Stamp`), one
  stall threshold and one gap-sample size;
- ``scores.*``: the ``scores.jsonl`` frame, valid for one ``scores.jsonl`` (or its absence).

Each part is used only while its source has the same size, modification time and first and
last 64 KiB as when the part was written, and only by a reader of the same ``CACHE_VERSION``;
otherwise the source is read again and the file rewritten. Bump ``CACHE_VERSION`` whenever
what the reader derives from a record changes. A file that is no longer valid, damaged or
unreadable is a miss, never an error; a run directory that cannot be written (read-only, full)
simply gets no cache. The file is written to a temporary name and renamed, so a reader never
sees half of one.
"""

from __future__ import annotations

import hashlib
import os
import stat
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fourfold.reports.records import GapHistogram, GroupKey, RecordTable
from fourfold.rundir.runlog import RECORDS_FILE

__all__ = ["CACHE_FILE", "CACHE_VERSION", "CachedScores", "RunCache", "Stamp", "stamp"]

CACHE_FILE = "compare-cache.npz"
CACHE_VERSION = 14       # 14: records' --mix tenant, its groups; 13: request phases; 12: embeddings
                         # inputs; 11: tool-call counts;
                         # 10: client token counts, per-token ITL; 9: records' ttfo, input/cached/
                         # reasoning tokens, reasoning chunks; 8: scores'
                         # low_confidence and char_f1 columns; 7: the L3 conflict flag (records'
                         # extra.conflict); 6: records with wrong kinds or impossible values skipped and
                         # counted; 5: recall/precision kept float64; 4: one
                         # records reader (damaged lines as json.loads reads them)
EDGE_BYTES = 64 << 10
_SEP = "\x1f"
_DAMAGED = (OSError, ValueError, KeyError, IndexError, TypeError, EOFError, zipfile.BadZipFile)


class _Uncacheable(ValueError):
    """A value the arrays cannot hold exactly (an object column, a category that is not text)."""


@dataclass(frozen=True)
class Stamp:
    """What identifies a source file's content, cheaply: size, mtime and a digest of its edges."""

    size: int
    mtime_ns: int
    edges: str

    def encode(self) -> np.ndarray:
        return np.array([str(self.size), str(self.mtime_ns), self.edges])


def stamp(path: Path) -> Stamp | None:
    """The :class:`Stamp` of ``path`` (None when it does not exist or cannot be read)."""
    try:
        with open(path, "rb") as fh:
            info = os.fstat(fh.fileno())
            digest = hashlib.blake2b(fh.read(EDGE_BYTES), digest_size=16)
            if info.st_size > EDGE_BYTES:
                fh.seek(max(EDGE_BYTES, info.st_size - EDGE_BYTES))
                digest.update(fh.read(EDGE_BYTES))
    except OSError:
        return None
    return Stamp(info.st_size, info.st_mtime_ns, digest.hexdigest())


def _stamp_array(value: Stamp | None) -> np.ndarray:
    return value.encode() if value is not None else np.array(["absent"])


# ---- frames <-> arrays ----
def _put_frame(out: dict[str, np.ndarray], prefix: str, frame: pd.DataFrame) -> None:
    out[f"{prefix}.columns"] = np.array(list(frame.columns), dtype=str)
    for name in frame.columns:
        column = frame[name]
        if isinstance(column.dtype, pd.CategoricalDtype):
            categories = column.cat.categories
            values = categories.to_numpy(dtype=object)
            if not all(isinstance(v, str) and not v.endswith("\x00") for v in values):
                raise _Uncacheable(f"column {name}: categories that are not plain text")
            out[f"{prefix}.{name}.codes"] = column.cat.codes.to_numpy()
            out[f"{prefix}.{name}.categories"] = np.array(values.tolist(), dtype=str)
        else:
            values = column.to_numpy()
            if values.dtype.kind not in "biuf":
                raise _Uncacheable(f"column {name}: dtype {values.dtype}")
            out[f"{prefix}.{name}"] = values


def _get_frame(data: Any, prefix: str) -> pd.DataFrame:
    columns = {}
    for name in data[f"{prefix}.columns"].tolist():
        if f"{prefix}.{name}.codes" in data:
            categories = data[f"{prefix}.{name}.categories"].astype(object)
            columns[name] = pd.Categorical.from_codes(data[f"{prefix}.{name}.codes"], categories=categories)
        else:
            columns[name] = data[f"{prefix}.{name}"]
    return pd.DataFrame(columns)


def _put_keys(out: dict[str, np.ndarray], name: str, keys: list[GroupKey]) -> None:
    if any(_SEP in part or part.endswith("\x00") for key in keys for part in key):
        raise _Uncacheable("a group name holds a control character")
    out[name] = np.array([_SEP.join(key) for key in keys], dtype=str)


def _get_keys(data: Any, name: str) -> list[GroupKey]:
    return [tuple(text.split(_SEP)) for text in data[name].tolist()]  # type: ignore[misc]


def _table_arrays(table: RecordTable) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    _put_frame(out, "records.frame", table.frame)
    for name, hists, gap_samples in (("itl", table.itl, table.gap_samples),
                                     ("itl_token", table.itl_token, table.token_gap_samples)):
        _put_gaps(out, f"records.{name}", hists, gap_samples)
    _put_keys(out, "records.ok_with_gaps.groups", list(table.ok_with_gaps))
    out["records.ok_with_gaps.values"] = np.array(list(table.ok_with_gaps.values()), dtype=np.int64)
    tokens = list(table.tokens_per_s.items())
    _put_keys(out, "records.tokens.groups", [k for k, _ in tokens])
    out["records.tokens.lengths"] = np.array([len(per_second) for _, per_second in tokens], dtype=np.int64)
    out["records.tokens.seconds"] = np.array([s for _, d in tokens for s in d], dtype=np.int64)
    out["records.tokens.values"] = np.array([v for _, d in tokens for v in d.values()], dtype=np.float64)
    out["records.counters"] = np.array([table.warmup, table.cancelled, table.unreadable], dtype=np.int64)
    out["records.first_unreadable"] = np.array([table.first_unreadable], dtype=str)
    return out


def _put_gaps(out: dict[str, np.ndarray], prefix: str, hists: dict[GroupKey, GapHistogram],
              gap_samples: dict[GroupKey, list[np.ndarray]]) -> None:
    """Pooled gap histograms and gap samples per group under ``prefix`` (:func:`_get_gaps` reads them)."""
    itl = list(hists.items())
    _put_keys(out, f"{prefix}.groups", [k for k, _ in itl])
    arrays = [h.arrays() for _, h in itl]
    out[f"{prefix}.lengths"] = np.array([len(keys) for keys, _ in arrays], dtype=np.int64)
    out[f"{prefix}.keys"] = np.concatenate([keys for keys, _ in arrays] or [np.zeros(0, np.int64)])
    out[f"{prefix}.counts"] = np.concatenate([counts for _, counts in arrays] or [np.zeros(0, np.int64)])
    out[f"{prefix}.count"] = np.array([h.count for _, h in itl], dtype=np.int64)
    out[f"{prefix}.stats"] = np.array([[h.sum, h.min, h.max] for _, h in itl],
                                      dtype=np.float64).reshape(-1, 3)
    samples = list(gap_samples.items())
    _put_keys(out, f"{prefix}.samples.groups", [k for k, _ in samples])
    out[f"{prefix}.samples.records"] = np.array([len(kept) for _, kept in samples], dtype=np.int64)
    kept_all = [gaps for _, kept in samples for gaps in kept]
    out[f"{prefix}.samples.lengths"] = np.array([len(g) for g in kept_all], dtype=np.int64)
    out[f"{prefix}.samples.gaps"] = np.concatenate(kept_all or [np.zeros(0, np.float32)]).astype(np.float32)


def _get_gaps(data: Any, prefix: str) -> tuple[dict[GroupKey, GapHistogram],
                                               dict[GroupKey, list[np.ndarray]]]:
    itl: dict[GroupKey, GapHistogram] = {}
    counts = _split(data[f"{prefix}.counts"], data[f"{prefix}.lengths"])
    for i, (key, keys) in enumerate(zip(_get_keys(data, f"{prefix}.groups"),
                                        _split(data[f"{prefix}.keys"], data[f"{prefix}.lengths"]))):
        total, low, high = data[f"{prefix}.stats"][i].tolist()
        itl[key] = GapHistogram(dict(zip(keys.tolist(), counts[i].tolist())),
                                int(data[f"{prefix}.count"][i]), total, low, high)
    gaps = _split(data[f"{prefix}.samples.gaps"], data[f"{prefix}.samples.lengths"])
    bounds = np.concatenate([[0], np.cumsum(data[f"{prefix}.samples.records"])]).tolist()
    samples = {key: gaps[bounds[i]:bounds[i + 1]]
               for i, key in enumerate(_get_keys(data, f"{prefix}.samples.groups"))}
    return itl, samples


def _split(flat: np.ndarray, lengths: np.ndarray) -> list[np.ndarray]:
    return np.split(flat, np.cumsum(lengths)[:-1]) if len(lengths) else []


def _table_from(data: Any) -> RecordTable:
    itl, samples = _get_gaps(data, "records.itl")
    itl_token, token_samples = _get_gaps(data, "records.itl_token")
    ok_with_gaps = dict(zip(_get_keys(data, "records.ok_with_gaps.groups"),
                            data["records.ok_with_gaps.values"].tolist()))
    seconds = _split(data["records.tokens.seconds"], data["records.tokens.lengths"])
    values = _split(data["records.tokens.values"], data["records.tokens.lengths"])
    tokens = {key: dict(zip(s.tolist(), v.tolist()))
              for key, s, v in zip(_get_keys(data, "records.tokens.groups"), seconds, values)}
    warmup, cancelled, unreadable = data["records.counters"].tolist()
    return RecordTable(_get_frame(data, "records.frame"), itl, samples, ok_with_gaps, tokens, warmup,
                       cancelled, unreadable, str(data["records.first_unreadable"][0]), itl_token,
                       token_samples)


@dataclass
class CachedScores:
    """``scores.jsonl`` as read (None: no such file) and how many lines were skipped."""

    frame: pd.DataFrame | None
    skipped: int = 0


def _scores_arrays(scores: CachedScores) -> dict[str, np.ndarray]:
    out = {"scores.skipped": np.array([scores.skipped], dtype=np.int64)}
    if scores.frame is not None:
        _put_frame(out, "scores.frame", scores.frame)
    return out


# ---- the file ----
_CHECKS = ("version", "records.source", "records.settings", "scores.source")


class RunCache:
    """The cache file of one run directory: which parts are still valid, and writing it."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.path = run_dir / CACHE_FILE
        self._checks: dict[str, np.ndarray] = {}

    @classmethod
    def open(cls, run_dir: Path) -> RunCache:
        """The cache of ``run_dir``; only its small validity fields are read here."""
        cache = cls(run_dir)
        if not cache.path.is_file():        # none yet, or a FIFO or device np.load would wait on: no cache
            return cache
        try:
            with np.load(cache.path, allow_pickle=False) as data:
                checks = {name: data[name] for name in _CHECKS if name in data.files}
            if int(checks["version"][0]) == CACHE_VERSION:
                cache._checks = checks
        except _DAMAGED:
            pass
        return cache

    def _matches(self, name: str, value: np.ndarray) -> bool:
        held = self._checks.get(name)
        return held is not None and held.shape == value.shape and bool((held == value).all())

    def has_table(self, source: Stamp | None, stall_ms: float, sample_cap: int) -> bool:
        return source is not None and self._matches("records.source", source.encode()) and self._matches(
            "records.settings", np.array([stall_ms, float(sample_cap)]))

    def _read(self, prefix: str) -> dict[str, np.ndarray] | None:
        try:
            with np.load(self.path, allow_pickle=False) as data:
                return {name: data[name] for name in data.files if name.startswith(prefix)}
        except _DAMAGED:
            return None

    def table(self, source: Stamp | None, stall_ms: float, sample_cap: int) -> RecordTable | None:
        """The cached record table when it was read from ``source`` with these settings (else None)."""
        if not self.has_table(source, stall_ms, sample_cap):
            return None
        arrays = self._read("records.")
        if arrays is None:
            return None
        try:
            table = _table_from(arrays)
            written = f"{arrays['records.path'][0]}:"
        except _DAMAGED:
            return None
        if table.first_unreadable.startswith(written):      # the warning names the file where it is now
            table.first_unreadable = f"{self.run_dir / RECORDS_FILE}:" + table.first_unreadable[len(written):]
        return table

    def scores(self, source: Stamp | None) -> CachedScores | None:
        """The cached scores when they were read from ``source`` (None: a miss)."""
        if not self._matches("scores.source", _stamp_array(source)):
            return None
        arrays = self._read("scores.")
        try:
            if arrays is None:
                return None
            frame = _get_frame(arrays, "scores.frame") if "scores.frame.columns" in arrays else None
            return CachedScores(frame, int(arrays["scores.skipped"][0]))
        except _DAMAGED:
            return None

    def write(self, records_source: Stamp, table: RecordTable, stall_ms: float, sample_cap: int,
              scores_source: Stamp | None, scores: CachedScores) -> bool:
        """Write both parts; False (and nothing written) when the directory cannot take the file
        or a value cannot be held exactly. The file gets the permissions of records.jsonl."""
        try:
            arrays = {"version": np.array([CACHE_VERSION], dtype=np.int64),
                      "records.source": records_source.encode(),
                      "records.settings": np.array([stall_ms, float(sample_cap)]),
                      "records.path": np.array([str(self.run_dir / RECORDS_FILE)]),
                      "scores.source": _stamp_array(scores_source),
                      **_table_arrays(table), **_scores_arrays(scores)}
        except _Uncacheable:
            return False
        if os.path.lexists(self.path) and not stat.S_ISREG(os.lstat(self.path).st_mode):
            return False                    # never replace a link, FIFO or device someone put there
        try:
            mode = stat.S_IMODE(os.stat(self.run_dir / RECORDS_FILE).st_mode)
            fd, temp = tempfile.mkstemp(prefix=".compare-cache-", suffix=".tmp", dir=self.run_dir)
        except OSError:
            return False
        try:
            with os.fdopen(fd, "wb") as fh:
                os.fchmod(fh.fileno(), mode)
                np.savez(fh, allow_pickle=False, **arrays)
            os.replace(temp, self.path)
        except OSError:
            try:
                os.unlink(temp)
            except OSError:
                pass
            return False
        self._checks = {name: arrays[name] for name in _CHECKS}
        return True

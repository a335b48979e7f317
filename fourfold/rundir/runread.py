"""Reading run directories back (the other half of ``fourfold.rundir.runlog``).

- ``read_records(run_dir)`` yields ``RequestRecord``s from ``records.jsonl``. A line that is not
  JSON (a torn last line from a killed run, or a damaged line in the middle) is skipped with a
  ``RunLogWarning`` naming the file and line number; a line that is JSON but not a fourfold
  record (not an object, or without one of ``RECORD_KEYS``) raises ``RecordsFormatError``, and
  one whose ``schema`` is newer than this fourfold's ``SCHEMA_VERSION`` raises ``SchemaError``
  (upgrade, don't guess), as ``fourfold compare``'s reader (``fourfold.reports.records``) does. A run
  without records yields nothing.
- ``read_meta`` / ``read_summary`` return the parsed JSON object, or ``None`` when the file is
  missing (a killed run has no summary); a file that is not a JSON object raises ``RunDirError``.
- ``find_runs(base)`` lists run directories (``<YYYYmmddTHHMMSSZ>-<label>`` holding meta.json or
  records.jsonl), oldest first; ``latest_run(base, label)`` picks the newest, optionally only
  those whose meta.json label (else the name's label part) equals the sanitised ``label``.
"""

from __future__ import annotations

import json
import math
import os
import stat
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fourfold.errors import RecordsFormatError, RunDirError, SchemaError
from fourfold.measure.record import SCHEMA_VERSION, RequestRecord
from fourfold.rundir import plausible
from fourfold.rundir.runlog import META_FILE, RECORDS_FILE, RUN_NAME_RE, SUMMARY_FILE, sanitize_label
from fourfold.workloads.items import file_kind

PathLike = str | os.PathLike[str]
# what makes a JSON object a fourfold record (every reader refuses a line without them)
RECORD_KEYS = ("level", "scenario", "error_class", "started_at")


class RunLogWarning(UserWarning):
    """A line of records.jsonl was skipped."""


def require_regular(path: Path) -> None:
    """:class:`RunDirError` unless ``path`` is (a link to) a regular file: reading a FIFO would wait
    for a writer for good, a device would never end."""
    mode = os.stat(path).st_mode
    if not stat.S_ISREG(mode):
        raise RunDirError(f"{path}: is {file_kind(mode)}, not a regular file; the run directory is damaged")


def read_records(run_dir: PathLike, *, include_warmup: bool = True) -> Iterator[RequestRecord]:
    """Every complete record in ``run_dir/records.jsonl``, in file order. A line that is not JSON,
    and a record with a value of the wrong kind or an impossible one
    (:mod:`fourfold.rundir.plausible`), is skipped with a :class:`RunLogWarning`."""
    path = Path(run_dir) / RECORDS_FILE
    if not path.exists():
        return
    require_regular(path)
    start_anchor = plausible.anchor(path)
    with open(path, "rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            record = _parse_line(path, lineno, raw, start_anchor)
            if record is not None and (include_warmup or not record.warmup):
                yield record


def _parse_line(path: Path, lineno: int, raw: bytes,
                start_anchor: float | None = None) -> RequestRecord | None:
    if not raw.strip():
        return None
    try:
        data = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, UnicodeDecodeError; a 100,000-deep line
        where = "unreadable line" if raw.endswith(b"\n") else "torn last line"
        warnings.warn(f"{path}:{lineno}: skipped {where} ({len(raw)} bytes): {exc}",
                      RunLogWarning, stacklevel=3)
        return None
    check_record(data, path, lineno)
    why = (plausible.wrong_kind(data)
           or plausible.impossible(data, data.get(plausible.OFFSETS) or [], start_anchor))
    if why:
        warnings.warn(f"{path}:{lineno}: skipped {why}", RunLogWarning, stacklevel=3)
        return None
    return RequestRecord.from_dict(data)


def check_record(data: Any, path: PathLike, lineno: int) -> None:
    """A decoded line of records.jsonl must be a JSON object with every one of ``RECORD_KEYS`` and a
    ``schema`` this fourfold reads: else :class:`RecordsFormatError` / :class:`SchemaError`."""
    if not isinstance(data, dict):
        raise RecordsFormatError(f"{path}:{lineno}: expected a JSON object (a fourfold record), "
                                 f"got {type(data).__name__}")
    missing = [key for key in RECORD_KEYS if key not in data]
    if missing:
        raise RecordsFormatError(f"{path}:{lineno}: not a fourfold record (missing {', '.join(missing)}); "
                                 "is this a run directory written by fourfold?")
    schema = data.get("schema", 1)
    if not isinstance(schema, int) or isinstance(schema, bool) or schema > SCHEMA_VERSION:
        raise SchemaError(f"{path}:{lineno}: record schema {schema!r} is newer than the {SCHEMA_VERSION} "
                          "this fourfold reads; upgrade fourfold to read this run")


def _no_constant(name: str) -> float:
    """fourfold writes JSON without NaN/Infinity (allow_nan=False): one in its files is damage."""
    raise ValueError(f"{name} is not a number JSON allows")


def _finite(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"the number {text[:40]} is beyond a double")
    return value


def _finite_int(text: str) -> int:
    if len(text.lstrip("-")) > 308:          # beyond a double: float() of it would overflow later
        raise ValueError(f"the number {text[:40]}... is beyond a double")
    return int(text)


def read_json_object(path: Path) -> dict[str, Any] | None:
    """A run directory's JSON file (meta.json, summary.json) as a dict; None when it is missing,
    :class:`RunDirError` naming the file when it is not a readable JSON object."""
    if not path.exists():
        return None
    require_regular(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"), parse_constant=_no_constant, parse_float=_finite,
                          parse_int=_finite_int)
    except RecursionError:
        raise RunDirError(f"{path}: not readable JSON (nested too deeply); "
                          "the run directory is damaged") from None
    except (ValueError, OSError) as exc:
        raise RunDirError(f"{path}: not readable JSON ({exc}); the run directory is damaged") from None
    if not isinstance(data, dict):
        raise RunDirError(f"{path}: expected a JSON object, found {type(data).__name__}; "
                          "is this a fourfold run directory?")
    return data


def read_meta(run_dir: PathLike) -> dict[str, Any] | None:
    return read_json_object(Path(run_dir) / META_FILE)


def read_summary(run_dir: PathLike) -> dict[str, Any] | None:
    return read_json_object(Path(run_dir) / SUMMARY_FILE)


def is_run_dir(path: Path) -> bool:
    return (path.is_dir() and RUN_NAME_RE.match(path.name) is not None
            and ((path / META_FILE).exists() or (path / RECORDS_FILE).exists()))


def find_runs(base: PathLike = "runs") -> list[Path]:
    """Run directories directly under ``base``, oldest first (names start with the UTC time)."""
    root = Path(base)
    if not root.is_dir():
        return []
    return sorted((p for p in root.iterdir() if is_run_dir(p)), key=lambda p: p.name)


def run_label(run_dir: PathLike) -> str:
    """The run's label: meta.json's ``label``, else the directory name after the time stamp."""
    path = Path(run_dir)
    try:
        meta = read_meta(path)
    except RunDirError:
        meta = None
    if isinstance(meta, dict) and isinstance(meta.get("label"), str):
        return meta["label"]
    match = RUN_NAME_RE.match(path.name)
    return match.group(2) if match else path.name


def latest_run(base: PathLike = "runs", label: str | None = None) -> Path | None:
    """The newest run directory under ``base`` (with that label, when given), or None."""
    wanted = None if label is None else sanitize_label(label)
    for path in reversed(find_runs(base)):
        if wanted is None or sanitize_label(run_label(path)) == wanted:
            return path
    return None


__all__ = ["RECORD_KEYS", "RecordsFormatError", "RunDirError", "RunLogWarning", "SchemaError", "check_record",
           "find_runs", "is_run_dir", "latest_run", "read_json_object", "read_meta", "read_records",
           "read_summary", "run_label"]

"""Reading run directories back (the other half of ``measure.runlog``).

- ``read_records(run_dir)`` yields ``RequestRecord``s from ``records.jsonl``. A line that is not
  a complete JSON object (a torn last line from a killed run, or a damaged line in the middle)
  is skipped with a ``RunLogWarning`` naming the file and line number; a line whose ``schema``
  is newer than this fourfold's ``SCHEMA_VERSION`` raises ``SchemaError`` (upgrade, don't guess).
  A run without records yields nothing.
- ``read_meta`` / ``read_summary`` return the parsed JSON, or ``None`` when the file is missing
  (a killed run has no summary).
- ``find_runs(base)`` lists run directories (``<YYYYmmddTHHMMSSZ>-<label>`` holding meta.json or
  records.jsonl), oldest first; ``latest_run(base, label)`` picks the newest, optionally only
  those whose meta.json label (else the name's label part) equals the sanitised ``label``.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fourfold.measure.record import SCHEMA_VERSION, RequestRecord
from fourfold.measure.runlog import META_FILE, RECORDS_FILE, RUN_NAME_RE, SUMMARY_FILE, sanitize_label

PathLike = str | os.PathLike[str]


class RunLogWarning(UserWarning):
    """A line of records.jsonl was skipped."""


class SchemaError(ValueError):
    """A record was written by a newer fourfold than the one reading it."""


def read_records(run_dir: PathLike, *, include_warmup: bool = True) -> Iterator[RequestRecord]:
    """Every complete record in ``run_dir/records.jsonl``, in file order."""
    path = Path(run_dir) / RECORDS_FILE
    if not path.exists():
        return
    with open(path, "rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            record = _parse_line(path, lineno, raw)
            if record is not None and (include_warmup or not record.warmup):
                yield record


def _parse_line(path: Path, lineno: int, raw: bytes) -> RequestRecord | None:
    if not raw.strip():
        return None
    try:
        data = json.loads(raw.decode("utf-8"))
        if not isinstance(data, dict):
            raise ValueError(f"expected a JSON object, got {type(data).__name__}")
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        where = "unreadable line" if raw.endswith(b"\n") else "torn last line"
        warnings.warn(f"{path}:{lineno}: skipped {where} ({len(raw)} bytes): {exc}",
                      RunLogWarning, stacklevel=3)
        return None
    schema = data.get("schema", 1)
    if not isinstance(schema, int) or schema > SCHEMA_VERSION:
        raise SchemaError(f"{path}:{lineno}: record schema {schema!r} is newer than the {SCHEMA_VERSION} "
                          f"this fourfold reads; upgrade fourfold to read this run")
    return RequestRecord.from_dict(data)


def _read_json(path: Path) -> Any:
    if not path.exists():
        return None
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def read_meta(run_dir: PathLike) -> dict[str, Any] | None:
    return _read_json(Path(run_dir) / META_FILE)


def read_summary(run_dir: PathLike) -> dict[str, Any] | None:
    return _read_json(Path(run_dir) / SUMMARY_FILE)


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
    except (OSError, ValueError):
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

"""RunWriter: the run directory, the contract between a run and its reports.

``<base>/<UTC YYYYmmddTHHMMSSZ>-<label>/`` (a ``-2``, ``-3``... suffix when that name exists):

- ``meta.json``: label, target, options, versions, times, with secrets redacted (``redact``);
- ``records.jsonl``: one ``RequestRecord.to_json()`` per line, append-only. Writes are
  buffered; ``append`` flushes when more than ``FLUSH_INTERVAL_S`` passed since the last
  flush, so a steady run is on disk within about a second; callers with idle periods also
  call ``flush()`` from a timer (the Locust report tick). ``close()`` flushes and fsyncs.
  A killed run keeps every complete line; ``fourfold.measure.runread`` skips a torn last line;
- ``summary.json`` and other artefacts (``write_json``): written atomically (tmp + fsync +
  ``os.replace``), so a reader sees the old file or the new one, never half of one.

Redaction (``redact``), recursive over dicts/lists: a value is replaced by ``"***"`` when its
key, lower-cased with ``-`` read as ``_``, contains api_key, apikey, authorization, secret,
password, passwd, cookie, credential, private_key or bearer, is ``auth``/``*_auth``, or
*ends* with ``token`` or ``_key`` (token, hf_token, x-auth-token, apiToken, subscription-key; but
not max_tokens, output_tokens, tokenizer). Strings are also scrubbed: every credential this
process was configured with (``fourfold.measure.secrets.known``: the API key, every non-public
``--header`` value), ``Authorization: ...``-style header lines, ``Bearer <x>``, key-shaped words
(``sk-...``, ``hf_...``, ``ghp_...``), ``user:password@`` in URLs, sensitive ``?key=value``
query parameters, and in argv-style lists the value after a sensitive ``--flag`` (or after
``--flag=``).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import time
from pathlib import Path
from typing import Any, TextIO

from fourfold.measure.record import SCHEMA_VERSION, RequestRecord
from fourfold.measure.secrets import REDACTED, is_secret_key, known

FLUSH_INTERVAL_S = 1.0
META_FILE, RECORDS_FILE, SUMMARY_FILE = "meta.json", "records.jsonl", "summary.json"
RUN_NAME_RE = re.compile(r"^(\d{8}T\d{6}Z)-(.+)$")

_HEADER_LINE_RE = re.compile(r"^(\s*[\w-]+\s*:\s*)(.+)$", re.S)
_BEARER_RE = re.compile(r"(?i)\b(bearer)\s+[^\s\"',;]+")
_KEY_LIKE_RE = re.compile(r"\b(sk-[A-Za-z0-9_-]{6,}|hf_[A-Za-z0-9]{16,}|gh[pous]_[A-Za-z0-9]{16,})")
_URL_USERINFO_RE = re.compile(r"(?i)([a-z][a-z0-9+.-]*://[^/\s:@]*):[^@/\s]*@")
_QUERY_RE = re.compile(r"([?&;])([^=&#\s]+)=([^&#\s]*)")


def sanitize_label(label: str) -> str:
    """Keep [A-Za-z0-9._-], squash the rest to '-', no leading dots/dashes, at most 80 chars."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "-", label).strip(".-")[:80].rstrip(".-")
    return cleaned or "run"


def redact_text(text: str) -> str:
    """Scrub secrets from one string (configured credentials, header line, URL credentials/query,
    Bearer values)."""
    text = known().scrub(text)
    match = _HEADER_LINE_RE.match(text)
    if match and is_secret_key(match.group(1).strip().rstrip(":").strip()):
        return match.group(1) + REDACTED
    text = _BEARER_RE.sub(lambda m: f"{m.group(1)} {REDACTED}", text)
    text = _KEY_LIKE_RE.sub(REDACTED, text)
    text = _URL_USERINFO_RE.sub(lambda m: f"{m.group(1)}:{REDACTED}@", text)
    return _QUERY_RE.sub(lambda m: f"{m.group(1)}{m.group(2)}={REDACTED}" if is_secret_key(m.group(2))
                         else m.group(0), text)


def _redact_list(items: list[Any]) -> list[Any]:
    if len(items) == 2 and isinstance(items[0], str) and is_secret_key(items[0]):
        return [items[0], REDACTED]  # a (header name, value) pair
    out: list[Any] = []
    hide_next = False
    for item in items:
        if hide_next:
            out.append(REDACTED)
            hide_next = False
            continue
        if isinstance(item, str) and item.startswith("-"):
            flag, eq, _ = item.partition("=")
            if is_secret_key(flag.lstrip("-")):
                out.append(f"{flag}={REDACTED}" if eq else item)
                hide_next = not eq
                continue
        out.append(redact(item))
    return out


def redact(obj: Any) -> Any:
    """A copy of ``obj`` (dicts, lists, tuples, strings) with secrets replaced by ``"***"``."""
    if isinstance(obj, dict):
        return {redact_text(k) if isinstance(k, str) else k:
                REDACTED if is_secret_key(k) and v not in (None, "") else redact(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return _redact_list(list(obj))
    if isinstance(obj, str):
        return redact_text(obj)
    return obj


def jsonable(obj: Any) -> Any:
    """Plain JSON values: dataclasses/tuples/sets/paths converted, NaN and infinities -> None."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        obj = dataclasses.asdict(obj)
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    return str(obj)


def write_json_atomic(path: Path, obj: Any) -> None:
    """Write ``obj`` as JSON to ``path`` via a temporary file, fsync and ``os.replace``."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(jsonable(obj), fh, ensure_ascii=False, indent=1, allow_nan=False)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


class RunWriter:
    """Creates one run directory and writes its files (see module docstring)."""

    def __init__(self, label: str, base_dir: str | os.PathLike[str] = "runs", *,
                 now_s: float | None = None, flush_interval_s: float = FLUSH_INTERVAL_S) -> None:
        self.label = sanitize_label(label)
        self.created_at_s = time.time() if now_s is None else now_s
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(self.created_at_s))
        base = Path(base_dir)
        base.mkdir(parents=True, exist_ok=True)
        name, n = f"{stamp}-{self.label}", 1
        while True:
            self.run_dir = base / (name if n == 1 else f"{name}-{n}")
            try:
                self.run_dir.mkdir()
                break
            except FileExistsError:
                n += 1
        self.flush_interval_s = flush_interval_s
        self._records: TextIO | None = None
        self._last_flush_s = time.monotonic()
        self.records_written = 0

    def write_meta(self, meta: dict[str, Any]) -> Path:
        """meta.json with secrets redacted; ``label``, ``run_id``, ``created_at`` and
        ``record_schema`` are filled in when missing."""
        data = {"label": self.label, "run_id": self.run_dir.name, "record_schema": SCHEMA_VERSION,
                "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.created_at_s)), **meta}
        return self.write_json(META_FILE, redact(jsonable(data)))

    def append(self, record: RequestRecord) -> None:
        """Add one record line; flush if more than ``flush_interval_s`` passed since the last flush."""
        if self._records is None:
            self._records = open(self.run_dir / RECORDS_FILE, "a", encoding="utf-8")
        self._records.write(record.to_json() + "\n")
        self.records_written += 1
        if time.monotonic() - self._last_flush_s > self.flush_interval_s:
            self.flush()

    def flush(self) -> None:
        if self._records is not None:
            self._records.flush()
        self._last_flush_s = time.monotonic()

    def close(self) -> None:
        """Flush and fsync records.jsonl; safe to call twice."""
        if self._records is not None:
            self._records.flush()
            os.fsync(self._records.fileno())
            self._records.close()
            self._records = None

    def write_summary(self, summary: dict[str, Any]) -> Path:
        return self.write_json(SUMMARY_FILE, summary)

    def write_json(self, name: str, obj: Any) -> Path:
        """Write an artefact (e.g. ``metrics_series.json``) atomically into the run directory."""
        if not name or Path(name).name != name or name.startswith("."):
            raise ValueError(f"artefact name must be a plain file name, got {name!r}")
        path = self.run_dir / name
        write_json_atomic(path, obj)
        return path

    def __enter__(self) -> RunWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

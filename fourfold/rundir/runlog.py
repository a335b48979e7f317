"""RunWriter: the run directory, the contract between a run and its reports.

``<base>/<UTC YYYYmmddTHHMMSSZ>-<label>/`` (a ``-2``, ``-3``... suffix when that name exists):

- ``meta.json``: label, target, options, versions, times, with secrets redacted (``redact``);
- ``records.jsonl``: one ``RequestRecord.to_json()`` per line, append-only. Lines are
  queued; ``append`` flushes when more than ``FLUSH_INTERVAL_S`` passed since the last
  flush (or ``FLUSH_BYTES`` are queued), so a steady run is on disk within about a second;
  callers with idle periods also call ``flush()`` from a timer (the Locust report tick).
  ``close()`` flushes and fsyncs. A killed run keeps every complete line;
  ``fourfold.rundir.runread`` skips a torn last line. Nothing is lost silently: a record
  that cannot be serialised or written (disk full, an I/O error) is counted in
  ``records_lost`` (the first reason in ``loss_reason``), a failed write is cut back to the
  last whole line, and neither ``append`` nor ``flush`` raises. ``prepare()`` opens the file
  and sets one spare descriptor aside before a run's users start, so a process that later
  runs out of descriptors still writes its records and, with the spare, ``summary.json``;
- ``summary.json`` and other artefacts (``write_json``): written atomically (tmp + fsync +
  ``os.replace``), so a reader sees the old file or the new one, never half of one.

Redaction (``redact``), recursive over dicts/lists: a value is replaced by ``"***"`` when its
key, lower-cased with ``-`` read as ``_``, contains api_key, apikey, authorization, secret,
password, passwd, cookie, credential, private_key or bearer, is ``auth``/``*_auth``, or
*ends* with ``token`` or ``_key`` (token, hf_token, x-auth-token, apiToken, subscription-key; but
not max_tokens, output_tokens, tokenizer). Strings are also scrubbed: every credential this
process was configured with (``fourfold.rundir.secrets.known``: the API key, every non-public
``--header`` value), ``Authorization: ...``-style header lines, ``Bearer <x>``, key-shaped words
(``sk-...``, ``hf_...``, ``ghp_...``), ``user:password@`` in URLs, sensitive ``?key=value``
query parameters, and in argv-style lists the value after a sensitive ``--flag`` (or after
``--flag=``).
"""

from __future__ import annotations

import dataclasses
import errno
import json
import math
import os
import re
import tempfile
import time
from pathlib import Path
from typing import Any

from fourfold.errors import OptionError
from fourfold.measure.record import SCHEMA_VERSION, RequestRecord
from fourfold.rundir.secrets import REDACTED, is_secret_key, known

FLUSH_INTERVAL_S = 1.0
FLUSH_BYTES = 64 * 1024
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
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
    match = _HEADER_LINE_RE.match(text)
    if match and is_secret_key(match.group(1).strip().rstrip(":").strip()):
        return match.group(1) + REDACTED
    # the shapes first: a key-shaped word that merely shares its first characters with a configured
    # credential (two keys of one provider: "sk-proj-...") goes whole, not cut after the shared part
    text = _BEARER_RE.sub(lambda m: f"{m.group(1)} {REDACTED}", text)
    text = _KEY_LIKE_RE.sub(REDACTED, text)
    text = _URL_USERINFO_RE.sub(lambda m: f"{m.group(1)}:{REDACTED}@", text)
    text = _QUERY_RE.sub(lambda m: f"{m.group(1)}{m.group(2)}={REDACTED}" if is_secret_key(m.group(2))
                         else m.group(0), text)
    return known().scrub(text)


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


def redact_strings(obj: Any) -> Any:
    """A copy of plain JSON data with every string scrubbed (:func:`redact_text`), keys left alone:
    for artefacts such as summary.json, whose field names are no credentials but whose strings (the
    target URL, a sampler's error) may hold one the user typed."""
    if isinstance(obj, dict):
        return {k: redact_strings(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [redact_strings(v) for v in obj]
    return redact_text(obj) if isinstance(obj, str) else obj


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


def check_run_base(base_dir: str | os.PathLike[str]) -> None:
    """Raise :class:`~fourfold.errors.OptionError` unless run directories can be created under
    ``base_dir`` (``--run-dir``): its nearest existing folder must be a directory this process can
    write in. Creates nothing that stays (a run checks this before its users start)."""

    base = Path(base_dir or ".")
    existing = base
    while not existing.exists() and existing.parent != existing:
        existing = existing.parent
    if not existing.is_dir():
        where = "" if existing == base else f" ({existing} is in its path)"
        raise OptionError(f"--run-dir {base}: {existing} is a file, not a directory{where}; "
                          "give a directory to hold the run directories")
    try:
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as exc:
        raise OptionError(f"--run-dir {base}: cannot write in {existing} ({exc.strerror or exc}); "
                          "give a directory you can write to") from None


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
        self._records_fd: int | None = None
        self._size = 0                          # bytes of records.jsonl on disk: whole lines only
        self._queued: list[bytes] = []          # lines appended since the last flush
        self._queued_bytes = 0
        self._spare_fd: int | None = None       # given up for summary.json when descriptors run out
        self._last_flush_s = time.monotonic()
        self.records_written = 0                # lines on disk
        self.records_lost = 0                   # records that could not be serialised or written
        self.loss_reason = ""                   # why the first of them was lost

    def prepare(self) -> None:
        """Open records.jsonl and set one spare file descriptor aside now, before a run's users
        start (see module docstring); raises OSError when the run directory cannot be written."""
        self._open_records()
        if self._spare_fd is None:
            self._spare_fd = os.open(os.devnull, os.O_RDONLY | _CLOEXEC)

    def _open_records(self) -> int:
        if self._records_fd is None:
            fd = os.open(self.run_dir / RECORDS_FILE, os.O_WRONLY | os.O_CREAT | os.O_APPEND | _CLOEXEC,
                         0o644)
            self._size = os.fstat(fd).st_size
            self._records_fd = fd
        return self._records_fd

    def _lose(self, n: int, reason: str) -> None:
        self.records_lost += n
        self.loss_reason = self.loss_reason or reason

    def write_meta(self, meta: dict[str, Any]) -> Path:
        """meta.json with secrets redacted; ``label``, ``run_id``, ``created_at`` and
        ``record_schema`` are filled in when missing."""
        data = {"label": self.label, "run_id": self.run_dir.name, "record_schema": SCHEMA_VERSION,
                "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.created_at_s)), **meta}
        return self.write_json(META_FILE, redact(jsonable(data)))

    def append(self, record: RequestRecord) -> None:
        """Queue one record line; flush if more than ``flush_interval_s`` passed since the last flush
        or ``FLUSH_BYTES`` are queued. Never raises: a record that cannot be serialised is counted
        in ``records_lost``."""
        try:
            line = (record.to_json() + "\n").encode("utf-8")
        except Exception as exc:  # noqa: BLE001 - whatever a record holds, it is a counted loss, not a crash
            self._lose(1, f"a record could not be serialised ({type(exc).__name__}: {exc})"[:300])
            return
        if self._records_fd is None:
            try:
                self._open_records()
            except OSError:
                pass                            # flush tries again, and counts the loss
        self._queued.append(line)
        self._queued_bytes += len(line)
        if self._queued_bytes >= FLUSH_BYTES or time.monotonic() - self._last_flush_s > self.flush_interval_s:
            self.flush()

    def flush(self) -> None:
        """Write the queued lines. Never raises: lines that cannot be written are counted in
        ``records_lost`` and records.jsonl is cut back to its last whole line."""
        self._last_flush_s = time.monotonic()
        if not self._queued:
            return
        lines, self._queued, self._queued_bytes = self._queued, [], 0
        data = b"".join(lines)
        done = 0
        try:
            fd = self._open_records()
            while done < len(data):
                done += os.write(fd, data[done:])
        except OSError as exc:
            whole = data.rfind(b"\n", 0, done) + 1           # bytes of the lines written completely
            if done > whole and self._records_fd is not None:
                try:
                    os.ftruncate(self._records_fd, self._size + whole)   # no torn line in the middle
                except OSError:
                    pass
            self._size += whole
            written = data.count(b"\n", 0, whole)
            self.records_written += written
            self._lose(len(lines) - written, f"{self.run_dir / RECORDS_FILE}: {exc.strerror or exc}")
            return
        self._size += len(data)
        self.records_written += len(lines)

    def close(self) -> None:
        """Flush, fsync and close records.jsonl (and the spare descriptor); safe to call twice."""
        self.flush()
        fd, self._records_fd = self._records_fd, None
        if fd is not None:
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        spare, self._spare_fd = self._spare_fd, None
        if spare is not None:
            os.close(spare)

    def write_summary(self, summary: dict[str, Any]) -> Path:
        return self.write_json(SUMMARY_FILE, summary)

    def write_json(self, name: str, obj: Any) -> Path:
        """Write an artefact (e.g. ``metrics_series.json``) atomically into the run directory, every
        string scrubbed of credentials (:func:`redact_strings`)."""
        if not name or Path(name).name != name or name.startswith("."):
            raise ValueError(f"artefact name must be a plain file name, got {name!r}")
        path = self.run_dir / name
        obj = redact_strings(jsonable(obj))     # a key typed into --host or --metrics-url stays out too
        try:
            write_json_atomic(path, obj)
        except OSError as exc:
            if exc.errno not in (errno.EMFILE, errno.ENFILE) or self._spare_fd is None:
                raise
            os.close(self._spare_fd)           # out of descriptors: this file gets the spare one
            self._spare_fd = None
            write_json_atomic(path, obj)
            try:
                self._spare_fd = os.open(os.devnull, os.O_RDONLY | _CLOEXEC)
            except OSError:
                pass
        return path

    def __enter__(self) -> RunWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

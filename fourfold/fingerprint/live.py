"""Live quality (``--score-live``): a sample of a running test's answers scored in a child process.

The load generator (gevent) must never run a model forward pass: it would hold up every stream's
timing. So the scoring lives in a plain Python child, ``python -m fourfold.fingerprint.live``, that
reads jobs from its stdin and writes results to its stdout, one JSON line each:

- the model loads first (the parent may start the child before its first test);
- first line in: ``{"meta": <meta.json-like dict>, "run_dir": "..."}``: the run's dataset is
  resolved and read as ``fourfold score`` reads it (:func:`fourfold.fingerprint.runscore.resolve_dataset`,
  ``load_run_dataset``); the child answers ``{"ready": true, "items": n, "cpu_s": ...}``
  (or ``{"error": "..."}``);
- then ``{"test": n, "record": {...}}`` per sampled answer (the fields scoring reads: ids, level,
  scenario, variant, text, finish_reason, error_class, extra), answered by
  ``{"test": n, "row": <a scores.jsonl line>, "cpu_s": ...}`` or ``{"test": n, "skipped": reason, ...}``.
  Each row comes from :func:`fourfold.fingerprint.runscore.score_records`, the code ``fourfold
  score`` runs, so a live similarity is the one ``fourfold score`` gives the same answer (to the
  embedding's float noise, ~1e-6: batches differ).

The child ends when its stdin closes (the parent exited, even by ``kill -9``: the pipe's last
writer is gone) or when its parent process is gone (checked every 0.5 s, for a child busy in a
forward pass). It runs with ``nice`` 10 and one torch thread, so the load generator keeps its CPU.

:class:`LiveSampler` (pure) is the parent's choice of which answers to send: 1 in ``every``
eligible answers, at most ``max_per_s`` a second (a token bucket one second deep); answers the
parent's queue has no room for are its ``dropped`` count, not this module's.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fourfold.fingerprint.rag import rag_dataset
from fourfold.fingerprint.runscore import make_embedder, resolve_dataset, score_records
from fourfold.measure.record import RequestRecord
from fourfold.workloads.formats import load_run_dataset

__all__ = ["LiveSampler", "RECORD_FIELDS", "eligible", "job_record", "main"]

# the record fields scoring reads (fourfold.fingerprint.runscore.select_records / score_records)
RECORD_FIELDS = ("request_id", "item_id", "level", "scenario", "variant", "text", "finish_reason",
                 "error_class")
_EXTRA_FIELDS = ("ignore_eos", "final")


def eligible(record: Any) -> bool:
    """Whether ``fourfold score`` would score this record, as far as the load generator can tell
    cheaply (the item's presence in the dataset is the child's to check)."""
    return (not record.warmup and record.error_class != "cancelled" and record.extra.get("final") is not False
            and record.ok and bool(record.text.strip()))


def job_record(record: Any) -> dict[str, Any]:
    """The part of a record the child needs, as a plain dict."""
    data = {name: getattr(record, name) for name in RECORD_FIELDS}
    data["extra"] = {k: record.extra[k] for k in _EXTRA_FIELDS if k in record.extra}
    return data


@dataclass
class LiveSampler:
    """1 in ``every`` eligible answers, at most ``max_per_s`` a second (0: no cap). Pure: the
    caller passes the clock."""

    every: int = 10
    max_per_s: float = 5.0
    seen: int = 0                 # eligible answers offered
    sampled: int = 0              # chosen
    capped: int = 0               # their turn came, but over the per-second cap
    _tokens: float = -1.0
    _last_s: float = 0.0

    def offer(self, now_s: float) -> bool:
        self.seen += 1
        if (self.seen - 1) % max(1, self.every):
            return False
        if self.max_per_s > 0:
            if self._tokens < 0:
                self._tokens, self._last_s = self.max_per_s, now_s
            self._tokens = min(self.max_per_s, self._tokens + (now_s - self._last_s) * self.max_per_s)
            self._last_s = now_s
            if self._tokens < 1.0:
                self.capped += 1
                return False
            self._tokens -= 1.0
        self.sampled += 1
        return True


# ---- the child process ----
def _watch_parent(parent: int, poll_s: float = 0.5) -> None:
    def poll() -> None:
        while os.getppid() == parent:
            time.sleep(poll_s)
        os.kill(os.getpid(), signal.SIGTERM)
    threading.Thread(target=poll, name="fourfold-live-parent", daemon=True).start()


def _send(out: Any, message: dict[str, Any]) -> None:
    out.write(json.dumps(message, ensure_ascii=False, separators=(",", ":")) + "\n")
    out.flush()


def _load_items(first: dict[str, Any]) -> dict[str, Any]:
    meta = first.get("meta") or {}
    run_dir = Path(first.get("run_dir") or ".")
    path = resolve_dataset(run_dir, meta, rag_dataset(meta, run_dir))
    return {item.id: item for item in load_run_dataset(path, meta.get("settings"))}


def serve(lines: Any, out: Any, embedder: Any = None) -> int:
    """Answer jobs from ``lines`` on ``out`` until the input ends (see module docstring)."""

    lines = iter(lines)
    try:
        if embedder is None:    # the model loads first: the parent may start this child ahead of its test
            embedder = make_embedder(threads=1)
            embedder.encode(["fourfold live quality"])
        first_line = next(lines, "")
        items = _load_items(json.loads(first_line) if first_line.strip() else {})
    except Exception as exc:  # noqa: BLE001 - any failure (no dataset, no model): one line back to the parent
        _send(out, {"error": f"{type(exc).__name__}: {exc}"})
        return 1
    _send(out, {"ready": True, "items": len(items), "cpu_s": round(time.process_time(), 3)})
    for line in lines:
        if not line.strip():
            continue
        job = json.loads(line)
        record = RequestRecord.from_dict(job["record"])
        answer: dict[str, Any] = {"test": job.get("test", 0)}
        if record.item_id not in items:
            answer["skipped"] = "unknown_item"
        else:
            try:
                answer["row"] = score_records([record], items, embedder, progress=False)[0].to_dict()
            except Exception as exc:  # noqa: BLE001 - one answer's failure is counted, never fatal
                answer["skipped"] = f"error: {type(exc).__name__}: {exc}"[:200]
        answer["cpu_s"] = round(time.process_time(), 3)
        _send(out, answer)
    return 0


def main() -> int:
    parent = int(os.environ.get("FOURFOLD_LIVE_PARENT", "0") or 0)
    if parent:
        _watch_parent(parent)
    try:
        os.nice(10)
    except OSError:
        pass
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    stdin = open(sys.stdin.fileno(), encoding="utf-8", errors="replace", closefd=False)
    out = open(os.dup(sys.stdout.fileno()), "w", encoding="utf-8")
    sys.stdout = sys.stderr          # whatever a library prints stays off the protocol
    try:
        return serve(stdin, out)
    except (BrokenPipeError, KeyboardInterrupt):
        return 0


if __name__ == "__main__":
    raise SystemExit(main())

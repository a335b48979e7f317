"""Bounded runs of the stock locustfiles against the real llama.cpp server, and the checks every run gets."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fourfold.measure.record import ERROR_CLASSES
from tests.conftest import REPO, preflight_requests, read_jsonl, run_locust
from tests.real.conftest import MODEL_ALIAS, LlamaServer

LOCUSTFILES = REPO / "fourfold" / "locustfiles"
# uvicorn's access log: one line per request the server answered, e.g.
#   INFO:     127.0.0.1:40312 - "POST /v1/chat/completions HTTP/1.1" 200 OK
_ACCESS = re.compile(r'"POST (/[^ "]*) HTTP/1\.1" (\d{3})')


@dataclass
class RealRun:
    rc: int
    output: str
    run_dir: Path
    summary: dict[str, Any]
    records: list[dict[str, Any]]
    meta: dict[str, Any]
    server_log: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def measured(self) -> list[dict[str, Any]]:
        return [r for r in self.records if not r.get("warmup") and r["error_class"] != "cancelled"]

    def classes(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for record in self.records:
            out[record["error_class"]] = out.get(record["error_class"], 0) + 1
        return out


def access_log_posts(log: str, path: str = "/v1/chat/completions") -> list[int]:
    """HTTP statuses of the POSTs to ``path`` in uvicorn's access log."""
    return [int(status) for p, status in _ACCESS.findall(log) if p == path]


def run_real(server: LlamaServer, base: Path, locustfile: str, *, users: int, seconds: float,
             extra: list[str] = (), host: str | None = None, timeout: float = 150) -> RealRun:
    """``locust -f <stock locustfile> --headless`` against the real server (or ``host``), run dir
    under ``base``."""
    base.mkdir(parents=True, exist_ok=True)
    mark = server.mark()
    args = ["-f", str(LOCUSTFILES / locustfile), "--headless", "-u", str(users), "-r", str(users),
            "-t", f"{seconds:g}s", "--host", host or server.url, "--model", MODEL_ALIAS,
            "--run-dir", str(base / "runs"), "--stop-timeout", "20", *extra]
    proc = run_locust(args, base, timeout=timeout)
    runs = sorted(p for p in (base / "runs").glob("*") if p.is_dir())
    output = proc.stdout + proc.stderr
    assert runs, f"no run directory (rc {proc.returncode}):\n{output[-3000:]}"
    run_dir = runs[-1]
    return RealRun(proc.returncode, output, run_dir, json.loads((run_dir / "summary.json").read_text()),
                   read_jsonl(run_dir / "records.jsonl"), json.loads((run_dir / "meta.json").read_text()),
                   server_log=server.log_since(mark))


def assert_every_request_classified(run: RealRun, allowed: set[str], *,
                                    path: str = "/v1/chat/completions") -> None:
    """No traceback, no client_error; every class known and allowed; one record per request the server
    answered (its access log), give or take the requests still queued when the run stopped."""
    assert "Traceback" not in run.output, run.output[-3000:]
    classes = run.classes()
    assert set(classes) <= set(ERROR_CLASSES), classes
    assert "client_error" not in classes, [r["error_detail"] for r in run.records
                                           if r["error_class"] == "client_error"]
    assert set(classes) <= allowed | {"cancelled"}, (classes, [r["error_detail"] for r in run.records][:5])
    answered = access_log_posts(run.server_log, path)
    assert set(answered) <= {200}, answered
    answered = answered[preflight_requests(run.run_dir):]       # the preflight's came first: no records
    sent = [r for r in run.records if not r.get("extra", {}).get("unsent")]
    cancelled = classes.get("cancelled", 0)
    # a request the stop cancelled may never have reached the handler (queued behind the model lock)
    assert len(sent) - cancelled <= len(answered) <= len(sent), (len(sent), cancelled, len(answered), classes)
    total = run.summary["total"]
    assert total["requests"] == len(run.measured), (total["requests"], len(run.measured))

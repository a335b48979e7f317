"""The hostile-server harness: a target that misbehaves on purpose, and a real fourfold run against it.

A hostile test has three parts::

    # tests/hostile/test_mine.py
    from tests.hostile import harness as h

    async def ping_only(conn: h.Conn, req: h.Request) -> None:      # a handler: one per request
        await conn.send_head(200, {"content-type": "text/event-stream"}, chunked=True)
        while True:
            await conn.send_chunk(b": ping\\n\\n")
            await conn.sleep(0.2)

    def test_ping_only_is_a_ttft_timeout(tmp_path):
        with h.HostileServer("tests.hostile.test_mine:ping_only") as server:
            run = h.run_level(server.url, tmp_path, users=2, seconds=4, extra=["--read-timeout", "1"])
        h.assert_clean(run, max_s=20)
        h.assert_one_record_per_request(run, server, {"ttft_timeout"})

**The server** runs in its own process (``python -m tests.hostile.serve``): the test process is
monkey-patched by gevent (tests/conftest.py), asyncio is not. The handler is named by
``"module:function"`` and imported there, so a test module holding handlers must import nothing
that patches gevent at module level (``tests.conftest``, ``locust``, ``fourfold.levels``); import
those inside test functions. A handler is ``async def handler(conn, req)``, called once per request
read from a connection (keep-alive: the next request on the same connection calls it again) until it
closes the connection (``conn.close()``) or the client does. ``req`` is a :class:`Request` (method,
path, headers (lower-case names), body bytes, ``json()``). An exception in a handler closes that
connection and is written to the server's stderr (``server.stderr()``), never into the client run.
``HostileServer(spec, tls=True)`` serves HTTPS with a self-signed certificate (pass ``--insecure``);
``param=`` hands a JSON value to the handler as ``conn.param``.

The server counts every request head it read completely (``server.requests``, after ``stop()`` or
at any time) and every connection it accepted (``server.connections``); counts are read from a
stats file the server rewrites after each event, so they hold after the server is stopped.

**The run** is a real headless ``locust`` process (:func:`run_level`): any stock locustfile, Locust's
``--csv`` and ``--html`` written next to the run directory, a hard wall-clock limit (a run that does
not end by itself is killed and the test fails on :func:`assert_clean`). :class:`Run` holds rc,
stdout, stderr, elapsed seconds, the run directory, its records and summary.

**The checks**: :func:`assert_clean` (ended by itself within ``max_s``, no traceback on stdout or
stderr, an expected exit code), :func:`assert_one_record_per_request` (every request the server saw is
exactly one record, in the expected classes; requests stopped before they left are marked unsent and
are not counted; ``cancelled`` only for the one request per user in flight at the stop, and only
when allowed) and :func:`assert_no_secret` (no planted secret, nor its JSON- or URL-escaped form, in
any file under the test's directory, nor on stdout/stderr).

Helpers to write responses: :func:`sse_event` / :func:`openai_chunk` build events,
``conn.send_head``, ``conn.send_chunk`` (chunked framing), ``conn.send_raw`` (bytes as they are),
``conn.send_response`` (a whole Content-Length response), ``conn.sleep``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests import forkserver

REPO = Path(__file__).resolve().parents[2]
LOCUSTFILES = REPO / "fourfold" / "locustfiles"


# ---------------------------------------------------------------- wire helpers (used by handlers)

@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body or b"null")


class Conn:
    """One accepted connection, as a handler sees it (asyncio streams underneath)."""

    def __init__(self, reader: Any, writer: Any, param: Any, counts: Any) -> None:
        self.reader, self.writer, self.param = reader, writer, param
        self._counts = counts
        self.closed = False
        self.index = 0            # requests read on this connection so far (1 for the first)

    async def read_request(self) -> Request | None:
        """The next request on this connection, or None when the client closed it."""
        import asyncio

        try:
            head = await self.reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            return None
        lines = head.decode("latin-1").split("\r\n")
        method, path, _ = (lines[0].split(" ", 2) + ["", ""])[:3]
        headers: dict[str, str] = {}
        for line in lines[1:]:
            if ":" in line:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
        body = b""
        if headers.get("content-length"):
            body = await self.reader.readexactly(int(headers["content-length"]))
        elif headers.get("transfer-encoding", "").lower() == "chunked":
            while True:
                size = int((await self.reader.readuntil(b"\r\n")).split(b";")[0], 16)
                data = await self.reader.readexactly(size + 2)
                body += data[:-2]
                if size == 0:
                    break
        self.index += 1
        self._counts.request()
        return Request(method, path, headers, body)

    async def send_raw(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def send_head(self, status: int = 200, headers: dict[str, str] | None = None, *,
                        chunked: bool = False, reason: str = "", version: str = "HTTP/1.1") -> None:
        lines = [f"{version} {status} {reason or _REASONS.get(status, 'Status')}"]
        for name, value in (headers or {}).items():
            lines.append(f"{name}: {value}")
        if chunked:
            lines.append("Transfer-Encoding: chunked")
        await self.send_raw(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))

    async def send_chunk(self, data: bytes) -> None:
        """One chunk of a chunked body (``b""`` ends the body)."""
        await self.send_raw(b"%x\r\n%s\r\n" % (len(data), data))

    async def send_response(self, status: int, body: bytes | str | dict | list,
                            headers: dict[str, str] | None = None,
                            content_type: str = "application/json") -> None:
        if isinstance(body, (dict, list)):
            body = json.dumps(body)
        if isinstance(body, str):
            body = body.encode()
        await self.send_head(status, {"Content-Type": content_type, "Content-Length": str(len(body)),
                                      **(headers or {})})
        await self.send_raw(body)

    async def send_sse(self, events: list[bytes], headers: dict[str, str] | None = None, *,
                       gap_s: float = 0.0, done: bool = True) -> None:
        """A chunked ``text/event-stream`` response: each event one chunk, ``data: [DONE]`` last unless
        ``done=False``, then the end of the body."""
        await self.send_head(200, {"Content-Type": "text/event-stream", **(headers or {})}, chunked=True)
        for event in events + ([b"data: [DONE]\n\n"] if done else []):
            await self.send_chunk(event)
            if gap_s:
                await self.sleep(gap_s)
        await self.send_chunk(b"")

    async def sleep(self, seconds: float) -> None:
        import asyncio

        await asyncio.sleep(seconds)

    def close(self) -> None:
        self.closed = True
        self.writer.close()


def sse_event(obj: Any, event: str | None = None) -> bytes:
    data = obj if isinstance(obj, (bytes, str)) else json.dumps(obj)
    data = data.encode() if isinstance(data, str) else data
    return (f"event: {event}\n".encode() if event else b"") + b"data: " + data + b"\n\n"


def openai_chunk(content: str | None = None, finish_reason: str | None = None,
                 usage: dict[str, Any] | None = None) -> bytes:
    """One OpenAI chat-completions stream event."""
    delta = {} if content is None else {"content": content}
    obj: dict[str, Any] = {"id": "x", "object": "chat.completion.chunk",
                           "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}
    if usage is not None:
        obj["usage"] = usage
    return sse_event(obj)


def good_stream(tokens: int = 3) -> list[bytes]:
    """A well-behaved answer: ``tokens`` content events, a stop, usage (send with ``conn.send_sse``)."""
    return ([openai_chunk(f"w{i} ") for i in range(tokens)]
            + [openai_chunk(None, "stop", {"prompt_tokens": 5, "completion_tokens": tokens})])


_REASONS = {100: "Continue", 103: "Early Hints", 200: "OK", 301: "Moved Permanently", 302: "Found",
            307: "Temporary Redirect", 308: "Permanent Redirect", 400: "Bad Request", 401: "Unauthorized",
            404: "Not Found", 429: "Too Many Requests", 500: "Internal Server Error",
            503: "Service Unavailable"}


# ---------------------------------------------------------------- the server process (test side)

class HostileServer:
    """``python -m tests.hostile.serve SPEC`` on 127.0.0.1; a context manager (``stop()`` on exit)."""

    def __init__(self, spec: str, *, tls: bool = False, param: Any = None,
                 start_timeout_s: float = 15.0) -> None:
        import tempfile

        self._dir = Path(tempfile.mkdtemp(prefix="hostile-"))
        self.stats_path = self._dir / "stats.json"
        self._stderr_path = self._dir / "stderr.txt"
        command = [sys.executable, "-m", "tests.hostile.serve", spec, "--stats", str(self.stats_path),
                   "--param", json.dumps(param)]
        if tls:
            command += ["--tls-dir", str(self._dir)]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
        self._stderr = open(self._stderr_path, "wb")   # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE,
                                        stderr=self._stderr, text=True)
        deadline = time.monotonic() + start_timeout_s
        line = ""
        while time.monotonic() < deadline:
            line = self.process.stdout.readline() if self.process.stdout else ""
            if line.startswith("listening "):
                break
            if not line and self.process.poll() is not None:
                break
        if not line.startswith("listening "):
            self.stop()
            raise RuntimeError(f"hostile server {spec} did not start: {self.stderr()[-2000:]}")
        self.url = line.split()[1]

    @property
    def counts(self) -> dict[str, int]:
        try:
            return json.loads(self.stats_path.read_text())
        except (OSError, ValueError):
            return {"requests": 0, "connections": 0}

    @property
    def requests(self) -> int:
        return self.counts["requests"]

    @property
    def connections(self) -> int:
        return self.counts["connections"]

    def stderr(self) -> str:
        try:
            return self._stderr_path.read_text(errors="replace")
        except OSError:
            return ""

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        if self.process.stdout:
            self.process.stdout.close()
        self._stderr.close()

    def __enter__(self) -> HostileServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def refused_url() -> str:
    """An http URL on 127.0.0.1 where nothing listens (connections are refused)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


# ---------------------------------------------------------------- the run

@dataclass
class Run:
    rc: int | None                  # None when the harness had to kill it
    stdout: str
    stderr: str
    elapsed_s: float
    base: Path                      # the test's directory: run dirs, Locust CSV/HTML, reports under it
    run_dir: Path | None
    records: list[dict[str, Any]] = field(default_factory=list)
    summary: dict[str, Any] | None = None

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    def classes(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for record in self.records:
            counts[record.get("error_class", "?")] = counts.get(record.get("error_class", "?"), 0) + 1
        return counts


def locust_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("LOCUST_HOST", "FOURFOLD_API_KEY")}
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


def run_level(host: str, base: Path, *, locustfile: str = "l1_throughput.py", users: int = 2,
              seconds: float = 4, extra: list[str] | None = None, env: dict[str, str] | None = None,
              kill_after_s: float = 90, warmup: int = 0, csv_html: bool = True,
              preexec_fn: Any = None, preflight: bool = False) -> Run:
    """Run ``locust -f <stock locustfile> --headless`` against ``host`` with the run directory, Locust's
    CSV (``base/locust_*.csv``) and HTML report (``base/locust.html``) under ``base``. Killed (rc None)
    after ``kill_after_s``. Without ``preflight``, ``--no-preflight``: these tests hold the load loop
    to a misbehaving server (one record per request it saw), which the preflight would refuse first."""
    base.mkdir(parents=True, exist_ok=True)
    args = ["-f", str(LOCUSTFILES / locustfile), "--headless",
            "-u", str(users), "-r", str(users), "-t", f"{seconds:g}s", "--host", host,
            "--run-dir", str(base / "runs"), "--warmup-requests", str(warmup), "--metrics-url", "off",
            "--stop-timeout", "2", *([] if preflight else ["--no-preflight"]), *(extra or [])]
    if csv_html:
        args += ["--csv", str(base / "locust"), "--html", str(base / "locust.html")]
    t0 = time.monotonic()
    proc = forkserver.popen(args, base, locust_env(env), session=True, preexec_fn=preexec_fn)
    try:
        stdout, stderr = proc.communicate(timeout=kill_after_s)
        rc: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        rc = None
    elapsed = time.monotonic() - t0
    runs = sorted(p for p in (base / "runs").glob("*") if p.is_dir()) if (base / "runs").is_dir() else []
    run_dir = runs[-1] if runs else None
    run = Run(rc, stdout, stderr, elapsed, base, run_dir)
    if run_dir is not None:
        records_path = run_dir / "records.jsonl"
        if records_path.exists():
            for line in records_path.read_text(encoding="utf-8", errors="replace").splitlines():
                try:
                    run.records.append(json.loads(line))
                except ValueError:
                    pass
        summary_path = run_dir / "summary.json"
        if summary_path.exists():
            run.summary = json.loads(summary_path.read_text())
    return run


# ---------------------------------------------------------------- the checks

def assert_clean(run: Run, *, max_s: float, rcs: tuple[int, ...] = (0, 1)) -> None:
    """Ended by itself within ``max_s`` seconds, with an exit code in ``rcs``, no traceback anywhere."""
    tail = run.output[-3000:]
    assert run.rc is not None, f"the run did not end by itself: killed after {run.elapsed_s:.0f} s\n{tail}"
    assert run.elapsed_s <= max_s, f"the run took {run.elapsed_s:.1f} s (limit {max_s} s)\n{tail}"
    assert "Traceback" not in run.output, run.output[-6000:]
    assert run.rc in rcs, f"exit code {run.rc}, expected one of {rcs}\n{tail}"


def counted_records(run: Run) -> list[dict[str, Any]]:
    """The records of requests that reached the wire (those stopped before they left are marked unsent)."""
    return [r for r in run.records if not (r.get("extra") or {}).get("unsent")]


def assert_one_record_per_request(run: Run, server: HostileServer, expected: set[str] | str, *,
                                  users: int | None = None,
                                  allow_cancelled: bool = True) -> list[dict[str, Any]]:
    """Every request the server saw is exactly one record, each in ``expected``. ``cancelled`` is
    accepted only for requests in flight at the stop (at most one per user), and only when allowed."""
    expected = {expected} if isinstance(expected, str) else set(expected)
    records = counted_records(run)
    assert len(records) == server.requests, (
        f"{len(records)} records, the server saw {server.requests} requests; classes {run.classes()}")
    cancelled = [r for r in records if r.get("error_class") == "cancelled" and "cancelled" not in expected]
    if cancelled:
        assert allow_cancelled, f"{len(cancelled)} cancelled records"
        limit = users if users is not None else len({r.get("user_id") for r in records})
        assert len(cancelled) <= limit, f"{len(cancelled)} cancelled records for {limit} users"
    wrong = [(r.get("error_class"), r.get("error_detail", "")[:200]) for r in records
             if r.get("error_class") not in expected | {"cancelled"}]
    assert not wrong, f"unexpected classes (expected {sorted(expected)}): {wrong[:5]}"
    return records


def escaped_forms(secret: str) -> set[str]:
    return {secret, json.dumps(secret)[1:-1], urllib.parse.quote(secret, safe=""),
            urllib.parse.quote_plus(secret)}


def assert_no_secret(run: Run, secrets: list[str], *, also: list[Path] | tuple[Path, ...] = ()) -> list[Path]:
    """No secret (nor its escaped forms) in any file under the run's base directory (run dirs, Locust
    CSV/HTML, reports written there), in ``also``, or on stdout/stderr. Returns the files searched."""
    files = [p for p in run.base.rglob("*") if p.is_file()] + [Path(p) for p in also]
    assert files, "no files to search"
    texts = {"stdout": run.stdout, "stderr": run.stderr}
    for path in files:
        texts[str(path)] = path.read_bytes().decode("utf-8", errors="replace")
    for secret in secrets:
        for form in escaped_forms(secret):
            leaks = [where for where, text in texts.items() if form in text]
            assert not leaks, f"secret {secret[:4]}... found in {leaks}"
    return files

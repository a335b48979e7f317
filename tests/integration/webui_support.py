"""Helpers for the web UI tests: real locust processes with the web UI on 127.0.0.1, HTTP polling."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from tests.conftest import LOCUST, free_port, locust_env

T = TypeVar("T")


def start_locust(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """``locust *args`` in ``cwd``, stderr into stdout: a fresh process, not a fork server's child
    (tests/forkserver.py): two web-UI tests (a second test's worker count, the L2 ladder panel's
    knee) failed in fresh-clone CI runs with forked masters and workers, not yet explained."""
    return subprocess.Popen([*LOCUST, *args], cwd=cwd, env={**locust_env(), **(env or {})},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def start_master_and_workers(args: list[str], cwd: Path, workers: int = 2, master_args: tuple[str, ...] = ()
                             ) -> tuple[str, subprocess.Popen[str], list[subprocess.Popen[str]]]:
    """A web-UI master (``args`` + ``master_args``) and ``workers`` workers (``args``) on loopback:
    (the web UI's base URL, the master, the workers). The caller waits for them and finishes them."""
    web_port, master_port = free_port(), free_port()
    master = start_locust([*args, "--master", "--master-bind-host", "127.0.0.1", "--master-bind-port",
                           str(master_port), "--web-host", "127.0.0.1", "--web-port", str(web_port),
                           *master_args], cwd)
    procs = [start_locust([*args, "--worker", "--master-host", "127.0.0.1",
                           "--master-port", str(master_port)], cwd)
             for _ in range(workers)]
    return f"http://127.0.0.1:{web_port}", master, procs


def ready_workers(base: str) -> int:
    """How many workers the master at ``base`` lists as ready."""
    return len([w for w in (get_json(base + "/stats/requests") or {}).get("workers") or ()
                if w["state"] == "ready"])


def finish(proc: subprocess.Popen[str], timeout: float = 30, terminate: bool = False) -> str:
    """Wait for ``proc`` (after SIGTERM when ``terminate``), kill it if it hangs; its output."""
    if terminate and proc.poll() is None:
        proc.terminate()
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
    return out or ""


def http_get(url: str, timeout: float = 5) -> tuple[int, str, str]:
    """(status, content type, body) of a GET; status 0 when nothing answered."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.status, resp.headers.get("Content-Type", ""), resp.read().decode("utf-8")
    except urllib.error.HTTPError as exc:
        return exc.code, "", exc.read().decode("utf-8", "replace")
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
        return 0, "", ""


def http_post_form(url: str, fields: dict[str, str], timeout: float = 10) -> dict[str, Any]:
    data = urllib.parse.urlencode(fields).encode()
    with urllib.request.urlopen(urllib.request.Request(url, data=data, method="POST"),
                                timeout=timeout) as resp:
        return json.loads(resp.read())


def get_json(url: str) -> dict[str, Any] | None:
    status, _, body = http_get(url)
    return json.loads(body) if status == 200 else None


def wait_for(probe: Callable[[], T | None], timeout: float, interval: float = 0.5, what: str = "") -> T:
    """Call ``probe`` until it returns something truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what or probe}")
        time.sleep(interval)


def extended(report: dict[str, Any] | None, key: str) -> list[dict[str, Any]]:
    """The rows of one extended table in a /stats/requests report."""
    for table in (report or {}).get("extended_stats") or ():
        if table.get("key") == key:
            return list(table.get("data") or ())
    return []


def row(rows: list[dict[str, Any]], name: str) -> dict[str, Any] | None:
    return next((r for r in rows if r.get("name") == name), None)


def locust_row(report: dict[str, Any], name: str) -> dict[str, Any] | None:
    return next((s for s in report.get("stats") or () if s.get("name") == name), None)

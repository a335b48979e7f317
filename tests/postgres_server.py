"""A private PostgreSQL server for the tests: Debian's binaries (``.ci/run`` installs the ``postgresql``
package when they are missing), a fresh cluster in a temporary directory, on 127.0.0.1 and a free
port, trust authentication, stopped and removed afterwards. As root, the server runs as the
``postgres`` user (initdb refuses root). Without the binaries the test is skipped, except under CI
(``$CI`` set), where it fails: CI must not pass without the real server."""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import free_port


def _bindir() -> Path | None:
    found = shutil.which("initdb")
    if found:
        return Path(found).resolve().parent      # (a link in /usr/local/bin: the rest lies beside its target)
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                      key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0)
    return Path(versions[-1]).parent if versions else None


@contextlib.contextmanager
def postgres_server(user: str = "fourfold") -> Iterator[tuple[str, int]]:
    """(host, port) of a running server whose superuser is ``user`` (any password is accepted)."""
    bindir = _bindir()
    if bindir is None:
        message = "PostgreSQL's initdb is not installed (Debian: apt-get install postgresql)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    prefix: list[str] = []
    root = tempfile.mkdtemp(prefix="fourfold-pg-", dir="/tmp")
    data = Path(root) / "data"
    data.mkdir()
    if os.geteuid() == 0:
        owner = pwd.getpwnam("postgres")
        for path in (root, data):
            os.chown(path, owner.pw_uid, owner.pw_gid)
        prefix = ["runuser", "-u", "postgres", "--"]
    proc = None
    try:
        subprocess.run([*prefix, str(bindir / "initdb"), "-D", str(data), "-U", user, "--auth=trust",
                        "-E", "UTF8", "--no-sync"], check=True, capture_output=True, text=True, timeout=120)
        port = free_port()
        proc = subprocess.Popen([*prefix, str(bindir / "postgres"), "-D", str(data), "-h", "127.0.0.1", "-p",
                                 str(port), "-k", str(data), "-c", "fsync=off", "-c", "max_connections=40"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while True:
            ready = subprocess.run([str(bindir / "pg_isready"), "-h", "127.0.0.1", "-p", str(port)],
                                   capture_output=True, timeout=10)
            if ready.returncode == 0:
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"PostgreSQL did not start: {proc.stderr.read() if proc.stderr else ''}")
            time.sleep(0.2)
        yield "127.0.0.1", port
    finally:
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
        shutil.rmtree(root, ignore_errors=True)

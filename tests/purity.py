"""Pure-code test folders (tests/unit, tests/reports): a test there that starts a process or binds a
socket (a server) fails, with what it started. Such a test belongs in tests/integration
(docs/development.md), so that those folders stay seconds long and hold on any machine, busy or not.

Python's audit hooks see every ``subprocess``, ``os.fork``/``posix_spawn``/``exec`` and
``socket.bind``; the hook is process-wide and cannot be removed, so it records only while a test
of such a folder runs (a whole-suite run goes on into tests/integration with it installed). A
folder's conftest.py imports :func:`no_process_or_server` to apply it.
"""

from __future__ import annotations

import platform
import sys
from collections.abc import Iterator

import pytest
import urllib3  # noqa: F401  (imported here, before the hook: it binds ::1 once to probe for IPv6)

platform.platform()     # runs `uname -p` once per process (cached after): not a test's doing

_STARTS = {"subprocess.Popen", "os.posix_spawn", "os.fork", "os.forkpty", "os.exec", "os.spawn", "os.system",
           "socket.bind"}
_seen: list[list[str]] = []          # the running unit test's list, while one runs


def _audit(event: str, args: tuple) -> None:
    if _seen and event in _STARTS:
        detail = repr(args[1])[:200] if event in ("subprocess.Popen", "socket.bind") else repr(args)[:200]
        _seen[-1].append(f"{event} {detail}")


sys.addaudithook(_audit)


@pytest.fixture(autouse=True)
def no_process_or_server(request: pytest.FixtureRequest) -> Iterator[None]:
    started: list[str] = []
    _seen.append(started)
    try:
        yield
    finally:
        _seen.remove(started)
    if started:
        pytest.fail(f"{request.node.nodeid} started a process or a server ({'; '.join(started)}): "
                    "this folder is pure code; move it to tests/integration", pytrace=False)

"""An embedded target ends with the process that started it.

The simulator and the RAG service run as child processes of a load generator (``locust`` with no
``--host``, ``fourfold demo``, the tests). Their launcher stops them on a clean exit, but ``kill -9``
of the parent runs no cleanup, and the children would keep their ports and CPU forever. So:

- the launcher (:func:`child_env`, used by ``fourfold.targets.launch.spawn_listening``) puts its pid
  in the child's environment (``FOURFOLD_PARENT_PID``), and ``FOURFOLD_PDEATHSIG=1`` when it
  starts the child from its main thread;
- the child (:func:`watch_parent`, first thing in ``python -m fourfold.targets.sim`` and
  ``python -m fourfold.targets.rag``) asks Linux for SIGTERM when its parent dies
  (``prctl(PR_SET_PDEATHSIG)``; only for a main-thread launcher, because Linux sends it when the
  *thread* that started the child ends), and on every platform watches ``os.getppid()`` from a
  daemon thread every 0.5 s: once the parent is gone the child is re-parented, and it sends
  itself SIGTERM. SIGTERM is the servers' ordinary clean stop.

A server started by hand (``fourfold sim``) has no ``FOURFOLD_PARENT_PID`` and is left alone.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading

PARENT_ENV = "FOURFOLD_PARENT_PID"
PDEATHSIG_ENV = "FOURFOLD_PDEATHSIG"
POLL_S = 0.5
_PR_SET_PDEATHSIG = 1


def child_env() -> dict[str, str]:
    """Environment entries for a child that must end with this process (the launcher's side)."""
    main_thread = threading.get_native_id() == os.getpid()   # Linux: the main thread's id is the pid
    return {PARENT_ENV: str(os.getpid()), PDEATHSIG_ENV: "1" if main_thread else "0"}


def watch_parent(poll_s: float = POLL_S) -> bool:
    """The child's side: end (SIGTERM to itself) when the launcher that set ``FOURFOLD_PARENT_PID``
    is gone. Returns False when there is no such launcher. The variables are removed from this
    process's environment, so nothing this child starts inherits them."""
    text = os.environ.pop(PARENT_ENV, "")
    pdeathsig = os.environ.pop(PDEATHSIG_ENV, "") == "1"
    if not text.isdigit():
        return False
    parent = int(text)
    if pdeathsig and sys.platform.startswith("linux"):
        _set_pdeathsig(signal.SIGTERM)
    if os.getppid() != parent:        # it died before the request above could take effect
        _terminate()
        return True
    threading.Thread(target=_poll, args=(parent, poll_s), name="fourfold-parent-watch", daemon=True).start()
    return True


def _poll(parent: int, poll_s: float) -> None:
    while os.getppid() == parent:
        threading.Event().wait(poll_s)
    _terminate()


def _terminate() -> None:
    os.kill(os.getpid(), signal.SIGTERM)


def _set_pdeathsig(signum: int) -> None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(signum), 0, 0, 0)
    except (OSError, AttributeError):
        pass                          # the poll thread still ends this process, half a second later


__all__ = ["PARENT_ENV", "PDEATHSIG_ENV", "child_env", "watch_parent"]

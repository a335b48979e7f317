"""gevent's insides that fourfold uses (checked against gevent 26.9.0).

The reactor (:mod:`fourfold.client.reactor`) reads a response's socket from a hub callback with
``recvmsg`` and the kernel's receive stamp, bypassing gevent's cooperative ``recv`` (a failed
attempt, an io watcher and a trip through the hub per read). For that it needs the OS socket
gevent wraps. Nothing here imports gevent: the socket is whatever object the caller holds.
"""

from __future__ import annotations

import socket
from typing import Any

__all__ = ["os_socket"]


def os_socket(sock: Any) -> socket.socket | None:
    """The non-blocking OS socket inside a gevent socket (gevent waits for readiness itself, so the
    socket under it never blocks), or None when ``sock`` is not one of gevent's (a socket of the
    unpatched standard library). Read once per request, when the reactor takes the socket over.

    Private name: ``socket._sock`` of ``gevent._socket3.socket`` (a slot set in its ``__init__``);
    checked against gevent 26.9.0."""
    return getattr(sock, "_sock", None)

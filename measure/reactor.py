"""One epoll reader for every streaming socket of a process (gevent, Linux, plain HTTP).

Under gevent each blocking ``recv`` costs a failed non-blocking attempt, an io watcher start/stop,
a trip through the hub and a second ``recv``: about 40 µs of CPU per received chunk here, most of
it in the kernel. A real engine emits the tokens of all sequences of a decode step together, so
most wake-ups find many sockets ready at once. The reactor exploits that: one greenlet waits on a
single epoll file descriptor, and when it wakes it drains *every* ready socket with one ``recv``
each, timestamps the bytes the moment they are read, queues them for the stream that owns the
socket, and schedules that stream's greenlet once. The stream's greenlet then only takes bytes
and timestamps off its queue.

Used by :mod:`measure.transport` for response bodies of plain-HTTP connections when gevent has
patched ``socket``; TLS sockets (which buffer inside ``ssl``) and other platforms keep the plain
blocking ``recv``.
"""

from __future__ import annotations

import collections
import time
from typing import Any

_EPOLLIN = 0x001
_RECV_BYTES = 65536


class Reader:
    """The queue of (perf_counter_ns, bytes | OSError) the reactor fills for one socket."""

    __slots__ = ("_reactor", "fd", "_recv", "queue", "waiter", "closed")

    def __init__(self, reactor: Reactor, fd: int, recv: Any) -> None:
        self._reactor = reactor
        self.fd = fd
        self._recv = recv
        self.queue: collections.deque[tuple[int, Any]] = collections.deque()
        self.waiter: Any = None
        self.closed = False

    def on_ready(self, now: Any) -> None:
        try:
            data: Any = self._recv(_RECV_BYTES)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            data = exc
        # Stamped after the read returns: bytes that arrived between the poll and this read must
        # not get an earlier time than they arrived (the error is only ever late, by the time the
        # reads before this one in the same pass took: microseconds).
        self.queue.append((now(), data))
        if not data or isinstance(data, OSError):
            self._reactor.unregister(self)   # EOF stays readable: stop polling it
        waiter = self.waiter
        if waiter is not None:
            self.waiter = None
            self._reactor.hub.loop.run_callback(waiter.switch)

    def read(self) -> tuple[int, Any]:
        """Block this greenlet until bytes (or EOF b"", or an OSError instance) are queued."""
        queue = self.queue
        while not queue:
            from gevent import getcurrent

            self.waiter = getcurrent()
            try:
                self._reactor.hub.switch()
            finally:
                self.waiter = None
        return queue.popleft()

    def close(self) -> None:
        if not self.closed:
            self._reactor.unregister(self)


class Reactor:
    def __init__(self) -> None:
        import gevent
        from gevent.monkey import get_original

        self.hub = gevent.get_hub()
        self._epoll = get_original("select", "epoll")()
        self._readers: dict[int, Reader] = {}
        self._greenlet = gevent.spawn(self._run)

    def register(self, sock: Any) -> Reader:
        raw = sock._sock                      # gevent's wrapped, non-blocking OS socket
        reader = Reader(self, sock.fileno(), raw.recv)
        self._readers[reader.fd] = reader
        self._epoll.register(reader.fd, _EPOLLIN)
        return reader

    def unregister(self, reader: Reader) -> None:
        if reader.closed:
            return
        reader.closed = True
        if self._readers.get(reader.fd) is reader:
            del self._readers[reader.fd]
            try:
                self._epoll.unregister(reader.fd)
            except (OSError, ValueError):
                pass

    def _run(self) -> None:
        hub = self.hub
        watcher = hub.loop.io(self._epoll.fileno(), 1)
        poll = self._epoll.poll
        readers = self._readers
        now = time.perf_counter_ns
        while True:
            hub.wait(watcher)
            for fd, _ in poll(0):
                reader = readers.get(fd)
                if reader is not None:
                    reader.on_ready(now)


_REACTORS: dict[int, Reactor] = {}


def get_reactor() -> Reactor | None:
    """The reactor of this process's gevent hub, or None where it cannot run."""
    try:
        import gevent
        from gevent.monkey import get_original, is_module_patched
    except ImportError:  # pragma: no cover
        return None
    if not is_module_patched("socket"):
        return None
    try:
        get_original("select", "epoll")
    except AttributeError:  # not Linux
        return None
    hub = gevent.get_hub()
    reactor = _REACTORS.get(id(hub))
    if reactor is None:
        reactor = _REACTORS[id(hub)] = Reactor()
    return reactor

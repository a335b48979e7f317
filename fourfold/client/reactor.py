"""Receive-side timestamping for every streaming socket of a process (gevent, Linux, plain HTTP).

Under gevent each blocking ``recv`` costs a failed non-blocking attempt, an io watcher start/stop,
a trip through the hub and a second ``recv``: about 40 µs of CPU per received chunk here, most of
it in the kernel, and every token wakes the process once. The reactor does three things instead:

- **Kernel receive timestamps.** Every connection has ``SO_TIMESTAMPNS`` on (see
  :func:`enable_timestamps`): the kernel stamps each segment when it arrives, and ``recvmsg``
  hands the stamp over with the bytes. A chunk's time is when it reached this host, not when a
  busy process got round to reading it, so the client's own scheduling delay drops out of TTFT
  and ITL. (On loopback the stamp is taken inside the sender's ``send``.) Where no stamp comes
  back, the time is ``perf_counter_ns()`` right after the read.
- **One epoll for all sockets in flight, drained from a hub callback.** When it is readable, one
  callback (no greenlet switch) reads every ready socket once and queues (time, bytes) for the
  stream that owns it. Where ``fourfold.client._hotpath`` was built, :meth:`Reactor.drain` is one
  C call (``_hotpath.drain``: the poll, each stamped read without the ancillary-data tuples of
  ``socket.recvmsg``, and :meth:`Reader.on_ready`'s bookkeeping on the reader's attributes, its
  ``_wake`` / ``_ended`` called back); otherwise the Python loop calls :meth:`Reader.on_ready`.
- **Coalesced wake-ups.** After a drain that found bytes the reactor stops watching its epoll
  and drains from a timer instead, once per libev tick (~1 ms), until a tick finds nothing;
  then it watches the epoll again. One process wake-up serves many tokens (64 streams
  at 10 ms/token: 3.3–4.5k voluntary context switches for ~77k tokens, instead of ~one per
  token), and the timing stays exact because of the stamps. The watcher stays stopped across
  ticks while reads keep coming: stopping and restarting it on every tick made
  libev re-add the reactor's epoll to its own on every tick, and Linux checks the whole nesting
  of an epoll added into another (``ep_loop_check``, ``reverse_path_check``): ~8 % of the
  process's CPU at 64 streams, growing with the number of sockets. Waiting must not make two
  tokens of one stream share a read, so every 0.25 s the reactor looks at how often a stream's
  read came less than :data:`DENSE_GAP_NS` after its previous one: above 1 % of the reads
  (streams at a few ms per token, not a server's occasional catch-up burst), it stops waiting
  for the next window.

The stream's greenlet is woken on every read of the head, then lazily (:meth:`Reader.body`): not
per chunk, but when the body can have ended (a read that ends like a chunked body's last chunk,
the announced length reached, EOF or an error), when more than :data:`WAKE_BYTES` are queued, or
when it has not run for :data:`WAKE_EVERY_NS` (so the caller's size and duration limits are still
checked while a stream runs). It then takes the queued pairs in one go.

Used by :mod:`fourfold.client.transport` for the head and body of each response on a plain-HTTP
connection when gevent has patched ``socket`` (the socket is registered before the request is sent);
TLS sockets (which buffer inside ``ssl``) and platforms without epoll keep the blocking ``recv``.
The OS socket inside gevent's comes from :func:`fourfold.adapters.gevent.os_socket`.
"""

from __future__ import annotations

import atexit
import collections
import socket
import struct
import sys
import time
from typing import Any

import gevent
from gevent import getcurrent
from gevent.monkey import get_original, is_module_patched

from fourfold.adapters.gevent import os_socket
from fourfold.client.native import drain as drain_native

_RECV_BYTES = 65536
WAKE_BYTES = 1 << 20                   # wake the reader when this much is queued
WAKE_EVERY_NS = 500_000_000            # ... or when it has not been woken for this long
DENSE_GAP_NS = 1_500_000               # a stream's reads closer than this are a "short gap"; when more
DENSE_SHARE = 0.01                     # than this share of a window's reads (and 2) had one, the
DENSE_WINDOW_NS = 250_000_000          # next window does not coalesce
COALESCE_S = 0.0005                    # the pause after a drain (libev rounds it up to its 1 ms tick)
_CHUNKED_END = b"\r\n\r\n"             # a chunked body ends with "0\r\n\r\n" (or trailers + CRLF CRLF)
_EPOLLIN = 0x001

# SO_TIMESTAMPNS / SCM_TIMESTAMPNS (Linux: 35 on every architecture but a few old ones)
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
_TIMESPEC = struct.Struct("@qq")
_ANC_BYTES = socket.CMSG_SPACE(_TIMESPEC.size) if hasattr(socket, "CMSG_SPACE") else 0


_ANCHOR: list[socket.socket] = []


def enable_timestamps(sock: socket.socket) -> bool:
    """Ask the kernel to stamp the segments ``sock`` receives (Linux); False where it cannot.

    Linux stamps packets only while some socket on the host wants stamps, and when none did the
    switch is flipped by a deferred kernel work item: the first packets after it may come without
    a stamp (the reader then falls back to ``perf_counter_ns()`` after the read). One idle UDP
    socket with the option on, kept for the life of the process, keeps the switch on between
    connections, so only the process's very first connection can meet that gap."""
    if not sys.platform.startswith("linux") or not _ANC_BYTES:
        return False
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        if not _ANCHOR:
            anchor = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            anchor.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
            _ANCHOR.append(anchor)
            atexit.register(anchor.close)
    except OSError:
        return False
    return True


class Reader:
    """The queue of (perf_counter_ns, bytes | exception) filled for one socket while a body is read."""

    __slots__ = ("_reactor", "fd", "_recvmsg", "_recv", "queue", "waiter", "closed", "last_ns",
                 "_queued", "_woken_ns", "_lazy", "_chunked", "_remaining")

    def __init__(self, reactor: Reactor, sock: Any, raw: Any) -> None:
        # ``raw``: the non-blocking OS socket gevent's ``sock`` wraps (fourfold.adapters.gevent)
        self._reactor = reactor
        self.fd = sock.fileno()
        self._recvmsg = raw.recvmsg if _ANC_BYTES else None
        self._recv = raw.recv
        self.queue: collections.deque[tuple[int, Any]] = collections.deque()
        self.waiter: Any = None
        self.closed = False
        self.last_ns = 0                       # when the last bytes arrived (0: none yet)
        self._queued = 0
        self._woken_ns = time.perf_counter_ns()
        self._lazy = False                     # the head: wake the reader on every read
        self._chunked = False
        self._remaining = -1

    def _read(self, offset_ns: int) -> tuple[int, Any, int]:
        """:meth:`on_ready`'s read: (t, bytes | OSError | None when nothing was there, now); the C
        drain does the same read (``_hotpath.recv_stamped`` is it alone, for the tests)."""
        try:
            if self._recvmsg is not None:
                data, ancdata, _, _ = self._recvmsg(_RECV_BYTES, _ANC_BYTES)
            else:
                data, ancdata = self._recv(_RECV_BYTES), ()
        except (BlockingIOError, InterruptedError):
            return 0, None, 0
        except OSError as exc:
            data, ancdata = exc, ()
        t = now_ns = time.perf_counter_ns()
        for _, kind, stamp in ancdata:
            if kind == SO_TIMESTAMPNS and len(stamp) >= 16:
                sec, nsec = _TIMESPEC.unpack_from(stamp)
                kernel = sec * 1_000_000_000 + nsec + offset_ns
                if 0 < kernel < t:
                    t = kernel
        return t, data, now_ns

    def body(self, framing: str, length: int = -1) -> None:
        """The head has been read: from now on wake the reader only when the body can have ended
        (``framing`` "chunked", "length" with ``length`` bytes still to come, or "close")."""
        self._lazy = True
        self._chunked = framing == "chunked"
        if framing == "length":
            self._remaining = length - sum(len(data) for _, data in self.queue if isinstance(data, bytes))

    def on_ready(self, offset_ns: int) -> None:
        """Read once. ``offset_ns`` turns a kernel (CLOCK_REALTIME) stamp into perf_counter time."""
        t, data, now_ns = self._read(offset_ns)
        if data is None:
            return
        last = self.last_ns
        if t < last:             # a stamp before the previous read's: the clocks disagreed (see _read)
            t = last
        self.queue.append((t, data))
        self.last_ns = t
        if last and t - last < DENSE_GAP_NS:
            self._reactor.short_gaps += 1
        if not data or isinstance(data, OSError):
            self._ended(now_ns)
            return
        n = len(data)
        self._queued += n
        if not self._lazy:
            end = True
        elif self._chunked:
            end = n < 5 or data.endswith(_CHUNKED_END)   # a torn last chunk arrives as a tiny read
        elif self._remaining >= 0:
            self._remaining -= n
            end = self._remaining <= 0
        else:
            end = False
        if end or self._queued >= WAKE_BYTES or now_ns - self._woken_ns >= WAKE_EVERY_NS:
            self._wake(now_ns)

    def _ended(self, now_ns: int) -> None:
        """EOF or a socket error was queued: stop polling (EOF stays readable) and wake the reader."""
        self._reactor.unregister(self)
        self._wake(now_ns)

    def _wake(self, now_ns: int) -> None:
        waiter = self.waiter
        if waiter is not None:
            self.waiter = None
            self._queued = 0
            self._woken_ns = now_ns
            self._reactor.hub.loop.run_callback(waiter.switch)

    def wake(self) -> None:
        """Wake the body loop now, to take what is queued (the read timeout's watchdog asks)."""
        self._wake(time.perf_counter_ns())

    def fail(self, exc: BaseException) -> None:
        """End the body with ``exc`` (e.g. a read timeout), queued after the bytes already received."""
        if not self.closed:
            self._reactor.unregister(self)
            now = time.perf_counter_ns()
            self.queue.append((now, exc))
            self._wake(now)

    def read(self) -> tuple[int, Any]:
        """Block this greenlet until bytes (or EOF b"", or an exception instance) are queued."""
        queue = self.queue
        while not queue:
            self.waiter = getcurrent()
            try:
                self._reactor.hub.switch()
            finally:
                self.waiter = None
        return queue.popleft()

    def close(self) -> None:
        self._reactor.unregister(self)


class Reactor:
    """The epoll set of one gevent hub's body sockets, drained from hub callbacks."""

    def __init__(self) -> None:
        self.hub = gevent.get_hub()
        self._epoll = get_original("select", "epoll")()
        self._readers: dict[int, Reader] = {}
        self.dense = False                   # streams' reads come too close together to coalesce
        self.short_gaps = 0                  # ... reads in this window that came < DENSE_GAP_NS after
        self._window_reads = 0               # the same stream's previous read
        self._window_start = time.perf_counter_ns()
        self.watcher_starts = 0              # how often the epoll's io watcher was (re)started
        loop = self.hub.loop
        self._watcher = loop.io(self._epoll.fileno(), 1)
        self._timer = loop.timer(COALESCE_S)
        self._watch()

    def register(self, sock: Any, raw: socket.socket) -> Reader:
        """Read ``sock`` (a gevent socket; ``raw`` the OS socket it wraps) from now on."""
        reader = Reader(self, sock, raw)
        self._readers[reader.fd] = reader
        try:
            self._epoll.register(reader.fd, _EPOLLIN)
        except FileExistsError:     # a closed socket's number reused while epoll still held it
            self._epoll.modify(reader.fd, _EPOLLIN)
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

    def drain(self) -> int:
        """Read every ready socket once (:meth:`Reader.on_ready`); returns how many were ready.
        Where ``fourfold.client._hotpath`` was built the poll and the reads are one C call
        (``drain``: the same steps, the reader's state kept in its attributes)."""
        readers = self._readers
        offset = realtime_offset_ns()
        if drain_native is not None:
            ready, short_gaps = drain_native(self._epoll.fileno(), readers, offset, DENSE_GAP_NS, WAKE_BYTES,
                                             WAKE_EVERY_NS)
            self.short_gaps += short_gaps
            self._window_reads += ready
            return ready
        events = self._epoll.poll(0)
        self._window_reads += len(events)
        for fd, _ in events:
            reader = readers.get(fd)
            if reader is not None:
                reader.on_ready(offset)
        return len(events)

    def _on_ready(self) -> None:
        try:
            self._pass()
        except KeyboardInterrupt as exc:
            self._interrupted(exc)

    def _pass(self) -> None:
        ready = self.drain()
        now = time.perf_counter_ns()
        if now - self._window_start >= DENSE_WINDOW_NS:
            self.dense = self.short_gaps > max(2, DENSE_SHARE * self._window_reads)
            self.short_gaps = self._window_reads = 0
            self._window_start = now
        if ready and not self.dense:         # look again after one timer tick: more will be ready
            if self._watcher.active:
                self._watcher.stop()
            # a new timer each tick: a libev timer that has fired keeps its (spent) remaining time,
            # so starting the same one again would fire it at once, not a tick later
            self._timer = self.hub.loop.timer(COALESCE_S)
            self._timer.start(self._on_ready)
        elif not self._watcher.active:       # a quiet tick (or dense reads): wait on the epoll again
            self._watch()

    def _watch(self) -> None:
        self.watcher_starts += 1
        self._watcher.start(self._on_ready)

    def _interrupted(self, exc: KeyboardInterrupt) -> None:
        """Ctrl-C / SIGINT landed while a hub callback ran Python code: keep watching (a stopped
        watcher with no timer would leave every stream unread while the run shuts down) and hand
        the interrupt to the main greenlet as gevent does for a failed watcher, minus the
        traceback it prints (Locust's SIGINT shutdown is the normal way to stop a run)."""
        if not self._watcher.active and not self._timer.active:
            self._watch()
        self.hub.handle_system_error(type(exc), exc)


_REACTORS: dict[int, Reactor] = {}


def _reactor() -> Reactor | None:
    """This process's (this hub's) reactor, created on first use; None where it cannot run (no
    gevent patching of ``socket``, or no epoll)."""
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


def realtime_offset_ns() -> int:
    """``perf_counter_ns() - time_ns()``: what turns a kernel stamp (CLOCK_REALTIME) into the
    records' clock. Read between two perf_counter reads and taken at their midpoint, from the
    tightest of up to three tries: a process preempted between two plain reads (a busy machine) got
    an offset off by the whole preemption, and a stamp that early, before its bytes were sent (36 us
    seen beside two CPU hogs)."""
    best_width, best = -1, 0
    for _ in range(3):
        before = time.perf_counter_ns()
        real = time.time_ns()
        after = time.perf_counter_ns()
        if best_width < 0 or after - before < best_width:
            best_width, best = after - before, (before + after) // 2 - real
        if best_width < 2_000:
            break
    return best


def reader_for(sock: Any) -> Reader | None:
    """A :class:`Reader` that owns ``sock``'s reads from now on (the response head first, see
    :meth:`Reader.body`), or None where the reactor cannot serve it (then read the socket)."""
    raw = os_socket(sock)
    if raw is None:                      # not a gevent socket
        return None
    reactor = _reactor()
    return reactor.register(sock, raw) if reactor is not None else None


def drain() -> None:
    """Read every ready body socket now, from a greenlet about to do a long piece of work (late
    parsing, writing a record). gevent runs up to 50 queued greenlet switches before it polls for
    I/O again; when many streams end together that can hold the hub for tens of milliseconds, and
    a socket read that late may find two tokens of one stream merged into one read."""
    reactor = _REACTORS.get(id(_hub())) if _REACTORS else None
    if reactor is not None:
        reactor.drain()


def _hub() -> Any:
    return gevent.get_hub()


def not_before(times: list[int], t0: int) -> tuple[list[int], int]:
    """``times`` with those before ``t0`` (a request's send) raised to it, and how many were.

    No byte of an answer arrives before its request was sent; a receive stamp that reads so is the
    kernel's CLOCK_REALTIME and perf_counter disagreeing (by up to ~0.5 ms on a busy VM, beside CPU
    hogs: see ``realtime_offset_ns``) and would make a TTFT negative, a record every reader leaves
    out as impossible (rundir.plausible) while the live figures counted it."""
    early = next((i for i, t in enumerate(times) if t >= t0), len(times))
    return [t0] * early + times[early:], early

"""RawH1Transport: a lean HTTP/1.1 transport for httpx, built for timing streams.

httpx's default transport (httpcore + h11) costs about 130 µs of CPU per received chunk under
gevent on this machine; a plain socket loop costs about 38 µs (``docs/architecture.md``). At
thousands of tokens per second that difference *is* the client's queueing delay, which lands in
every TTFT and ITL it measures. This transport keeps httpx's API (``Client``, auth, headers,
``MockTransport`` for unit tests) and replaces the wire layer: its own keep-alive pool, the request
written with one ``sendall`` (head and body apart past 64 KiB), and the response read with each
piece's receive time. Under gevent over plain HTTP on Linux the socket is handed to the process's
reactor before the request is sent (:mod:`~fourfold.client.reactor`: one epoll, kernel-stamped
reads from a hub callback, in C where ``_hotpath`` was built), so the head and the body come as
queued ``(stamp, bytes)`` pairs; over TLS, elsewhere or without gevent each read is one blocking
``recv``. Chunked framing is decoded incrementally (:class:`~fourfold.client.h1wire.ChunkedDecoder`;
whole chunks in C, ``_hotpath.take_chunks``).

Connection facts go into ``response.extensions["fourfold"]`` as :class:`ConnFacts`: whether the
connection was reused, how long connecting took, and ``t_start_ns`` (``perf_counter_ns`` when the
request entered the transport; the zero point of TTFT and E2E).

The transport is three modules: this one (connections, the pool, sending a request and reading its
head), :mod:`~fourfold.client.h1wire` (the HTTP/1.1 wire format, without sockets) and
:mod:`~fourfold.client.h1body` (the response body, read with each piece's receive time).

Errors are raised as httpx's own exception classes, so callers classify one exception tree::

    httpx.TransportError
      ├── ConnectError / ConnectTimeout   could not open the connection
      ├── ReadTimeout                     no content within the read timeout (h1body: keep-alive
      │                                   comments and a head dripped a line at a time do not count)
      ├── RemoteProtocolError             broken framing, or the peer closed mid-body
      └── ReadError / WriteError          socket errors after connecting
"""

from __future__ import annotations

import functools
import select
import socket
import ssl
import time
from dataclasses import dataclass
from typing import Any

import httpx
from gevent import monkey

from fourfold.client.h1body import RawStream, Watchdog, close_quietly, read_pieces, reader_read, socket_read
from fourfold.client.h1wire import ChunkedDecoder, StaleConnection, framing, read_head, request_head
from fourfold.client.reactor import enable_timestamps, reader_for

try:        # the system's select, never gevent's: gevent's yields to every other ready greenlet even
    # with a zero timeout (gevent.sleep(0)), and it runs between a request's clock start and its send
    # (256 streams: several ms at the median, ~80 ms at worst, all of it counted as TTFT)
    from gevent.monkey import get_original

    _select = get_original("select", "select")
except ImportError:  # pragma: no cover
    _select = select.select

__all__ = ["ChunkedDecoder", "ConnFacts", "RawH1Transport", "read_pieces"]


def _gevent_active() -> bool:
    return monkey.is_module_patched("socket")


@dataclass
class ConnFacts:
    reused: bool
    connect_ms: float | None
    t_start_ns: int
    http_version: str = "HTTP/1.1"
    recv_ns: list[int] | None = None    # receive time of each body piece the stream yields
    # The pooled connection this request would have reused had been closed by the server (idle
    # keep-alive timeout): the request had to open a new one (a reconnect stall).
    reconnected: bool = False
    t_head_ns: int | None = None        # receive time of the read that completed the response head
    # bytes a pooled connection held that nobody asked for (an unsolicited response sent after the
    # previous answer on it ended): the connection was dropped and this request opened a new one
    unsolicited_bytes: int = 0
    # the phases of a new connection (None on a reused one; tls_ms None over plain TCP): name lookup,
    # TCP connect, TLS handshake; and when the request was sent: its one write began (a request under
    # 64 KiB: the kernel takes it at once), or its body's write returned (the head stamped first: began)
    dns_ms: float | None = None
    tcp_ms: float | None = None
    tls_ms: float | None = None
    t_sent_ns: int | None = None

    def phases(self) -> dict[str, float]:
        """The request's phases in ms (measure.metrics' ``PHASES``): those of a new connection, the
        request written (``send_ms``: from the connection ready, or taken from the pool) and the wait
        for the response head (``wait_ms``: last byte written -> head)."""
        out = {name: value for name, value in (("dns_ms", self.dns_ms), ("tcp_ms", self.tcp_ms),
                                               ("tls_ms", self.tls_ms)) if value is not None}
        if self.t_sent_ns is not None:
            ready = self.t_start_ns + (self.connect_ms or 0.0) * 1e6
            out["send_ms"] = max(0.0, (self.t_sent_ns - ready) / 1e6)
            if self.t_head_ns is not None:
                out["wait_ms"] = max(0.0, (self.t_head_ns - self.t_sent_ns) / 1e6)
        return out


class _Conn:
    __slots__ = ("sock", "last_used", "key")

    def __init__(self, sock: socket.socket, key: tuple[str, str, int]) -> None:
        self.sock = sock
        self.key = key
        self.last_used = time.monotonic()

    def is_dead(self) -> bool:
        """An idle pooled connection may carry the next request only while nothing can be read from
        it: readable means the server closed it (EOF, a reset) or sent bytes nobody asked for (an
        unsolicited response, which must not become the next request's answer). A zero-timeout
        ``select`` tells, for plain and TLS sockets alike (a TLS socket cannot be peeked:
        ``recv(1, MSG_PEEK)`` raises ValueError there); for TLS, bytes OpenSSL has already
        decrypted and buffered (``pending()``) count as readable too."""
        sock = self.sock
        try:
            pending = getattr(sock, "pending", None)
            if pending is not None and pending():
                return True
            readable, _, _ = _select([sock], [], [], 0)
        except (OSError, ValueError):
            return True
        return bool(readable)

    def unread_bytes(self) -> int:
        """How many bytes a readable idle connection holds (it is being dropped): 0 when the server
        closed it, else bytes nobody asked for."""
        try:
            self.sock.settimeout(0)
            return len(self.sock.recv(65536))
        except (OSError, ValueError):      # nothing after all (TLS: a partial record), a reset
            return 0


class RawH1Transport(httpx.BaseTransport):
    """HTTP/1.1 over plain (or TLS) sockets with keep-alive; one pool per transport (per user)."""

    def __init__(self, ssl_context: ssl.SSLContext | None = None, connect_timeout_s: float = 10.0,
                 read_timeout_s: float = 60.0, max_idle_per_host: int = 4) -> None:
        self._ssl_context = ssl_context
        self._connect_timeout_s = connect_timeout_s
        self._read_timeout_s = read_timeout_s
        self._max_idle_per_host = max_idle_per_host
        self._idle: dict[tuple[str, str, int], list[_Conn]] = {}
        self._gevent = _gevent_active()

    # -- pool --
    def _release(self, conn: _Conn) -> None:
        conn.last_used = time.monotonic()
        idle = self._idle.setdefault(conn.key, [])
        if len(idle) < self._max_idle_per_host:
            idle.append(conn)
        else:
            close_quietly(conn.sock)

    def _take_idle(self, key: tuple[str, str, int]) -> tuple[_Conn | None, bool, int]:
        """A live idle connection (or None), whether a dead one (closed by the server, or holding
        bytes nobody asked for) was dropped, and how many such unsolicited bytes were dropped."""
        idle = self._idle.get(key)
        stale = False
        unsolicited = 0
        while idle:
            conn = idle.pop()
            if not conn.is_dead():
                return conn, stale, unsolicited
            stale = True
            unsolicited += conn.unread_bytes()
            close_quietly(conn.sock)
        return None, stale, unsolicited

    def _connect(self, key: tuple[str, str, int], phases: dict[str, float]) -> _Conn:
        """A new connection; ``phases`` gets its ``dns_ms``, ``tcp_ms`` and (https) ``tls_ms``."""
        scheme, host, port = key
        t0 = time.perf_counter_ns()
        try:
            addresses = socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM)
        except OSError as exc:
            raise httpx.ConnectError(f"cannot resolve {host}: {exc}") from None
        t1 = time.perf_counter_ns()
        phases["dns_ms"] = (t1 - t0) / 1e6
        sock = self._open(host, port, addresses)
        t2 = time.perf_counter_ns()
        phases["tcp_ms"] = (t2 - t1) / 1e6
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if scheme != "https":
            enable_timestamps(sock)     # kernel receive stamps for the reactor (client.reactor)
        if scheme == "https":
            ctx = self._ssl_context or ssl.create_default_context()
            try:
                sock = ctx.wrap_socket(sock, server_hostname=host)
            except (ssl.SSLError, OSError) as exc:
                close_quietly(sock)
                raise httpx.ConnectError(f"TLS handshake with {host}:{port} failed: {exc}") from None
            phases["tls_ms"] = (time.perf_counter_ns() - t2) / 1e6
        sock.settimeout(None if self._gevent else self._read_timeout_s)
        return _Conn(sock, key)

    def _open(self, host: str, port: int, addresses: list[Any]) -> socket.socket:
        """A TCP connection to the first of ``addresses`` that accepts (socket.create_connection's loop,
        after the lookup it does inside, timed apart here)."""
        error: OSError | None = None
        for family, kind, proto, _, address in addresses:
            try:
                sock = socket.socket(family, kind, proto)      # (out of descriptors: EMFILE)
            except OSError as exc:
                raise httpx.ConnectError(f"cannot connect to {host}:{port}: {exc}") from None
            try:
                sock.settimeout(self._connect_timeout_s)
                sock.connect(address)
                return sock
            except TimeoutError:
                close_quietly(sock)
                raise httpx.ConnectTimeout(f"connecting to {host}:{port} timed out") from None
            except OSError as exc:
                close_quietly(sock)
                error = exc
        raise httpx.ConnectError(f"cannot connect to {host}:{port}: {error or 'no address'}") from None

    # -- request --
    def handle_request(self, request: httpx.Request) -> httpx.Response:
        t_start_ns = time.perf_counter_ns()
        url = request.url
        key = (url.scheme, url.host, url.port or (443 if url.scheme == "https" else 80))
        timeouts = request.extensions.get("timeout") or {}
        head = request_head(request)
        body = request.read()
        payload = head + body if len(body) < 65536 else None
        # request.extensions["fourfold_progress"] (a dict the caller keeps): "sent" is False until the
        # request is on the wire, so a caller stopped before that knows the target never saw it
        progress = request.extensions.get("fourfold_progress")
        if progress is not None:
            progress["sent"] = False
        conn, stale, unsolicited = self._take_idle(key)
        reused = conn is not None
        connect_ms = None
        phases: dict[str, float] = {}
        t_sent_ns: int | None = None
        for attempt in (0, 1):
            if conn is None:
                t_connect = time.perf_counter_ns()
                phases = {}
                conn = self._connect(key, phases)
                connect_ms = (time.perf_counter_ns() - t_connect) / 1e6
                reused = False
            read_timeout = timeouts.get("read")
            if read_timeout is None:
                read_timeout = self._read_timeout_s
            if not self._gevent:
                conn.sock.settimeout(read_timeout)
            # the read timeout counts content (h1body); under gevent a timer checks it, without
            # gevent each recv gets the time left as its socket timeout
            watchdog = Watchdog.start(read_timeout, timer=self._gevent)
            # From the request on, a plain socket under gevent is read by the reactor: the head and
            # every body byte get the kernel's receive stamp, however late this greenlet runs.
            reader = (reader_for(conn.sock) if self._gevent and not isinstance(conn.sock, ssl.SSLSocket)
                      else None)
            if watchdog is not None:
                watchdog.reader = reader
            try:
                if payload is not None:
                    t_write_ns = time.perf_counter_ns()
                    conn.sock.sendall(payload)
                else:
                    conn.sock.sendall(head)
                    t_write_ns = time.perf_counter_ns()
                    conn.sock.sendall(body)
                t_written_ns = time.perf_counter_ns()
                if progress is not None:
                    progress["sent"] = True
                read = (reader_read(reader, raw_errors=True) if reader is not None
                        else socket_read(conn.sock, watchdog, raw_errors=True))
                status, headers, leftover, t_head_ns = read_head(read)
                # one small write: the kernel took it as the call began (a late return is this process
                # waiting for a core); a large body: its write's return, unless the head's kernel stamp
                # came first (then the write's start)
                t_sent_ns = (t_write_ns if payload is not None or t_written_ns > t_head_ns else t_written_ns)
                break
            except StaleConnection:
                if progress is not None:
                    progress["sent"] = False     # it went to a dead connection: not received
                Watchdog.stop(watchdog)
                if reader is not None:
                    reader.close()
                close_quietly(conn.sock)
                if not reused or attempt:
                    raise httpx.RemoteProtocolError("server closed the connection "
                                                    "without a response") from None
                conn = None  # a keep-alive connection closed under us: retry once on a fresh one
                stale = True
            except BaseException:
                Watchdog.stop(watchdog)
                if reader is not None:
                    reader.close()
                close_quietly(conn.sock)
                raise
        assert conn is not None   # the loop either broke with a connection or raised
        try:
            body_framing, length, keep_alive = framing(request.method, status, headers)
        except BaseException:     # e.g. a bad Content-Length: the watchdog must not outlive the request
            Watchdog.stop(watchdog)
            if reader is not None:
                reader.close()
            close_quietly(conn.sock)
            raise
        stream = RawStream(conn.sock, functools.partial(self._release, conn), leftover, body_framing, length,
                           keep_alive, watchdog, t_head_ns, reader)
        facts = ConnFacts(reused=reused, connect_ms=connect_ms, t_start_ns=t_start_ns, recv_ns=stream.recv_ns,
                          reconnected=stale and not reused, t_head_ns=t_head_ns,
                          unsolicited_bytes=unsolicited, dns_ms=phases.get("dns_ms"),
                          tcp_ms=phases.get("tcp_ms"), tls_ms=phases.get("tls_ms"), t_sent_ns=t_sent_ns)
        return httpx.Response(status, headers=headers, stream=stream,
                              extensions={"http_version": b"HTTP/1.1", "fourfold": facts})

    def close(self) -> None:
        for conns in self._idle.values():
            for conn in conns:
                close_quietly(conn.sock)
        self._idle.clear()

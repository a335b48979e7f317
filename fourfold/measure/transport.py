"""RawH1Transport: a lean HTTP/1.1 transport for httpx, built for timing streams.

httpx's default transport (httpcore + h11) costs about 130 µs of CPU per received chunk under
gevent on this machine; a plain socket loop costs about 38 µs (``docs/architecture.md``). At
thousands of tokens per second that difference *is* the client's queueing delay, which lands in
every TTFT and ITL it measures. This transport keeps httpx's API (``Client``, auth, headers,
``MockTransport`` for unit tests) and replaces the wire layer with a socket loop that does one
``recv`` per iteration and decodes chunked framing with ``bytes.find``.

Connection facts go into ``response.extensions["fourfold"]`` as :class:`ConnFacts`: whether the
connection was reused, how long connecting took, and ``t_start_ns`` (``perf_counter_ns`` when the
request entered the transport; the zero point of TTFT and E2E).

Errors are raised as httpx's own exception classes, so callers classify one exception tree::

    httpx.TransportError
      ├── ConnectError / ConnectTimeout   could not open the connection
      ├── ReadTimeout                     no byte within the read timeout
      ├── RemoteProtocolError             broken framing, or the peer closed mid-body
      └── ReadError / WriteError          socket errors after connecting
"""

from __future__ import annotations

import socket
import ssl
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import httpx

from fourfold.measure.reactor import Reader, enable_timestamps, reader_for


def _gevent_active() -> bool:
    try:
        from gevent import monkey
    except ImportError:  # pragma: no cover - gevent is a dependency; the transport works without it
        return False
    return monkey.is_module_patched("socket")


_CRLF = b"\r\n"
_HEAD_END = b"\r\n\r\n"
_MAX_HEAD_BYTES = 64 * 1024


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


class _Watchdog:
    """Read timeout under gevent without a timer per ``recv``.

    A gevent socket timeout arms and cancels a timer on every blocking read (about 11 µs of CPU
    per chunk here). Instead one repeating timer per request checks, four times per timeout
    period, how long ago bytes last arrived, and ends the wait with ``httpx.ReadTimeout`` when the
    stream has been silent for longer than the timeout. While a body is read through a
    :class:`~measure.reactor.Reader`, the timeout is queued behind the bytes already received
    (so none of them is lost to the record); before that it is thrown into the waiting greenlet.
    """

    __slots__ = ("timeout_s", "last_ns", "reader", "_glet", "_timer")

    def __init__(self, timeout_s: float) -> None:
        import gevent

        self.timeout_s = timeout_s
        self.last_ns = time.perf_counter_ns()
        self.reader: Reader | None = None
        self._glet = gevent.getcurrent()
        period = max(timeout_s / 4, 0.005)
        self._timer = gevent.get_hub().loop.timer(period, period)
        self._timer.start(self._check)

    @classmethod
    def start(cls, timeout_s: float | None) -> _Watchdog | None:
        return cls(timeout_s) if timeout_s else None

    @staticmethod
    def stop(watchdog: _Watchdog | None) -> None:
        if watchdog is not None:
            watchdog._timer.stop()
            watchdog._timer.close()

    def _check(self) -> None:
        reader = self.reader
        last_ns = self.last_ns if reader is None else max(self.last_ns, reader.last_ns)
        if time.perf_counter_ns() - last_ns > self.timeout_s * 1e9:
            self._timer.stop()
            exc = httpx.ReadTimeout(f"no data for {self.timeout_s:g} s")
            if reader is not None:
                reader.fail(exc)
            else:
                self._glet.throw(exc)


class _Conn:
    __slots__ = ("sock", "last_used", "key")

    def __init__(self, sock: socket.socket, key: tuple[str, str, int]) -> None:
        self.sock = sock
        self.key = key
        self.last_used = time.monotonic()

    def is_dead(self) -> bool:
        """A pooled connection the server has closed reads as EOF (or errors) without blocking."""
        try:
            self.sock.setblocking(False)
            try:
                return self.sock.recv(1, socket.MSG_PEEK) == b""
            finally:
                self.sock.setblocking(True)
        except (BlockingIOError, InterruptedError):
            return False
        except OSError:
            return True


class ChunkedDecoder:
    """Incremental decoder for ``Transfer-Encoding: chunked`` (bytes in, payload bytes out)."""

    __slots__ = ("_buf", "_remaining", "_state", "done")

    def __init__(self) -> None:
        self._buf = b""
        self._remaining = 0      # payload bytes still to come in the current chunk
        self._state = 0          # 0: size line, 1: payload, 2: CRLF after payload, 3: trailers
        self.done = False

    def decode(self, data: bytes) -> bytes:
        if not self._buf and self._state == 0:
            # Fast path: the read is exactly one whole chunk ("<hex>\r\n<payload>\r\n"), as a
            # server writing one event per chunk produces it.
            end = data.find(_CRLF)
            if 0 < end < 16:
                try:
                    size = int(data[:end], 16)
                except ValueError:
                    size = -1
                if size > 0 and len(data) == end + size + 4 and data.endswith(_CRLF):
                    return data[end + 2:end + 2 + size]
        buf = self._buf + data if self._buf else data
        out: list[bytes] = []
        pos, n = 0, len(buf)
        while pos < n and not self.done:
            state = self._state
            if state == 1:
                take = min(self._remaining, n - pos)
                out.append(buf[pos:pos + take])
                pos += take
                self._remaining -= take
                if self._remaining == 0:
                    self._state = 2
            elif state == 2:
                if n - pos < 2:
                    break
                if buf[pos:pos + 2] != _CRLF:
                    raise httpx.RemoteProtocolError("chunked body: missing CRLF after a chunk")
                pos += 2
                self._state = 0
            else:
                end = buf.find(_CRLF, pos)
                if end < 0:
                    if n - pos > 4096:
                        raise httpx.RemoteProtocolError("chunked body: chunk size line too long")
                    break
                line = buf[pos:end]
                pos = end + 2
                if state == 3:
                    if not line:
                        self.done = True
                    continue
                try:
                    size = int(line.split(b";", 1)[0], 16)
                except ValueError:
                    raise httpx.RemoteProtocolError(f"chunked body: bad chunk size {line[:32]!r}") from None
                if size == 0:
                    self._state = 3
                else:
                    self._remaining, self._state = size, 1
        self._buf = buf[pos:] if pos < n else b""
        if len(out) == 1:
            return out[0]
        return b"".join(out)


class _RawStream(httpx.SyncByteStream):
    """The response body. Every yielded piece has its receive time in ``recv_ns`` (same index)."""

    def __init__(self, transport: RawH1Transport, conn: _Conn, leftover: bytes, framing: str,
                 length: int, keep_alive: bool, watchdog: _Watchdog | None, facts: ConnFacts,
                 t_head_ns: int, reader: Reader | None = None) -> None:
        self._transport = transport
        self._watchdog = watchdog
        self._conn = conn
        self._leftover = leftover
        self._framing = framing          # "chunked" | "length" | "close" | "none"
        self._length = length
        self._keep_alive = keep_alive
        self._complete = framing == "none"
        self._t_head_ns = t_head_ns
        self.recv_ns = facts.recv_ns = []
        self._reader = reader

    def __iter__(self) -> Iterator[bytes]:
        if self._complete:
            return
        stamp = self.recv_ns.append
        read = self._read_function()
        framing = self._framing
        t, data = self._t_head_ns, self._leftover
        self._leftover = b""
        if framing == "chunked":
            decoder = ChunkedDecoder()
            while True:
                if data:
                    payload = decoder.decode(data)
                    if payload:
                        stamp(t)
                        yield payload
                    if decoder.done:
                        self._complete = True
                        return
                t, data = read()
                if not data:
                    raise httpx.RemoteProtocolError("peer closed the connection inside a chunked body")
        elif framing == "length":
            remaining = self._length
            while True:
                if data:
                    stamp(t)
                    if len(data) >= remaining:
                        yield data[:remaining]
                        self._complete = True
                        return
                    remaining -= len(data)
                    yield data
                t, data = read()
                if not data:
                    raise httpx.RemoteProtocolError(
                        f"peer closed the connection with {remaining} body bytes still to come")
        else:  # read until close
            self._keep_alive = False
            while True:
                if data:
                    stamp(t)
                    yield data
                t, data = read()
                if not data:
                    self._complete = True
                    return

    def read_into(self, times: list[int], payloads: list[bytes], max_bytes: int, deadline_ns: int | None) -> str:
        """Read the rest of the body into ``times`` / ``payloads`` with each piece's receive time
        (see :func:`read_pieces`)."""
        return read_pieces(self, times, payloads, max_bytes, deadline_ns, self.recv_ns)

    def _read_function(self):  # type: ignore[no-untyped-def]
        """``read() -> (perf_counter_ns, bytes)``: from the reactor's :class:`Reader` when it
        serves this socket (gevent, plain HTTP), else from blocking ``recv`` calls."""
        reader = self._reader
        if reader is not None:
            reader.body(self._framing, self._length - len(self._leftover))
            return _reader_read(reader)
        return _socket_read(self._conn.sock, self._watchdog)

    def close(self) -> None:
        _Watchdog.stop(self._watchdog)
        self._watchdog = None
        if self._reader is not None:
            self._reader.close()
            if self._reader.queue:          # bytes beyond the body: the connection is not reusable
                self._keep_alive = False
            self._reader = None
        conn, self._conn = self._conn, None  # type: ignore[assignment]
        if conn is None:
            return
        if self._complete and self._keep_alive:
            self._transport._release(conn)
        else:
            _close_quietly(conn.sock)


def read_pieces(body: Iterable[bytes], times: list[int], payloads: list[bytes], max_bytes: int,
                deadline_ns: int | None, stamps: list[int] | None = None) -> str:
    """Take a body's pieces into ``times`` / ``payloads`` (the lists keep what arrived if a read
    raises). A piece's time is the last entry of ``stamps`` (a transport's receive times, filled
    as it yields) or, without it, ``perf_counter_ns()`` when the piece comes out. Returns "" at
    the end of the body, "too_large" once more than ``max_bytes`` arrived, or "too_long" when a
    piece arrived after ``deadline_ns``."""
    now = time.perf_counter_ns
    nbytes = 0
    for data in body:
        t = stamps[-1] if stamps else now()
        times.append(t)
        payloads.append(data)
        nbytes += len(data)
        if nbytes > max_bytes:
            return "too_large"
        if deadline_ns is not None and t > deadline_ns:
            return "too_long"
    return ""


def _reader_read(reader: Reader, raw_errors: bool = False):  # type: ignore[no-untyped-def]
    """``read() -> (perf_counter_ns, bytes)`` from the reactor. A socket error comes out as
    ``httpx.ReadError`` (or as the OSError itself with ``raw_errors``, for the head's stale-
    connection check); a read timeout queued by the watchdog as ``httpx.ReadTimeout``."""
    def read_reactor() -> tuple[int, bytes]:
        t, data = reader.read()
        if isinstance(data, BaseException):
            if isinstance(data, httpx.TimeoutException) or (raw_errors and isinstance(data, OSError)):
                raise data
            raise httpx.ReadError(str(data) or data.__class__.__name__)
        return t, data
    return read_reactor


def _socket_read(sock: socket.socket, watchdog: _Watchdog | None = None,  # type: ignore[no-untyped-def]
                 raw_errors: bool = False):
    """``read() -> (perf_counter_ns, bytes)`` with one blocking ``recv``, telling ``watchdog``
    a read has begun. A socket timeout comes out as ``httpx.ReadTimeout``, another socket error
    as ``httpx.ReadError`` (or both as themselves with ``raw_errors``, for the head's
    stale-connection check)."""
    recv = sock.recv
    now = time.perf_counter_ns

    def read_socket() -> tuple[int, bytes]:
        if watchdog is not None:
            watchdog.last_ns = now()
        try:
            data = recv(65536)
        except TimeoutError:
            if raw_errors:
                raise
            raise httpx.ReadTimeout("no data within the read timeout") from None
        except OSError as exc:
            if raw_errors:
                raise
            raise httpx.ReadError(str(exc) or exc.__class__.__name__) from None
        return now(), data
    return read_socket


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
            _close_quietly(conn.sock)

    def _take_idle(self, key: tuple[str, str, int]) -> tuple[_Conn | None, bool]:
        """A live idle connection (or None), and whether a dead one (closed by the server) was dropped."""
        idle = self._idle.get(key)
        stale = False
        while idle:
            conn = idle.pop()
            if not conn.is_dead():
                return conn, stale
            stale = True
            _close_quietly(conn.sock)
        return None, stale

    def _connect(self, key: tuple[str, str, int]) -> _Conn:
        scheme, host, port = key
        try:
            sock = socket.create_connection((host, port), timeout=self._connect_timeout_s)
        except TimeoutError:
            raise httpx.ConnectTimeout(f"connecting to {host}:{port} timed out") from None
        except OSError as exc:
            raise httpx.ConnectError(f"cannot connect to {host}:{port}: {exc}") from None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if scheme != "https":
            enable_timestamps(sock)     # kernel receive stamps for the reactor (measure.reactor)
        if scheme == "https":
            ctx = self._ssl_context or ssl.create_default_context()
            try:
                sock = ctx.wrap_socket(sock, server_hostname=host)
            except (ssl.SSLError, OSError) as exc:
                _close_quietly(sock)
                raise httpx.ConnectError(f"TLS handshake with {host}:{port} failed: {exc}") from None
        sock.settimeout(None if self._gevent else self._read_timeout_s)
        return _Conn(sock, key)

    # -- request --
    def handle_request(self, request: httpx.Request) -> httpx.Response:
        t_start_ns = time.perf_counter_ns()
        url = request.url
        key = (url.scheme, url.host, url.port or (443 if url.scheme == "https" else 80))
        timeouts = request.extensions.get("timeout") or {}
        head = _request_head(request)
        body = request.read()
        payload = head + body if len(body) < 65536 else None
        # request.extensions["fourfold_progress"] (a dict the caller keeps): "sent" is False until the
        # request is on the wire, so a caller stopped before that knows the target never saw it
        progress = request.extensions.get("fourfold_progress")
        if progress is not None:
            progress["sent"] = False
        conn, stale = self._take_idle(key)
        reused = conn is not None
        connect_ms = None
        for attempt in (0, 1):
            if conn is None:
                t_connect = time.perf_counter_ns()
                conn = self._connect(key)
                connect_ms = (time.perf_counter_ns() - t_connect) / 1e6
                reused = False
            read_timeout = timeouts.get("read")
            if read_timeout is None:
                read_timeout = self._read_timeout_s
            if not self._gevent:
                conn.sock.settimeout(read_timeout)
            watchdog = _Watchdog.start(read_timeout) if self._gevent else None
            # From the request on, a plain socket under gevent is read by the reactor: the head and
            # every body byte get the kernel's receive stamp, however late this greenlet runs.
            reader = (reader_for(conn.sock) if self._gevent and not isinstance(conn.sock, ssl.SSLSocket)
                      else None)
            if watchdog is not None:
                watchdog.reader = reader
            try:
                if payload is not None:
                    conn.sock.sendall(payload)
                else:
                    conn.sock.sendall(head)
                    conn.sock.sendall(body)
                if progress is not None:
                    progress["sent"] = True
                read = (_reader_read(reader, raw_errors=True) if reader is not None
                        else _socket_read(conn.sock, raw_errors=True))
                status, headers, leftover, t_head_ns = _read_head(read)
                break
            except _StaleConnection:
                if progress is not None:
                    progress["sent"] = False     # it went to a dead connection: not received
                _Watchdog.stop(watchdog)
                if reader is not None:
                    reader.close()
                _close_quietly(conn.sock)
                if not reused or attempt:
                    raise httpx.RemoteProtocolError("server closed the connection without a response") from None
                conn = None  # a keep-alive connection closed under us: retry once on a fresh one
                stale = True
            except BaseException:
                _Watchdog.stop(watchdog)
                if reader is not None:
                    reader.close()
                _close_quietly(conn.sock)
                raise
        assert conn is not None   # the loop either broke with a connection or raised
        try:
            framing, length, keep_alive = _framing(request.method, status, headers)
        except BaseException:     # e.g. a bad Content-Length: the watchdog must not outlive the request
            _Watchdog.stop(watchdog)
            if reader is not None:
                reader.close()
            _close_quietly(conn.sock)
            raise
        facts = ConnFacts(reused=reused, connect_ms=connect_ms, t_start_ns=t_start_ns,
                          reconnected=stale and not reused, t_head_ns=t_head_ns)
        stream = _RawStream(self, conn, leftover, framing, length, keep_alive, watchdog, facts, t_head_ns, reader)
        return httpx.Response(status, headers=headers, stream=stream,
                              extensions={"http_version": b"HTTP/1.1", "fourfold": facts})

    def close(self) -> None:
        for conns in self._idle.values():
            for conn in conns:
                _close_quietly(conn.sock)
        self._idle.clear()


class _StaleConnection(Exception):
    pass


def _request_head(request: httpx.Request) -> bytes:
    target = request.url.raw_path
    lines = [request.method.encode() + b" " + target + b" HTTP/1.1"]
    for name, value in request.headers.raw:
        lines.append(name + b": " + value)
    return _CRLF.join(lines) + _HEAD_END


def _read_head(read) -> tuple[int, list[tuple[bytes, bytes]], bytes, int]:  # type: ignore[no-untyped-def]
    """Read the status line and headers; skip interim (1xx) responses. Returns the body bytes
    that arrived with the head and the receive time of the read that completed the head."""
    buf = b""
    t = time.perf_counter_ns()
    while True:
        end = buf.find(_HEAD_END)
        if end < 0:
            if len(buf) > _MAX_HEAD_BYTES:
                raise httpx.RemoteProtocolError("response head larger than 64 KiB")
            try:
                t, data = read()
            except TimeoutError:
                raise httpx.ReadTimeout("no response headers within the read timeout") from None
            except (ConnectionResetError, BrokenPipeError):
                if not buf:
                    raise _StaleConnection() from None
                raise httpx.ReadError("connection reset while reading the response head") from None
            except OSError as exc:
                raise httpx.ReadError(str(exc)) from None
            if not data:
                if not buf:
                    raise _StaleConnection()
                raise httpx.RemoteProtocolError("peer closed the connection inside the response head")
            buf += data
            continue
        status, headers = _parse_head(buf[:end])
        buf = buf[end + 4:]
        if not 100 <= status < 200:
            return status, headers, buf, t


def _parse_head(head: bytes) -> tuple[int, list[tuple[bytes, bytes]]]:
    lines = head.split(_CRLF)
    parts = lines[0].split(b" ", 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/1."):
        raise httpx.RemoteProtocolError(f"bad status line {lines[0][:64]!r}")
    try:
        status = int(parts[1])
    except ValueError:
        raise httpx.RemoteProtocolError(f"bad status code in {lines[0][:64]!r}") from None
    headers = []
    for line in lines[1:]:
        name, sep, value = line.partition(b":")
        if sep:
            headers.append((name.strip(), value.strip()))
    return status, headers


def _framing(method: str, status: int, headers: list[tuple[bytes, bytes]]) -> tuple[str, int, bool]:
    keep_alive = True
    chunked = False
    length = -1
    for name, value in headers:
        lname = name.lower()
        if lname == b"transfer-encoding" and b"chunked" in value.lower():
            chunked = True
        elif lname == b"content-length":
            try:
                length = int(value)
            except ValueError:
                raise httpx.RemoteProtocolError(f"bad Content-Length {value[:32]!r}") from None
        elif lname == b"connection" and b"close" in value.lower():
            keep_alive = False
    if method == "HEAD" or status in (204, 304):
        return "none", 0, keep_alive
    if chunked:
        return "chunked", -1, keep_alive
    if length >= 0:
        return ("length" if length else "none"), length, keep_alive
    return "close", -1, False


def _close_quietly(sock: socket.socket) -> None:
    try:
        sock.close()
    except OSError:
        pass

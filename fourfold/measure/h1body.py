"""Reading an HTTP/1.1 response body with each piece's receive time.

:class:`RawStream` is the body :class:`~fourfold.measure.transport.RawH1Transport` hands to httpx:
iterated by httpx (``iter_raw``), or taken whole by ``fourfold.measure.stream.send`` through
:meth:`RawStream.read_into` (one loop, no generator step per token). Its reads come from the
process's reactor (:mod:`fourfold.measure.reactor`: kernel receive stamps, gevent, plain HTTP) or
from blocking ``recv`` calls (TLS, or no gevent); both are ``read() -> (perf_counter_ns, bytes)``
functions made here. Under gevent one :class:`Watchdog` per request stands in for a socket
timeout (see its docstring).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterable, Iterator

import httpx

from fourfold.measure.h1wire import ChunkedDecoder
from fourfold.measure.reactor import Reader

Read = Callable[[], tuple[int, bytes]]


class Watchdog:
    """Read timeout under gevent without a timer per ``recv``.

    A gevent socket timeout arms and cancels a timer on every blocking read (about 11 µs of CPU
    per chunk here). Instead one repeating timer per request checks, four times per timeout
    period, how long ago bytes last arrived, and ends the wait with ``httpx.ReadTimeout`` when the
    stream has been silent for longer than the timeout. While a body is read through a
    :class:`~fourfold.measure.reactor.Reader`, the timeout is queued behind the bytes already
    received (so none of them is lost to the record); before that it is thrown into the waiting
    greenlet.
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
    def start(cls, timeout_s: float | None) -> Watchdog | None:
        return cls(timeout_s) if timeout_s else None

    @staticmethod
    def stop(watchdog: Watchdog | None) -> None:
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


class RawStream(httpx.SyncByteStream):
    """The response body. Every yielded piece has its receive time in ``recv_ns`` (same index;
    the transport puts the same list into the response's ``ConnFacts``).

    ``release`` gives the connection back to its pool; it is called on close when the body was
    read to its end on a keep-alive connection, else the socket is closed.
    """

    def __init__(self, sock: socket.socket, release: Callable[[], None], leftover: bytes, framing: str,
                 length: int, keep_alive: bool, watchdog: Watchdog | None, t_head_ns: int,
                 reader: Reader | None = None) -> None:
        self._sock: socket.socket | None = sock
        self._release = release
        self._watchdog = watchdog
        self._leftover = leftover
        self._framing = framing          # "chunked" | "length" | "close" | "none"
        self._length = length
        self._keep_alive = keep_alive
        self._complete = framing == "none"
        self._t_head_ns = t_head_ns
        self.recv_ns: list[int] = []
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

    def _read_function(self) -> Read:
        """``read() -> (perf_counter_ns, bytes)``: from the reactor's :class:`Reader` when it
        serves this socket (gevent, plain HTTP), else from blocking ``recv`` calls."""
        reader = self._reader
        if reader is not None:
            reader.body(self._framing, self._length - len(self._leftover))
            return reader_read(reader)
        assert self._sock is not None, "the body was read after it was closed"
        return socket_read(self._sock, self._watchdog)

    def close(self) -> None:
        Watchdog.stop(self._watchdog)
        self._watchdog = None
        if self._reader is not None:
            self._reader.close()
            if self._reader.queue:          # bytes beyond the body: the connection is not reusable
                self._keep_alive = False
            self._reader = None
        sock, self._sock = self._sock, None
        if sock is None:
            return
        if self._complete and self._keep_alive:
            self._release()
        else:
            close_quietly(sock)


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


def reader_read(reader: Reader, raw_errors: bool = False) -> Read:
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


def socket_read(sock: socket.socket, watchdog: Watchdog | None = None, raw_errors: bool = False) -> Read:
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


def close_quietly(sock: socket.socket) -> None:
    try:
        sock.close()
    except OSError:
        pass


__all__ = ["RawStream", "Read", "Watchdog", "close_quietly", "read_pieces", "reader_read", "socket_read"]

"""Reading an HTTP/1.1 response body with each piece's receive time.

:class:`RawStream` is the body :class:`~fourfold.client.transport.RawH1Transport` hands to httpx:
iterated by httpx (``iter_raw``), or taken whole by ``fourfold.client.stream.send`` through
:meth:`RawStream.read_into`. A chunked body read through the process's reactor
(:mod:`fourfold.client.reactor`: kernel receive stamps; gevent, plain HTTP) is decoded in one loop
straight off the reactor's queue (``RawStream._read_chunked``, no generator step per token); where
``fourfold.client._hotpath`` was built, its ``take_chunks`` takes each queued read made of whole
chunks with content in C, and the Python loop takes the rest (torn chunks, idle pieces, the last
chunk). Any other body goes through ``RawStream.__iter__`` and :func:`read_pieces`, reading with a
``read() -> (perf_counter_ns, bytes)`` function made here: from the reactor's queue
(:func:`reader_read`) or one blocking ``recv`` a piece (:func:`socket_read`: TLS, or no gevent).
One :class:`Watchdog` per request bounds the read timeout (see its docstring).

**The read timeout counts content, not bytes.** ``--read-timeout`` bounds the time from the request
to the complete response head and to the first *content*, and the silence between content pieces.
A body piece that holds only SSE comments (``: ping``), blank lines or Anthropic's ``ping`` event
(:func:`is_idle_piece`, one regular expression that fails on the first line of an ordinary piece)
is not content: a server that drips its headers a line at a time, or sends keep-alive comments
forever, times out like a silent one. Anything else counts (a role-only chunk too: which pieces
carried text is the parser's business, after the body has ended).
"""

from __future__ import annotations

import re
import socket
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import gevent
import httpx

from fourfold.client.h1wire import ChunkedDecoder
from fourfold.client.native import take_chunks
from fourfold.client.reactor import Reader

Read = Callable[[], tuple[int, bytes]]


# A body piece with no content: SSE comments, blank lines, Anthropic's ping event; a torn last line
# only when it is a comment. Ordinary pieces ("data: {...", "event: content_block_delta") fail at
# their first line.
_IDLE_PIECE = re.compile(rb'(?:(?::[^\r\n]*|event: ?ping|data: ?\{"type": ?"ping"\})?(?:\r\n|\r|\n))*'
                         rb'(?::[^\r\n]*)?')
is_idle_piece = _IDLE_PIECE.fullmatch


class Watchdog:
    """The read timeout of one request: content, not bytes (see the module docstring).

    ``content_ns`` is when content last arrived (the request itself until the first piece does);
    the body loop moves it (:meth:`RawStream.__iter__`) and raises ``httpx.ReadTimeout`` itself
    when an idle piece comes more than the timeout after it. Without gevent each blocking ``recv``
    gets the time left as its socket timeout (:func:`socket_read`).

    Under gevent a socket timeout would arm and cancel a timer on every blocking read (about 11 µs
    of CPU per chunk here). Instead one repeating timer per request checks, four times per timeout
    period, how long ago bytes and content last arrived, and ends the wait with
    ``httpx.ReadTimeout`` when either is older than the timeout. While a body is read through a
    :class:`~fourfold.client.reactor.Reader`, the timeout is queued behind the bytes already
    received (so none of them is lost to the record); before that it is thrown into the waiting
    greenlet. Bytes received but not yet taken by the body loop (the reader wakes it lazily) may
    hold content: then the loop is woken to look, and the next check decides.
    """

    __slots__ = ("timeout_s", "timeout_ns", "last_ns", "content_ns", "reader", "_glet", "_timer")

    def __init__(self, timeout_s: float, timer: bool = True) -> None:
        self.timeout_s = timeout_s
        self.timeout_ns = int(timeout_s * 1e9)
        self.last_ns = self.content_ns = time.perf_counter_ns()
        self.reader: Reader | None = None
        self._glet: Any = None
        self._timer: Any = None
        if timer:
            self._glet = gevent.getcurrent()
            period = max(timeout_s / 4, 0.005)
            self._timer = gevent.get_hub().loop.timer(period, period)
            self._timer.start(self._check)

    @classmethod
    def start(cls, timeout_s: float | None, timer: bool = True) -> Watchdog | None:
        """A watchdog for ``timeout_s`` (None when there is none); ``timer`` under gevent."""
        return cls(timeout_s, timer) if timeout_s else None

    @staticmethod
    def stop(watchdog: Watchdog | None) -> None:
        if watchdog is not None and watchdog._timer is not None:
            watchdog._timer.stop()
            watchdog._timer.close()

    def expired(self) -> httpx.ReadTimeout:
        """The timeout of a response whose bytes (if any) carried no content."""
        return httpx.ReadTimeout(f"no content for {self.timeout_s:g} s")

    def _check(self) -> None:
        reader = self.reader
        last_ns = self.last_ns if reader is None else max(self.last_ns, reader.last_ns)
        now = time.perf_counter_ns()
        if now - last_ns > self.timeout_ns:
            exc = httpx.ReadTimeout(f"no data for {self.timeout_s:g} s")
        elif now - self.content_ns > self.timeout_ns:
            if reader is not None and reader.queue:
                reader.wake()       # bytes the body loop has not taken yet: it looks first
                return
            exc = self.expired()
        else:
            return
        self._timer.stop()
        if reader is not None:
            reader.fail(exc)
        else:
            self._glet.throw(exc)


class RawStream(httpx.SyncByteStream):
    """The response body. Every yielded piece has its receive time in ``recv_ns`` (same index;
    the transport puts the same list into the response's ``ConnFacts``).

    ``release`` gives the connection back to its pool; it is called on close when the body was
    read to its end on a keep-alive connection and nothing followed it, else the socket is closed.
    ``trailing`` holds the bytes that followed the end of the body (in the read that ended it, or
    queued by the reactor before the close): a server may send nothing before the next request,
    so these are an unsolicited response (or a body longer than its Content-Length) and the
    connection is dropped; ``fourfold.client.stream`` makes the record ``malformed_stream``.
    """

    def __init__(self, sock: socket.socket, release: Callable[[], None], leftover: bytes, framing: str,
                 length: int, keep_alive: bool, watchdog: Watchdog | None, t_head_ns: int,
                 reader: Reader | None = None) -> None:
        self._sock: socket.socket | None = sock
        self._release = release
        self._watchdog = watchdog
        self._framing = framing          # "chunked" | "length" | "close" | "none"
        self._length = length
        self._keep_alive = keep_alive
        self._complete = framing == "none"
        self.trailing = leftover if self._complete else b""
        self._leftover = b"" if self._complete else leftover
        self._t_head_ns = t_head_ns
        self.recv_ns: list[int] = []
        self._reader = reader

    def __iter__(self) -> Iterator[bytes]:
        if self._complete:
            return
        stamp = self.recv_ns.append
        read = self._read_function()
        note = self._content_clock()
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
                        if note is not None:
                            note(payload, t)
                        yield payload
                    if decoder.error is not None:    # broken after the payload just yielded
                        raise decoder.error
                    if decoder.done:
                        self._complete = True
                        self.trailing = decoder.rest
                        return
                t, data = read()
                if not data:
                    raise httpx.RemoteProtocolError("peer closed the connection inside a chunked body")
        elif framing == "length":
            remaining = self._length
            while True:
                if data:
                    stamp(t)
                    if note is not None:
                        note(data, t)
                    if len(data) >= remaining:
                        self._complete = True
                        self.trailing = data[remaining:]
                        yield data[:remaining]
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
                    if note is not None:
                        note(data, t)
                    yield data
                t, data = read()
                if not data:
                    self._complete = True
                    return

    def _content_clock(self) -> Callable[[bytes, int], None] | None:
        """``note(piece, t)`` for the body loop: a piece with content moves the watchdog's
        ``content_ns``; an idle one that comes later than the timeout after it ends the read."""
        watchdog = self._watchdog
        if watchdog is None:
            return None
        idle = is_idle_piece

        def note(piece: bytes, t: int) -> None:
            # "data: ..." without "ping" is content at once (an idle piece starting with "d" is
            # Anthropic's ping data line); the regular expression decides the rest
            if (piece[0] == 100 and b'"ping"' not in piece) or idle(piece) is None:
                watchdog.content_ns = t
            elif t - watchdog.content_ns > watchdog.timeout_ns:
                raise watchdog.expired()
        return note

    def read_into(self, times: list[int], payloads: list[bytes], max_bytes: int,
                  deadline_ns: int | None) -> str:
        """Read the rest of the body into ``times`` / ``payloads`` with each piece's receive time
        (see :func:`read_pieces`). A chunked body read through the reactor (the common case: an
        SSE stream over plain HTTP under gevent) takes one loop instead of the generator
        pipeline, with the same steps in the same order (:meth:`_read_chunked`)."""
        if self._reader is not None and self._framing == "chunked" and not self._complete:
            return self._read_chunked(times, payloads, max_bytes, deadline_ns)
        return read_pieces(self, times, payloads, max_bytes, deadline_ns, self.recv_ns)

    def _read_chunked(self, times: list[int], payloads: list[bytes], max_bytes: int,
                      deadline_ns: int | None) -> str:
        """:meth:`__iter__`'s chunked loop and :func:`read_pieces` fused, over the reactor's queue.
        Between chunks, with ``_hotpath`` built, ``take_chunks`` takes in C the queued reads made
        of whole chunks with content (stamps, payloads, byte count, size and duration limits, the
        watchdog's content clock) and stops at the first it cannot take, which this loop then
        decodes."""
        reader = self._reader
        assert reader is not None
        reader.body("chunked")
        queue = reader.queue
        note = self._content_clock()
        watchdog = self._watchdog
        stamp = self.recv_ns.append
        decode = (decoder := ChunkedDecoder()).decode
        keep_time, keep = times.append, payloads.append
        nbytes = 0
        t, data = self._t_head_ns, self._leftover
        self._leftover = b""
        while True:
            if data:
                payload = decode(data)
                if payload:
                    stamp(t)
                    if note is not None:
                        note(payload, t)
                    keep_time(t)
                    keep(payload)
                    nbytes += len(payload)
                    if nbytes > max_bytes:
                        return "too_large"
                    if deadline_ns is not None and t > deadline_ns:
                        return "too_long"
                if decoder.error is not None:        # broken after the payload just kept
                    raise decoder.error
                if decoder.done:
                    self._complete = True
                    self.trailing = decoder.rest
                    return ""
            if take_chunks is not None and queue and decoder.between_chunks:
                # whole chunks in C (fourfold.client.native); the rest (and the last one) here
                nbytes, content_ns, status = take_chunks(
                    queue, self.recv_ns, times, payloads, nbytes, max_bytes,
                    -1 if deadline_ns is None else deadline_ns, watchdog is not None)
                if content_ns and watchdog is not None:
                    watchdog.content_ns = content_ns
                if status:
                    return "too_large" if status == 1 else "too_long"
            t, data = queue.popleft() if queue else reader.read()
            if data.__class__ is not bytes:
                if isinstance(data, httpx.TimeoutException):
                    raise data
                raise httpx.ReadError(str(data) or data.__class__.__name__)
            if not data:
                raise httpx.RemoteProtocolError("peer closed the connection inside a chunked body")

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
        reader, self._reader = self._reader, None
        if reader is not None:
            reader.close()
            if reader.queue:              # anything beyond the body: the connection is not reusable
                self._keep_alive = False
                if self._complete:
                    self.trailing += b"".join(data for _, data in reader.queue if isinstance(data, bytes))
        sock, self._sock = self._sock, None
        if sock is None:
            return
        if self._complete and self._keep_alive and not self.trailing:
            self._release()
        else:
            close_quietly(sock)


def read_pieces(body: Iterable[bytes], times: list[int], payloads: list[bytes], max_bytes: int,
                deadline_ns: int | None, stamps: list[int] | None = None,
                content_timeout_s: float | None = None, since_ns: int = 0) -> str:
    """Take a body's pieces into ``times`` / ``payloads`` (the lists keep what arrived if a read
    raises). A piece's time is the last entry of ``stamps`` (a transport's receive times, filled
    as it yields) or, without it, ``perf_counter_ns()`` when the piece comes out. Returns "" at
    the end of the body, "too_large" once more than ``max_bytes`` arrived, or "too_long" when a
    piece arrived after ``deadline_ns``. With ``content_timeout_s`` (a body without a
    :class:`Watchdog`: httpx's transports), an idle piece (:func:`is_idle_piece`) that comes more
    than that after the last content (or ``since_ns``) raises ``httpx.ReadTimeout``."""
    now = time.perf_counter_ns
    nbytes = 0
    content_ns = since_ns
    timeout_ns = int(content_timeout_s * 1e9) if content_timeout_s else None
    for data in body:
        t = stamps[-1] if stamps else now()
        times.append(t)
        payloads.append(data)
        nbytes += len(data)
        if nbytes > max_bytes:
            return "too_large"
        if deadline_ns is not None and t > deadline_ns:
            return "too_long"
        if timeout_ns is not None:
            if is_idle_piece(data) is None:
                content_ns = t
            elif t - content_ns > timeout_ns:
                raise httpx.ReadTimeout(f"no content for {content_timeout_s:g} s (only keep-alive bytes)")
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
    a read has begun; a watchdog without a timer (no gevent) sets the socket's timeout to the time
    its content clock has left. A socket timeout comes out as ``httpx.ReadTimeout``, another socket
    error as ``httpx.ReadError`` (or both as themselves with ``raw_errors``, for the head's
    stale-connection check)."""
    recv = sock.recv
    now = time.perf_counter_ns
    timed = watchdog is not None and watchdog._timer is None

    def read_socket() -> tuple[int, bytes]:
        try:
            if watchdog is not None:
                t = watchdog.last_ns = now()
                if timed:
                    left_ns = watchdog.content_ns + watchdog.timeout_ns - t
                    if left_ns <= 0:
                        raise TimeoutError("no content within the read timeout")
                    sock.settimeout(left_ns / 1e9)
            data = recv(65536)
        except TimeoutError:
            if raw_errors:
                raise
            if watchdog is not None and timed:
                raise watchdog.expired() from None
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


__all__ = ["RawStream", "Read", "Watchdog", "close_quietly", "is_idle_piece", "read_pieces", "reader_read",
           "socket_read"]

"""HTTP/1.1 on the wire, without sockets: the request head, the response head, the body's framing
and an incremental ``Transfer-Encoding: chunked`` decoder.

:class:`~fourfold.client.transport.RawH1Transport` sends and reads; everything here is bytes in,
values out, so it is tested on recorded and torn bytes (``tests/properties/test_client_fuzz.py``).
A response the peer breaks raises ``httpx.RemoteProtocolError`` (callers classify one exception
tree, see :mod:`~fourfold.client.transport`). :func:`read_head` takes a ``read() ->
(perf_counter_ns, bytes)`` function, so it runs the same on a socket, the reactor or a test list.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

import httpx

CRLF = b"\r\n"
HEAD_END = b"\r\n\r\n"
MAX_HEAD_BYTES = 64 * 1024

Header = tuple[bytes, bytes]

# RFC 9112 7.1: chunk-size = 1*HEXDIG, then optional whitespace and ";" extensions. At most 15
# digits (under 2**60): a larger chunk is beyond any response cap, and Python's int() would take a
# sign, "0x", spaces or "_" (a negative size walked the decoder backwards, for ever).
_CHUNK_SIZE = re.compile(rb"([0-9A-Fa-f]{1,15})[ \t]*(?:;.*)?")


_HEX_DIGITS = b"0123456789abcdefABCDEF"


def chunk_size(line: bytes) -> int:
    """The size a chunk-size line states; :class:`MalformedResponse` for anything but plain hex."""
    found = _CHUNK_SIZE.fullmatch(line)
    if found is None:
        raise MalformedResponse(f"chunked body: bad chunk size {line[:32]!r}")
    return int(found.group(1), 16)


class MalformedResponse(httpx.RemoteProtocolError):
    """Bytes that are not HTTP/1.1: a bad status line or code, a bad Content-Length or chunk size, a
    head over 64 KiB. Classified ``malformed_stream``; a peer that closes mid-response stays a plain
    ``RemoteProtocolError`` (``interrupted``)."""


class StaleConnection(Exception):
    """The connection ended before a byte of the response head: a pooled keep-alive connection the
    server had closed. Never leaves the transport, which retries once on a fresh connection."""


class ChunkedDecoder:
    """Incremental decoder for ``Transfer-Encoding: chunked`` (bytes in, payload bytes out)."""

    __slots__ = ("_buf", "_remaining", "_state", "done", "error")

    def __init__(self) -> None:
        self._buf = b""
        self._remaining = 0      # payload bytes still to come in the current chunk
        self._state = 0          # 0: size line, 1: payload, 2: CRLF after payload, 3: trailers
        self.done = False
        # the body broke after payload that came in the same read: decode returned that payload,
        # and the caller raises this once it has kept it (the next decode raises it too)
        self.error: MalformedResponse | None = None

    @property
    def between_chunks(self) -> bool:
        """Nothing buffered, the next byte starts a chunk-size line (what the C step of the body
        loop, ``_hotpath.take_chunks``, needs to take whole chunks itself)."""
        return not self._buf and self._state == 0 and not self.done

    @property
    def rest(self) -> bytes:
        """Bytes that came after the body's last chunk (and trailers): nothing a server may send
        before the next request, e.g. an unsolicited second response. Empty until ``done``."""
        return self._buf if self.done else b""

    def decode(self, data: bytes) -> bytes:
        if self.error is not None:
            raise self.error
        if not self._buf and self._state == 0:
            # Fast path: the read is exactly one whole chunk ("<hex>\r\n<payload>\r\n"), as a
            # server writing one event per chunk produces it.
            end = data.find(CRLF)
            if 0 < end < 16 and not data[:end].strip(_HEX_DIGITS):    # plain hex (else: chunk_size, below)
                try:
                    size = int(data[:end], 16)
                except ValueError:
                    size = -1
                if size > 0 and len(data) == end + size + 4 and data.endswith(CRLF):
                    return data[end + 2:end + 2 + size]
        buf = self._buf + data if self._buf else data
        out: list[bytes] = []
        try:
            pos = self._decode_into(buf, out)
        except MalformedResponse as exc:
            if not out:
                raise
            self.error, self._buf = exc, b""
            return b"".join(out)
        self._buf = buf[pos:] if pos < len(buf) else b""
        if len(out) == 1:
            return out[0]
        return b"".join(out)

    def _decode_into(self, buf: bytes, out: list[bytes]) -> int:
        """Decode ``buf`` into ``out``; the position it stopped at (what is left waits for more)."""
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
                if buf[pos:pos + 2] != CRLF:
                    raise MalformedResponse("chunked body: missing CRLF after a chunk")
                pos += 2
                self._state = 0
            else:
                end = buf.find(CRLF, pos)
                if end < 0:
                    if n - pos > 4096:
                        raise MalformedResponse("chunked body: chunk size line too long")
                    break
                line = buf[pos:end]
                pos = end + 2
                if state == 3:
                    if not line:
                        self.done = True
                    continue
                size = chunk_size(line)
                if size == 0:
                    self._state = 3
                else:
                    self._remaining, self._state = size, 1
        return pos


def request_head(request: httpx.Request) -> bytes:
    """The request line and headers of ``request``, ending in the blank line."""
    target = request.url.raw_path
    lines = [request.method.encode() + b" " + target + b" HTTP/1.1"]
    for name, value in request.headers.raw:
        lines.append(name + b": " + value)
    return CRLF.join(lines) + HEAD_END


def read_head(read: Callable[[], tuple[int, bytes]]) -> tuple[int, list[Header], bytes, int]:
    """Read the status line and headers; skip interim (1xx) responses. Returns the status, the
    headers, the body bytes that arrived with the head and the receive time of the read that
    completed the head. ``read`` raises socket errors as themselves (``raw_errors``); the end of
    the connection before any byte raises :class:`StaleConnection`."""
    buf = b""
    t = time.perf_counter_ns()
    while True:
        end = buf.find(HEAD_END)
        if end < 0:
            if len(buf) > MAX_HEAD_BYTES:
                raise MalformedResponse("response head larger than 64 KiB")
            try:
                t, data = read()
            except TimeoutError:
                raise httpx.ReadTimeout("no response headers within the read timeout") from None
            except (ConnectionResetError, BrokenPipeError):
                if not buf:
                    raise StaleConnection() from None
                raise httpx.ReadError("connection reset while reading the response head") from None
            except OSError as exc:
                raise httpx.ReadError(str(exc)) from None
            if not data:
                if not buf:
                    raise StaleConnection()
                raise httpx.RemoteProtocolError("peer closed the connection inside the response head")
            buf += data
            continue
        status, headers = parse_head(buf[:end])
        buf = buf[end + 4:]
        if not 100 <= status < 200:
            return status, headers, buf, t


def parse_head(head: bytes) -> tuple[int, list[Header]]:
    """A response head (without its blank line) -> (status, headers)."""
    lines = head.split(CRLF)
    parts = lines[0].split(b" ", 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/1."):
        raise MalformedResponse(f"bad status line {lines[0][:64]!r}")
    try:
        status = int(parts[1])
    except ValueError:
        raise MalformedResponse(f"bad status code in {lines[0][:64]!r}") from None
    headers = []
    for line in lines[1:]:
        name, sep, value = line.partition(b":")
        if sep:
            headers.append((name.strip(), value.strip()))
    return status, headers


def framing(method: str, status: int, headers: list[Header]) -> tuple[str, int, bool]:
    """How the body ends: ("chunked" | "length" | "close" | "none", Content-Length or -1, keep-alive)."""
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
                raise MalformedResponse(f"bad Content-Length {value[:32]!r}") from None
        elif lname == b"connection" and b"close" in value.lower():
            keep_alive = False
    if method == "HEAD" or status in (204, 304):
        return "none", 0, keep_alive
    if chunked:
        return "chunked", -1, keep_alive
    if length >= 0:
        return ("length" if length else "none"), length, keep_alive
    return "close", -1, False


__all__ = ["CRLF", "ChunkedDecoder", "HEAD_END", "Header", "MAX_HEAD_BYTES", "StaleConnection",
           "chunk_size", "framing", "parse_head", "read_head", "request_head"]

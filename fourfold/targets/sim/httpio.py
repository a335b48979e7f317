"""HTTP/1.1 without a framework (no I/O here): an incremental request parser and response heads.

Supported: request line + headers + a ``Content-Length`` body, keep-alive (the HTTP/1.1 default;
``Connection: close`` honoured; HTTP/1.0 only with ``Connection: keep-alive``), pipelined
requests (parsed in order). Rejected: ``Transfer-Encoding`` request bodies and bodies without a
length (411), malformed request lines, headers or lengths (400), oversize heads (431) or bodies
(413), other HTTP versions (505). Responses are framed by the server: ``Content-Length`` for
plain bodies, chunked transfer encoding for streams (:func:`chunk`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from http import HTTPStatus

MAX_HEAD_BYTES = 64 * 1024
MAX_BODY_BYTES = 32 * 1024 * 1024
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


class HttpParseError(Exception):
    """The client sent something that is not acceptable HTTP/1.1; answered, then the connection closes."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass
class IncomingRequest:
    method: str
    target: str
    version: str
    headers: dict[str, str]            # lower-case names; repeated headers joined with ", "
    body: bytes = b""
    path: str = field(init=False)
    query: str = field(init=False)

    def __post_init__(self) -> None:
        self.path, _, self.query = self.target.partition("?")

    @property
    def keep_alive(self) -> bool:
        tokens = {t.strip().lower() for t in self.headers.get("connection", "").split(",")}
        if self.version == "HTTP/1.0":
            return "keep-alive" in tokens
        return "close" not in tokens


class RequestParser:
    """Bytes in, complete requests out: ``feed(data)`` then ``next_request()`` until None."""

    def __init__(self, max_head_bytes: int = MAX_HEAD_BYTES, max_body_bytes: int = MAX_BODY_BYTES) -> None:
        self._buffer = bytearray()
        self._pending: IncomingRequest | None = None
        self._body_length = 0
        self.max_head_bytes = max_head_bytes
        self.max_body_bytes = max_body_bytes

    def feed(self, data: bytes) -> None:
        self._buffer += data

    @property
    def buffered_bytes(self) -> int:
        return len(self._buffer)

    def next_request(self) -> IncomingRequest | None:
        """The next complete request, None when more bytes are needed; raises HttpParseError."""
        if self._pending is None:
            end = self._buffer.find(b"\r\n\r\n")
            if end < 0:
                if len(self._buffer) > self.max_head_bytes:
                    raise HttpParseError(431, "request head too large")
                return None
            if end > self.max_head_bytes:
                raise HttpParseError(431, "request head too large")
            head = bytes(self._buffer[:end])
            del self._buffer[: end + 4]
            self._pending, self._body_length = parse_head(head, self.max_body_bytes)
        if len(self._buffer) < self._body_length:
            return None
        request = self._pending
        request.body = bytes(self._buffer[: self._body_length])
        del self._buffer[: self._body_length]
        self._pending = None
        self._body_length = 0
        return request


def parse_head(head: bytes, max_body_bytes: int = MAX_BODY_BYTES) -> tuple[IncomingRequest, int]:
    """Parse a request head (without the blank line); returns the request and its body length."""
    try:
        text = head.decode("latin-1")
    except UnicodeDecodeError as exc:  # pragma: no cover - latin-1 decodes every byte
        raise HttpParseError(400, "undecodable request head") from exc
    lines = text.split("\r\n")
    while lines and not lines[0]:
        lines.pop(0)  # tolerate stray CRLFs between pipelined requests (RFC 9112 2.2)
    if not lines:
        raise HttpParseError(400, "empty request")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[0].isalpha() or not parts[1]:
        raise HttpParseError(400, f"malformed request line {lines[0][:100]!r}")
    method, target, version = parts
    if not version.startswith("HTTP/"):
        raise HttpParseError(400, f"malformed request line {lines[0][:100]!r}")
    if version not in ("HTTP/1.1", "HTTP/1.0"):
        raise HttpParseError(505, f"{version} is not supported; use HTTP/1.1")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip() or " " in name:
            raise HttpParseError(400, f"malformed header line {line[:100]!r}")
        key = name.lower()
        value = value.strip()
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    if "transfer-encoding" in headers:
        raise HttpParseError(411, "Transfer-Encoding request bodies are not supported; send Content-Length")
    length = 0
    if "content-length" in headers:
        values = {v.strip() for v in headers["content-length"].split(",")}
        if len(values) != 1 or not next(iter(values)).isdigit():
            raise HttpParseError(400, f"invalid Content-Length {headers['content-length']!r}")
        length = int(next(iter(values)))
    elif method.upper() in _BODY_METHODS:
        raise HttpParseError(411, f"{method} needs a Content-Length header")
    if length > max_body_bytes:
        raise HttpParseError(413, f"request body of {length} bytes is larger than {max_body_bytes}")
    return IncomingRequest(method.upper(), target, version, headers), length


def reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Unknown"


def response_head(
    status: int,
    headers: list[tuple[str, str]],
    *,
    keep_alive: bool,
    content_length: int | None = None,
) -> bytes:
    """Status line and headers; chunked transfer encoding when ``content_length`` is None."""
    lines = [f"HTTP/1.1 {status} {reason(status)}"]
    lines.extend(f"{name}: {value}" for name, value in headers)
    if content_length is None:
        lines.append("transfer-encoding: chunked")
    else:
        lines.append(f"content-length: {content_length}")
    lines.append("connection: keep-alive" if keep_alive else "connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def chunk(payload: bytes) -> bytes:
    """One chunk of a chunked body (an empty payload would end the body, so it gives b"")."""
    if not payload:
        return b""
    return b"%x\r\n%b\r\n" % (len(payload), payload)


LAST_CHUNK = b"0\r\n\r\n"

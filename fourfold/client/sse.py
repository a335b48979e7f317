"""Incremental Server-Sent-Events decoder: bytes in, events out, no I/O.

Modelled on the decoders in ``httpx/_decoders.py``: ``decode(data)`` takes the bytes of one
network read, in whatever split the socket produced, and returns the events those bytes
completed; ``flush()`` is called once at end of body. The rules follow the WHATWG
"event stream interpretation" algorithm:

* lines end in ``\\n``, ``\\r\\n`` or a lone ``\\r`` (a ``\\r\\n`` torn across two reads is one
  line end, not two);
* a UTF-8 byte-order mark at the very start of the stream is dropped;
* ``: text`` is a comment (keep-alive pings), ignored;
* ``field: value`` / ``field:value`` / ``field`` (no colon: empty value); one leading space of
  the value is removed;
* ``data`` lines accumulate, joined with ``\\n``; an empty line dispatches the event.

Two deliberate departures, both for a load tester that would rather count than hide:

* an event that has an ``event:`` line but no ``data`` line is still delivered (data ""); a
  block of only ``id:`` / ``retry:`` / comments updates the state but dispatches nothing;
* at end of stream, an event whose lines are complete but whose closing blank line never came
  is delivered by ``flush()``; a torn last *line* is dropped and its size kept in
  ``discarded_tail_bytes``.

Speed matters (tens of thousands of events per second in one gevent process), so the decoder
works on bytes, finds line ends with ``bytes.find``/``split`` and decodes UTF-8 once per batch of
complete lines (a ``\\n`` byte never occurs inside a multi-byte character, so a batch ending at a
newline is never torn). A read that is exactly one ``data: ...\\n\\n`` event, which is how most
servers flush, takes a short path of a few byte checks and one decode. Invalid UTF-8 never
raises: it is replaced (U+FFFD) and counted per line in ``invalid_utf8``. An event (or a single
line) larger than ``max_event_bytes`` is discarded, not buffered without bound; ``too_large``
records that it happened.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["DEFAULT_MAX_EVENT_BYTES", "SSEDecoder", "SSEEvent"]

DEFAULT_MAX_EVENT_BYTES = 4 * 1024 * 1024
_BOM = b"\xef\xbb\xbf"


class SSEEvent(NamedTuple):
    """One dispatched event. ``id`` is the stream's last event id at dispatch (it persists across
    events, as in the spec); ``retry`` is set only on the event whose block carried ``retry:``."""

    event: str = "message"
    data: str = ""
    id: str | None = None
    retry: int | None = None


class SSEDecoder:
    """Turns a byte stream into :class:`SSEEvent` values; one instance per response body."""

    def __init__(self, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> None:
        self.max_event_bytes = max_event_bytes
        self.invalid_utf8 = 0            # lines that held invalid UTF-8 (replaced, not raised)
        self.too_large = False           # some event exceeded max_event_bytes and was discarded
        self.events_dropped = 0          # how many events were discarded for size
        self.discarded_tail_bytes = 0    # bytes of a torn last line dropped by flush()
        self.last_event_id: str | None = None
        self.retry_ms: int | None = None
        # bytes of the current, not yet complete line (a list: joined once, when it completes)
        self._pending: list[bytes] = []
        self._pending_bytes = 0
        self._skip_lf = False            # the previous read ended in "\r": drop a leading "\n"
        self._bom_head: bytes | None = b""   # None once the stream start has been checked
        self._discarding = False         # skipping the rest of an oversized event
        self._discard_after_lf = False   # ...and the last byte skipped was "\n"
        self._slow = True                # one of the three states above needs _prepare()
        # the event being assembled
        self._data: list[str] = []
        self._data_chars = 0
        self._event: str | None = None
        self._retry: int | None = None
        self._seen = False               # a data or event field since the last dispatch
        self._dropping = False           # the current event grew too large: drop it at dispatch

    # ---- public ----
    def decode(self, data: bytes) -> list[SSEEvent]:
        """Consume one read's bytes; return the events they completed (often zero or one)."""
        if not (self._slow or self._pending or self._seen):
            # Fast path: the read is exactly one "data: ...\n\n" event (how servers flush).
            size = len(data)
            if (data.find(b"\n") == size - 2 and data.endswith(b"\n\n") and data.startswith(b"data:")
                    and size <= self.max_event_bytes and b"\r" not in data):
                try:
                    text = data[6 if data[5] == 32 else 5:-2].decode("utf-8")
                except UnicodeDecodeError:
                    pass  # the general path below counts and replaces it
                else:
                    retry, self._retry = self._retry, None   # a "retry:" line read earlier
                    return [SSEEvent("message", text, self.last_event_id, retry)]
        if self._slow or b"\r" in data:
            data = self._prepare(data)
        if not data:
            return []
        last_nl = data.rfind(b"\n")
        if last_nl < 0:
            self._pending.append(data)
            self._pending_bytes += len(data)
            if self._pending_bytes > self.max_event_bytes:
                self._overflow()
            return []
        if self._pending:
            self._pending.append(data[:last_nl])
            block = b"".join(self._pending)
            self._pending = []
        else:
            block = data[:last_nl]
        self._pending_bytes = len(data) - last_nl - 1
        if self._pending_bytes:
            self._pending.append(data[last_nl + 1:])
            if self._pending_bytes > self.max_event_bytes:
                events = self._lines(self._text(block).split("\n"))
                self._overflow()
                return events
        try:
            text = block.decode("utf-8")
        except UnicodeDecodeError:
            text = self._text(block)
        return self._lines(text.split("\n"))

    def _prepare(self, data: bytes) -> bytes:
        """The rare cases, kept off the hot path: a torn CRLF, the BOM, CR line ends, discarding."""
        if self._skip_lf and data:
            self._skip_lf = False
            if data[0] == 10:  # "\n" completing a "\r\n" torn across reads
                data = data[1:]
        if self._bom_head is not None and data:
            head = self._bom_head + data
            if len(head) < 3 and _BOM.startswith(head):
                self._bom_head = head
                return b""
            self._bom_head = None
            data = head[3:] if head.startswith(_BOM) else head
        if b"\r" in data:
            self._skip_lf = data[-1] == 13
            data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        if self._discarding and data:
            data = self._skip_oversized(data)
        self._slow = self._skip_lf or self._discarding or self._bom_head is not None
        return data

    def flush(self) -> list[SSEEvent]:
        """End of stream: deliver an event that lacks only its closing blank line."""
        if self._pending:
            self.discarded_tail_bytes += self._pending_bytes
            self._pending = []
            self._pending_bytes = 0
        if self._discarding:
            self._discarding = False
            return []
        return self._lines([""]) if self._seen else []

    # ---- internals ----
    def _text(self, block: bytes) -> str:
        """Decode with replacement, counting the lines that held invalid UTF-8."""
        try:
            return block.decode("utf-8")
        except UnicodeDecodeError:
            for line in block.split(b"\n"):
                try:
                    line.decode("utf-8")
                except UnicodeDecodeError:
                    self.invalid_utf8 += 1
            return block.decode("utf-8", "replace")

    def _lines(self, lines: list[str]) -> list[SSEEvent]:
        """Interpret complete lines (the hot loop: one data line and one blank line per event)."""
        events: list[SSEEvent] = []
        data = self._data
        for line in lines:
            if not line:  # blank line: dispatch
                if self._seen:
                    if self._dropping:
                        self._dropping = False
                    else:
                        events.append(SSEEvent(self._event or "message", "\n".join(data),
                                               self.last_event_id, self._retry))
                    data.clear()
                    self._data_chars = 0
                    self._event = self._retry = None
                    self._seen = False
                else:
                    self._retry = None   # a block with only retry/id/comments dispatches nothing
                continue
            if line.startswith("data:"):
                value = line[6:] if line.startswith(" ", 5) else line[5:]
            elif line[0] == ":":
                continue
            else:
                name, _, value = line.partition(":")
                if value.startswith(" "):
                    value = value[1:]
                if name == "event":
                    self._event = value
                    self._seen = True
                    continue
                if name == "id":
                    if "\0" not in value:
                        self.last_event_id = value
                    continue
                if name == "retry":
                    if value.isascii() and value.isdigit():
                        self._retry = self.retry_ms = int(value)
                    continue
                if name != "data":
                    continue  # unknown field: ignored, as the spec says
            self._seen = True
            if self._dropping:
                continue
            self._data_chars += len(value) + 1
            if self._data_chars > self.max_event_bytes:
                self._mark_too_large()
                self._dropping = True
                data.clear()
                continue
            data.append(value)
        return events

    def _overflow(self) -> None:
        """A single line outgrew the limit: drop it and skip to the end of its event."""
        self._pending = []
        self._pending_bytes = 0
        if not self._dropping:
            self._mark_too_large()
        self._data.clear()
        self._data_chars = 0
        self._event = None
        self._retry = None
        self._seen = False
        self._dropping = False
        self._discarding = True
        self._discard_after_lf = False
        self._slow = True

    def _skip_oversized(self, data: bytes) -> bytes:
        """While discarding: return what follows the blank line that ends the event, or b""."""
        if self._discard_after_lf and data[0] == 10:
            end = 1
        else:
            found = data.find(b"\n\n")
            if found < 0:
                self._discard_after_lf = data[-1] == 10
                return b""
            end = found + 2
        self._discarding = False
        return data[end:]

    def _mark_too_large(self) -> None:
        self.too_large = True
        self.events_dropped += 1

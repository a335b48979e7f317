"""What every JSON-over-SSE dialect shares: :class:`JsonEventParser` (SSE decoding, malformed-event
counting, error ranking, the one-JSON-body mode and the whole-body fast path) and the helpers its
subclasses call (:func:`loads_event`, :func:`error_message`, :func:`classify_error_message`).

The OpenAI, Anthropic, Triton and RAG parsers subclass it and only say what their events mean
(``_on_event``, ``_on_body``; ``_on_object`` to take the fast path).
"""

from __future__ import annotations

import json
import re
from json.scanner import make_scanner
from typing import Any

from fourfold.client.dialects.base import Completion
from fourfold.client.dialects.usage import finite_number, settle_usage, whole_number
from fourfold.client.native import scan_events
from fourfold.client.sse import DEFAULT_MAX_EVENT_BYTES, SSEDecoder, SSEEvent
from fourfold.measure.record import INPUT_USAGE_IMPLAUSIBLE, NO_TERMINAL_EVENT, USAGE_IMPLAUSIBLE

__all__ = ["ERROR_RANK", "INPUT_USAGE_IMPLAUSIBLE", "JsonEventParser", "NO_TERMINAL_EVENT",
           "USAGE_IMPLAUSIBLE", "classify_error_message", "error_message", "finite_number", "loads_event",
           "loads_json", "whole_number"]

_CONTEXT_LENGTH = re.compile(r"context[ _-]?(length|window)|maximum context|max_model_len|prompt is too long"
                             r"|input length|max_input_len|too many (input )?tokens", re.IGNORECASE)

# When several problems show up in one body, the most telling one is reported.
ERROR_RANK = {"": 0, "malformed_stream": 1, "too_large": 2, "interrupted": 3, "http_5xx": 3,
              "rate_limited": 3, "context_length": 4}
# a JSON string without escapes or control characters: the fast path takes it as plain text
_PLAIN_STRING = re.compile(rb'"[^"\\\x00-\x1f]*"')

MAX_CALLS = 1024   # tool calls told apart per response; further ones are kept as one
_HEAD_PARTS = 16   # feed_chunks: events its template search sees first when C scans the body

# the C scanner json.loads itself ends up in (typeshed types its argument as the C class)
_scan_json = make_scanner(json.JSONDecoder())  # type: ignore[arg-type]


def loads_json(data: str | bytes) -> Any:
    """``json.loads`` whose only error is ``ValueError``: a value nested deeper than Python's
    recursion limit (a server's ``[`` x 100,000) raises RecursionError in ``json``, which no
    parser's error handling expects; here it is malformed JSON like any other."""
    try:
        return json.loads(data)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None


def loads_event(text: str) -> Any:
    """``json.loads`` for one event's data, about twice as fast on a short object.

    ``json.loads`` spends half its time on a small event in two whitespace regexes around the C
    scanner; this calls the scanner directly when the text starts with ``{`` and checks the tail
    by hand. Same results and the same ``ValueError`` (``JSONDecodeError``) on bad input, nesting
    too deep included (:func:`loads_json`).
    """
    if not text.startswith("{"):
        return loads_json(text)
    try:
        obj, end = _scan_json(text, 0)
    except StopIteration as exc:   # what the scanner raises where json.loads says "Expecting value"
        raise json.JSONDecodeError("Expecting value", text, exc.value) from None
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None
    if end != len(text) and text[end:].strip(" \t\n\r"):
        raise json.JSONDecodeError("Extra data", text, end)
    return obj


def classify_error_message(message: str, default: str = "interrupted") -> str:
    """Error class for an error reported inside a 200 body: context length, else ``default``."""
    return "context_length" if _CONTEXT_LENGTH.search(message) else default


def error_message(error: Any) -> str:
    """The human text of an error payload (``{"message": ...}``, a plain string, or anything)."""
    if isinstance(error, dict):
        text = error.get("message") or error.get("error") or error.get("type") or ""
        code = error.get("code")
        if isinstance(text, str) and isinstance(code, str) and code not in text:
            text = f"{text} ({code})"  # OpenAI puts "context_length_exceeded" in code
        return text if isinstance(text, str) else json.dumps(text)
    return error if isinstance(error, str) else json.dumps(error)


def _load_objects(payloads: list[bytes]) -> list[dict[str, Any]] | None:
    """The events' JSON objects by one ``json.loads`` of an array of them (cheaper than one each);
    None when one is not JSON, not an object, or breaks the array (``{"a": 1}, {"b": 2}``)."""
    try:
        objects = loads_json(b"[" + b",".join(payloads) + b"]")
    except ValueError:     # includes invalid UTF-8
        return None
    if len(objects) != len(payloads) or not all(type(o) is dict for o in objects):
        return None
    return objects


class JsonEventParser:
    """A StreamParser for dialects whose stream is SSE events carrying JSON.

    Subclasses implement ``_on_event`` (one SSE event -> content deltas it carried, 0 or 1) and
    ``_on_body`` (the whole non-streamed JSON body). Text and reasoning go into ``_text`` /
    ``_reasoning``; everything else straight into ``_done`` (the Completion being built).
    """

    _template_hits = 0      # events feed_chunks took by the template, without JSON (tests read it)

    def __init__(self, streaming: bool = True, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> None:
        self.streaming = streaming
        self.max_event_bytes = max_event_bytes
        self.decoder = SSEDecoder(max_event_bytes)
        self.server_timing: dict[str, float] = {}
        self.malformed_events = 0
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self._body: list[bytes] = []
        self._body_bytes = 0
        self._done = Completion()
        self._finished = False
        self._fed = False
        # usage as the server reported it (any JSON value; checked in finish()), and the output
        # tokens it says it did not send (OpenAI's completion_tokens_details.reasoning_tokens)
        self.usage_output: Any = None
        self.usage_input: Any = None
        self.usage_hidden = 0
        self.usage_reasoning: Any = None     # the reasoning tokens the usage says were spent
        self.usage_cached: Any = None        # the prompt tokens it says came from its prefix cache
        # which delta was the first answer (not reasoning) delta: the reasoning-only deltas before it
        self._answer_at: int | None = None
        self._reasoning_only = 0
        self._reasoning_deltas = 0
        self._tools: dict[Any, dict[str, Any]] = {}     # a call's index -> id, name, argument pieces

    # ---- StreamParser ----
    def feed(self, data: bytes) -> int:
        """Consume raw bytes; return the content deltas they completed (0 when not streaming)."""
        self._fed = True
        if not self.streaming:
            self._body_bytes += len(data)
            if self._body_bytes <= self.max_event_bytes:
                self._body.append(data)
            return 0
        deltas = 0
        on_event = self._on_event
        for event in self.decoder.decode(data):
            deltas += on_event(event)
        self._done.content_deltas += deltas
        return deltas

    def feed_chunks(self, chunks: list[bytes]) -> list[int] | None:
        """A whole streamed body at once: the content deltas each chunk completed, or None when
        the body is not plain enough for the fast path (then ``feed`` each chunk instead).

        The fast path covers what nearly every server sends: only ``data:`` events of one line,
        ``\n\n`` between them, the body ending after an event. All JSON objects are parsed in one
        ``json.loads`` of a JSON array built from their payloads (the per-call overhead dominates
        a small event), and each event is credited to the chunk that carried its closing blank
        line, exactly as ``feed`` would. Anything else (comments, ``event:``/``id:`` lines,
        CRLF, a BOM, a torn last event, an oversized event, a payload that is not JSON or breaks
        the array) returns None before any state has changed, and the event-by-event path
        decides. Only subclasses with an ``_on_object`` handler take the fast path; one with a
        ``_find_template(parts) -> (prefix, suffix) | None`` hook also skips the JSON parse of
        the events ``prefix + <plain JSON string> + suffix``: plain content deltas.
        """
        on_object = getattr(self, "_on_object", None)
        if on_object is None or not self.streaming or self._fed or not chunks:
            return None
        body = b"".join(chunks)
        if not body.endswith(b"\n\n") or b"\r" in body or body.startswith(b"\xef\xbb\xbf"):
            return None
        parts = body.split(b"\n\n", _HEAD_PARTS if scan_events is not None else -1)   # (see _HEAD_PARTS)
        cut_short = len(parts) > _HEAD_PARTS
        parts.pop()
        limit = self.max_event_bytes
        find_template = getattr(self, "_find_template", None)
        template = find_template(parts) if find_template is not None else None
        if template is None and cut_short and find_template is not None:
            parts = body.split(b"\n\n")
            parts.pop()
            template = find_template(parts)
        tprefix, tsuffix = template if template is not None else (b"\x00", b"")
        if scan_events is not None:      # the same loop in C (fourfold.client.native)
            return self._feed_scanned(body, chunks, tprefix, tsuffix, template is not None, on_object)
        cut_start, cut_end = len(tprefix), (-len(tsuffix) if tsuffix else None)
        plain = _PLAIN_STRING.fullmatch
        # per event: str (a plain content delta), int (index of its JSON object) or SSEEvent
        items: list[Any] = []
        ends: list[int] = []       # offset just past each event's closing blank line
        json_payloads: list[bytes] = []
        end = 0
        hits = 0
        for part in parts:
            end += len(part) + 2
            ends.append(end)
            if part.startswith(tprefix) and part.endswith(tsuffix):
                literal = part[cut_start:cut_end]
                if plain(literal) and len(part) <= limit:
                    try:
                        items.append(literal[1:-1].decode("utf-8"))
                        hits += 1
                        continue
                    except UnicodeDecodeError:
                        return None
            if not part.startswith(b"data:") or b"\n" in part or len(part) > limit:
                return None
            payload = part[6:] if part[5:6] == b" " else part[5:]
            if payload[:1] == b"{":
                items.append(len(json_payloads))
                json_payloads.append(payload)
            else:
                try:
                    items.append(SSEEvent(data=payload.decode("utf-8")))
                except UnicodeDecodeError:
                    return None
        if (objects := _load_objects(json_payloads)) is None:
            return None
        self._fed = True    # every check passed: from here on the body is applied, event by event, in order
        if template is not None:
            self._template_hits = hits
        per_chunk = [0] * len(chunks)
        chunk_ends: list[int] = []
        total = 0
        for data in chunks:
            total += len(data)
            chunk_ends.append(total)
        chunk = 0
        append_text = self._text.append
        on_event = self._on_event
        deltas = 0
        for item, end in zip(items, ends):
            while chunk_ends[chunk] < end:
                chunk += 1
            kind = type(item)
            if kind is str:                   # a plain content delta (see _find_template)
                if not item:
                    continue
                append_text(item)
                if self._answer_at is None:
                    self._answer_at = self._reasoning_only
                got = 1
            elif kind is int:
                obj = objects[item]
                try:
                    got = on_object(obj)
                except (AttributeError, TypeError, KeyError, IndexError) as exc:
                    self._malformed(json_payloads[item].decode("utf-8", "replace"),
                                    f"unexpected shape ({type(exc).__name__}: {exc})")
                    got = 0
            else:
                got = on_event(item)
            if got:
                per_chunk[chunk] += got
                deltas += got
        self._done.content_deltas += deltas
        return per_chunk

    def _feed_scanned(self, body: bytes, chunks: list[bytes], tprefix: bytes, tsuffix: bytes, templated: bool,
                      on_object: Any) -> list[int] | None:
        """:meth:`feed_chunks`' loop with the parts scanned by ``_hotpath.scan_events``: the same
        checks, the same events applied in the same order, the plain deltas' texts taken in runs."""
        assert scan_events is not None
        scanned = scan_events(body, chunks, tprefix, tsuffix, self.max_event_bytes)
        if scanned is None:
            return None
        texts, per_chunk, others, hits = scanned
        objects = _load_objects([payload for _, _, payload, is_json in others if is_json])
        if objects is None:
            return None
        try:
            events = [SSEEvent(data=payload.decode("utf-8"))
                      for _, _, payload, is_json in others if not is_json]
        except UnicodeDecodeError:
            return None
        self._fed = True    # every check passed: from here on the body is applied, event by event, in order
        if templated:
            self._template_hits = hits
        text = self._text
        deltas = taken = 0
        next_object, next_event = iter(objects), iter(events)
        for before, chunk, payload, is_json in others:
            if before > taken:
                text.extend(texts[taken:before])
                taken = before
                if self._answer_at is None:              # plain deltas are answer text
                    self._answer_at = self._reasoning_only
            if is_json:
                try:
                    got = on_object(next(next_object))
                except (AttributeError, TypeError, KeyError, IndexError) as exc:
                    self._malformed(payload.decode("utf-8", "replace"),
                                    f"unexpected shape ({type(exc).__name__}: {exc})")
                    got = 0
            else:
                got = self._on_event(next(next_event))
            if got:
                per_chunk[chunk] += got
                deltas += got
        if len(texts) > taken:
            text.extend(texts[taken:])
            if self._answer_at is None:
                self._answer_at = self._reasoning_only
        self._done.content_deltas += deltas + len(texts)
        return per_chunk

    def finish(self) -> Completion:
        """End of body: flush, parse a non-streamed body, and return the Completion (idempotent)."""
        done = self._done
        if self._finished:
            return done
        self._finished = True
        if self.streaming:
            for event in self.decoder.flush():
                done.content_deltas += self._on_event(event)
            if self.decoder.too_large:
                self._error("too_large",
                            f"an SSE event exceeded {self.max_event_bytes} bytes and was discarded")
            if self.decoder.invalid_utf8:   # replaced by U+FFFD (the text is kept) and counted
                self._malformed_utf8(self.decoder.invalid_utf8)
        elif self._body_bytes > self.max_event_bytes:
            self._error("too_large",
                        f"response body of {self._body_bytes} bytes exceeds {self.max_event_bytes}")
        else:
            raw = b"".join(self._body)
            try:
                raw.decode("utf-8-sig")
            except UnicodeDecodeError:
                self._malformed_utf8(1)
            try:
                obj = loads_json(raw.decode("utf-8-sig", "replace"))
                if not isinstance(obj, dict):
                    raise TypeError("not a JSON object")
                self._on_body(obj)
            except (ValueError, AttributeError, TypeError, KeyError, IndexError) as exc:
                self._malformed(raw[:120].decode("utf-8", "replace"), f"not a valid response body ({exc})")
        self._finalize()
        if done.error_class == "malformed_stream" and self.malformed_events > 1:
            done.error_detail += f" (+{self.malformed_events - 1} more malformed)"
        done.text = "".join(self._text)
        done.reasoning = "".join(self._reasoning)
        done.first_answer_delta = self._answer_at
        done.reasoning_deltas = self._reasoning_deltas
        done.tool_calls = [{"id": call["id"], "name": call["name"], "arguments": "".join(call["arguments"])}
                           for call in self._tools.values()]
        settle_usage(self, done)
        if (self.streaming and not done.terminal and done.finish_reason
                and not self.decoder.discarded_tail_bytes):
            # a finish reason and then a clean end of the body (no torn last line): the answer is
            # complete though the terminal event never came (servers that skip [DONE])
            done.terminal = True
            done.extra[NO_TERMINAL_EVENT] = True
        return done

    # ---- for subclasses ----
    def _answer(self, text: str) -> None:
        """A delta's answer text (the caller credits the delta)."""
        self._text.append(text)
        if self._answer_at is None:
            self._answer_at = self._reasoning_only

    def _tool(self, index: Any, call_id: Any = None, name: Any = None, arguments: Any = None) -> bool:
        """A piece of tool call ``index``: its id and name (first seen) and a piece of its arguments'
        JSON text. True when the piece is output (a name or argument text): answer output, as text is.
        A name equal to the one the call has is a repeat, not more of it (llama-cpp-python's server
        sends the whole name with every piece; OpenAI's once; a name split in pieces is joined)."""
        key = index if isinstance(index, (int, str)) else len(self._tools)
        if key not in self._tools and len(self._tools) >= MAX_CALLS:
            key = "(more calls)"                 # a server naming a new call per event: bounded
        call = self._tools.setdefault(key, {"id": "", "name": "", "arguments": []})
        if isinstance(call_id, str) and call_id and not call["id"]:
            call["id"] = call_id
        output = False
        if isinstance(name, str) and name and name != call["name"]:
            call["name"] += name
            output = True
        if isinstance(arguments, str) and arguments:
            call["arguments"].append(arguments)
            output = True
        if output and self._answer_at is None:
            self._answer_at = self._reasoning_only
        return output

    def _thought(self, text: str, answered: bool = False) -> None:
        """A delta's reasoning text; ``answered``: the same delta carried answer output too."""
        self._reasoning.append(text)
        self._reasoning_deltas += 1
        if not answered and self._answer_at is None:
            self._reasoning_only += 1

    def _on_event(self, event: SSEEvent) -> int:
        raise NotImplementedError

    def _on_body(self, obj: dict[str, Any]) -> None:
        raise NotImplementedError

    def _finalize(self) -> None:
        """Hook run once by finish() before the Completion is returned."""

    def _json(self, data: str) -> dict[str, Any] | None:
        """The event's JSON object, or None (counted as malformed) when it is not one."""
        try:
            obj = loads_event(data)
        except ValueError as exc:
            self._malformed(data, f"not JSON ({exc})")
            return None
        if not isinstance(obj, dict):
            self._malformed(data, "not a JSON object")
            return None
        return obj

    def _malformed_utf8(self, lines: int) -> None:
        self.malformed_events += 1
        if self.malformed_events == 1:
            self._error("malformed_stream",
                        f"invalid UTF-8 in {lines} line(s) of the body (replaced by U+FFFD)")

    def _malformed(self, data: str, why: str) -> None:
        self.malformed_events += 1
        if self.malformed_events == 1:
            self._error("malformed_stream", f"{why}: {data[:120]!r}")

    def _server_error(self, error: Any, default: str = "interrupted") -> None:
        message = error_message(error)
        self._error(classify_error_message(message, default), message or "error event without a message")

    def _error(self, error_class: str, detail: str) -> None:
        """Keep the most telling problem (``ERROR_RANK``); the first of equal rank wins."""
        done = self._done
        if ERROR_RANK.get(error_class, 3) > ERROR_RANK.get(done.error_class, 3):
            done.error_class, done.error_detail = error_class, detail

    def _read_timings(self, timings: Any) -> None:
        """Numeric ``*_ms`` / ``*_us`` entries of a server's timing block -> ``server_timing``."""
        if isinstance(timings, dict):
            for key, value in timings.items():
                if isinstance(key, str) and key.endswith(("_ms", "_us")):
                    number = finite_number(value)
                    if number is not None:
                        self.server_timing[key] = number


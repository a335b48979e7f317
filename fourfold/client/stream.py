"""Send one LLM request, take its body with each piece's receive time, and turn it into a RequestRecord.

The read path, in order. Steps marked *C* run in ``fourfold/client/_hotpath.c`` where it was built
(:mod:`~fourfold.client.native`), else in their Python twins, with the same results:

1. :func:`send` first drains the process's reactor (other streams' reads waiting while this
   greenlet ran), then sends. A plain ``httpx.Client`` over
   :class:`~fourfold.client.transport.RawH1Transport` hands the request to the transport itself
   (:class:`_Direct`, which builds what ``client.stream`` would); any other client goes through
   ``client.stream``. The transport writes the request and reads the response head.
2. Under gevent over plain HTTP the socket is the reactor's from the request on
   (:mod:`~fourfold.client.reactor`): a hub callback polls one epoll for every socket in flight
   and reads each ready one with the kernel's receive stamp (``SO_TIMESTAMPNS``), queuing
   ``(stamp, bytes)`` for its stream (*C*: ``_hotpath.drain``; Python: ``Reader.on_ready`` with
   ``socket.recvmsg``). The stream's greenlet is woken when its body can have ended, not per read.
3. RawH1Transport's body is taken whole by ``RawStream.read_into``
   (:mod:`~fourfold.client.h1body`). A chunked body from the reactor is decoded in one loop over
   the queued reads (*C*: ``_hotpath.take_chunks`` takes each read made of whole chunks with
   content; torn chunks, idle pieces and the end stay in Python). Other framings iterate the stream,
   over the reactor's queue too; with TLS or without gevent each piece is one blocking ``recv``,
   stamped with ``perf_counter_ns()`` after it returns. httpx's own transports (``--http2``):
   ``iter_raw`` pieces, stamped as they come out. Size, duration and the read timeout (content, not
   bytes) are checked as the pieces arrive; no SSE or JSON is parsed yet, so parsing never delays
   the next piece's stamp.
4. After the body has ended, a ``Content-Encoding`` is undone, the reactor is drained again and
   the pieces go to the dialect's parser: the whole-body fast path when it takes the body
   (``JsonEventParser.feed_chunks``; *C*: ``_hotpath.scan_events`` splits the events, matches the
   stream's content template and credits each delta to the piece that completed it), else
   ``feed`` piece by piece, yielding to the hub every 32 pieces. The pieces that completed at
   least one content delta become the record's ``chunk_offsets_ms`` (*C*: ``_hotpath.offsets_ms``
   in the fast path).

Every outcome is data: the function never raises for anything the server does. Exactly one error
class ends up in ``record.error_class`` (see :mod:`fourfold.measure.record`).
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass

import httpx
from gevent import monkey, sleep

from fourfold.adapters.httpx import break_stream_cycle, direct_transport, merge_url, transport_stream
from fourfold.client.answer import answer_chunk, tool_call_facts
from fourfold.client.dialects.base import Dialect, HttpRequest
from fourfold.client.encoding import IDENTITY, decode_pieces
from fourfold.client.h1wire import MalformedResponse
from fourfold.client.native import offsets_ms
from fourfold.client.reactor import drain as drain_reactor
from fourfold.client.reactor import not_before
from fourfold.client.transport import RawH1Transport, read_pieces
from fourfold.measure.record import (
    NO_TERMINAL_EVENT,
    STAMPS_BEFORE_SEND,
    UNSOLICITED,
    UNSOLICITED_BEFORE,
    RequestRecord,
)
from fourfold.measure.tokentiming import multi_token_chunks, streamed_tokens
from fourfold.rundir.secrets import NO_SECRETS, Secrets
from fourfold.rundir.secrets import for_request as secrets_for_request
from fourfold.workloads.synthetic import estimate_tokens
from fourfold.workloads.tokenizer import Tokenizer, count_record_tokens
from fourfold.workloads.tools import offered_schemas

_ERROR_BODY_CAP = 4096
UNSENT = "unsent"    # record.extra key set when the run stopped a request before it reached the wire


@dataclass(frozen=True)
class StreamLimits:
    """Guards against a target that never stops talking."""

    max_response_bytes: int = 16 * 1024 * 1024
    max_duration_s: float | None = 600.0


def classify_status(status: int, body: str) -> str:
    """Error class of a non-2xx response from its status and (the start of) its body."""
    if 300 <= status < 400:
        return "redirect"           # fourfold follows no redirect: --host should be the final URL
    if status == 429:
        return "rate_limited"
    lowered = body.lower()
    if status in (400, 413, 422) and ("context_length" in lowered or "context length" in lowered
                                      or "maximum context" in lowered or "too many tokens" in lowered):
        return "context_length"
    if status >= 500:
        return "http_5xx"
    return "http_4xx"


def parse_server_timing(value: str) -> dict[str, float]:
    """``Server-Timing: retrieve;dur=12.5, llm_ttft;dur=80`` -> {"retrieve": 12.5, "llm_ttft": 80.0}."""
    timings: dict[str, float] = {}
    for metric in value.split(","):
        parts = [p.strip() for p in metric.split(";")]
        if not parts[0]:
            continue
        for param in parts[1:]:
            key, _, raw = param.partition("=")
            if key.strip().lower() == "dur":
                try:
                    duration = float(raw.strip().strip('"'))
                except ValueError:
                    continue
                if math.isfinite(duration):       # "dur=nan" would make the record unwritable
                    timings[parts[0]] = duration
    return timings


def send(client: httpx.Client, dialect: Dialect, request: HttpRequest, record: RequestRecord,
         limits: StreamLimits = StreamLimits(), tokenizer: Tokenizer | None = None) -> RequestRecord:
    """Send ``request`` on ``client``, fill ``record`` in place and return it (token counts by
    ``tokenizer``, when given, once the body has ended:
    :func:`fourfold.workloads.tokenizer.count_record_tokens`)."""
    now = time.perf_counter_ns
    times: list[int] = []
    chunks: list[bytes] = []
    transport_error = ""
    transport_detail = ""
    drain_reactor()       # other streams' reads first: this greenlet may have run a while
    secrets = secrets_for_request(client, request.headers)    # scrubbed before any cut (rundir.secrets)
    record.started_at = time.time()
    if request.json and request.json.get("ignore_eos"):
        record.extra["ignore_eos"] = True     # a length finish was asked for: not a truncation
    t0 = now()
    progress: dict[str, bool] = {}    # RawH1Transport sets "sent" (see UNSENT)
    facts = raw_stream = response = None
    encoding = ""
    try:
        direct = _direct_transport(client)
        opened = (_Direct(client, direct, request, progress) if direct is not None else
                  client.stream(request.method, request.path, json=request.json, headers=request.headers,
                                extensions={"fourfold_progress": progress}))
        with opened as response:
            t_head = now()
            facts = response.extensions.get("fourfold")
            if facts is not None:
                t0 = facts.t_start_ns
                t_head = facts.t_head_ns or t_head
                record.conn_reused = facts.reused
                record.connect_ms = facts.connect_ms
                record.conn_reconnected = facts.reconnected
                if facts.unsolicited_bytes:   # the pooled connection held an answer nobody asked for
                    record.extra[UNSOLICITED_BEFORE] = facts.unsolicited_bytes
                record.extra.update(facts.phases())     # dns, tcp, tls, send, wait (ms)
            record.http_version = response.http_version
            record.status = response.status_code
            # a head answered at once (a gateway's 429) can be stamped a fraction of a ms before the send:
            # the error of the kernel stamp's offset to perf_counter (client.reactor); 0, never negative
            record.ttfb_ms = max(0.0, (t_head - t0) / 1e6)
            _read_headers(response.headers, record, secrets)
            if not 200 <= response.status_code < 300:
                return secrets.scrub_record(
                    _redirect(_http_failure(response, record, secrets), response, secrets))
            content_type = response.headers.get("content-type", "")
            if request.stream and content_type and "event-stream" not in content_type.lower():
                record.extra["content_type"] = secrets.scrub(content_type)[:100]   # e.g. an HTML error page
            max_bytes = limits.max_response_bytes
            deadline = t0 + int(limits.max_duration_s * 1e9) if limits.max_duration_s else None
            # the transport's own stream, under the one httpx wraps round it; RawH1Transport's has read_into
            raw_stream = transport_stream(response) if facts is not None else None
            read_into = getattr(raw_stream, "read_into", None)
            if read_into is not None:       # RawH1Transport: the whole body in one loop, receive-stamped
                response.is_stream_consumed = True  # (what iter_raw would mark; close() comes with the block)
                stopped = read_into(times, chunks, max_bytes, deadline)
            else:                           # httpx's transports: stamped here as each piece comes
                stopped = read_pieces(response.iter_raw(), times, chunks, max_bytes, deadline,
                                      content_timeout_s=client.timeout.read, since_ns=t0)
            if stopped:
                transport_error = "too_large"
                transport_detail = (f"response passed {max_bytes} bytes" if stopped == "too_large"
                                    else f"response still streaming after {limits.max_duration_s:g} s")
            record.response_bytes = sum(len(c) for c in chunks)
            encoding = response.headers.get("content-encoding", "")
    except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
        transport_error, transport_detail = "connect_error", str(exc)
    except httpx.TimeoutException as exc:
        transport_error, transport_detail = "read_timeout", str(exc) or "timeout"
    except MalformedResponse as exc:       # not HTTP/1.1 (a bad status line, chunk size, Content-Length)
        transport_error, transport_detail = "malformed_stream", str(exc)
    except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as exc:
        transport_error, transport_detail = "interrupted", str(exc) or exc.__class__.__name__
    except httpx.HTTPError as exc:
        transport_error, transport_detail = "client_error", f"{exc.__class__.__name__}: {exc}"
    except Exception as exc:  # noqa: BLE001 - a bug in our client must not kill the run: it is counted
        transport_error, transport_detail = "client_error", f"{exc.__class__.__name__}: {exc}"
    except BaseException:
        if progress.get("sent") is False:
            record.extra[UNSENT] = True   # stopped (GreenletExit) before sending: the target never saw it
        secrets.scrub_record(record)      # the caller keeps it as cancelled: headers may have been read
        raise
    if response is not None:
        break_stream_cycle(response)      # the with block closed the stream: frees the response by refcount
    trailing = getattr(raw_stream, "trailing", b"")    # RawH1Transport: bytes after the body's end
    if trailing:
        record.extra[UNSOLICITED] = len(trailing)
        if not transport_error:
            transport_error = "malformed_stream"
            transport_detail = (f"{len(trailing)} bytes after the end of the response (an unsolicited "
                                f"response?): {secrets.scrub(trailing.decode('latin-1'))[:64]!r}")
    if encoding not in IDENTITY:         # a proxy that compressed the stream although we asked for identity
        record.extra["content_encoding"] = secrets.scrub(encoding)[:40]
        chunks, undecodable, why = decode_pieces(chunks, encoding, limits.max_response_bytes)
        if undecodable and not transport_error:
            transport_error, transport_detail = undecodable, why
    recv_ns = facts.recv_ns if facts is not None else None
    if recv_ns is not None and len(recv_ns) >= len(times):
        times = recv_ns[:len(times)]      # the transport's receive times (also when the body broke off)
    if times and times[0] < t0:           # a receive stamp before the send (client.reactor.not_before)
        times, record.extra[STAMPS_BEFORE_SEND] = not_before(times, t0)
    try:
        _finish(dialect, request, record, t0, times, chunks, transport_error, transport_detail, secrets,
                tokenizer)
    except Exception as exc:  # noqa: BLE001 - a bug, or a tokenizer that loads but cannot encode: the
        # answer came, the record could not be finished; counted as fourfold's own failure, never as
        # "cancelled" (that is only for requests the stop interrupted)
        record.error_class = "client_error"
        record.error_detail = f"finishing the record failed: {exc.__class__.__name__}: {exc}"[:500]
    return secrets.scrub_record(record)


def _direct_transport(client: httpx.Client) -> RawH1Transport | None:
    """The client's RawH1Transport when the client itself would add nothing to a request: no auth,
    no event hooks, no mounted transports, no cookies stored. ``client.stream`` then costs ~75 µs
    per request of auth, redirect and cookie machinery that does nothing (:class:`_Direct`).
    What "adds nothing" means is httpx's business: :func:`fourfold.adapters.httpx.direct_transport`."""
    return direct_transport(client, RawH1Transport)


class _Direct:
    """``client.stream(...)`` for a client that adds nothing to a request (see
    :func:`_direct_transport`): the request httpx's ``build_request`` builds (the client's headers
    under the request's, the URL joined to ``base_url``, the JSON body, the timeouts), sent on the
    transport; a response's ``Set-Cookie`` is stored in the client's jar as httpx stores it."""

    __slots__ = ("_client", "_transport", "_request", "_progress", "_response")

    def __init__(self, client: httpx.Client, transport: RawH1Transport, request: HttpRequest,
                 progress: dict[str, bool]) -> None:
        self._client, self._transport, self._request, self._progress = client, transport, request, progress
        self._response: httpx.Response | None = None

    def __enter__(self) -> httpx.Response:
        client, request = self._client, self._request
        headers = httpx.Headers(client.headers)
        if request.headers:
            headers.update(request.headers)
        outgoing = httpx.Request(request.method, _joined_url(client, request.path), headers=headers,
                                 json=request.json, extensions={"timeout": client.timeout.as_dict(),
                                                                "fourfold_progress": self._progress})
        response = self._response = self._transport.handle_request(outgoing)
        response.request = outgoing
        if "set-cookie" in response.headers:
            client.cookies.extract_cookies(response)
        return response

    def __exit__(self, *exc: object) -> None:
        if self._response is not None:
            self._response.close()


_JOINED: dict[tuple[str, str], httpx.URL] = {}


def _joined_url(client: httpx.Client, path: str) -> httpx.URL:
    """``base_url`` + ``path`` as httpx joins them (:func:`fourfold.adapters.httpx.merge_url`), kept per
    base URL and path."""
    key = (str(client.base_url), path)
    url = _JOINED.get(key)
    if url is None:
        if len(_JOINED) > 1024:
            _JOINED.clear()
        url = _JOINED[key] = merge_url(client, path)
    return url


def _read_headers(headers: httpx.Headers, record: RequestRecord, secrets: Secrets = NO_SECRETS) -> None:
    plan = headers.get("x-fourfold-plan")
    if plan:
        try:
            record.plan = json.loads(plan)
        except (ValueError, RecursionError):       # RecursionError: nested deeper than Python's limit
            record.plan = {"unparsed": secrets.scrub(plan)[:256]}
    timing = headers.get("server-timing")
    if timing:
        record.server_timing = parse_server_timing(timing)
    retry_after = headers.get("retry-after")
    if retry_after:
        try:
            record.extra["retry_after_s"] = float(retry_after)
        except ValueError:
            pass


def _http_failure(response: httpx.Response, record: RequestRecord,
                  secrets: Secrets = NO_SECRETS) -> RequestRecord:
    body = b""
    try:
        for data in response.iter_raw():
            body += data
            if len(body) >= _ERROR_BODY_CAP:
                break
    except httpx.HTTPError:
        pass
    text = body[:_ERROR_BODY_CAP].decode("utf-8", errors="replace")
    record.error_class = classify_status(response.status_code, text)
    # scrubbed before the cut: a key the body quotes across character 512 leaves nothing of itself
    record.error_detail = f"HTTP {response.status_code}: {secrets.scrub(text)[:512]}"
    record.e2e_ms = record.ttfb_ms
    return record


def _redirect(record: RequestRecord, response: httpx.Response, secrets: Secrets) -> RequestRecord:
    """A redirect's detail says where it points (scrubbed before the cut)."""
    if record.error_class == "redirect":
        location = secrets.scrub(response.headers.get("location", "")) or "(no Location header)"
        record.error_detail = (f"HTTP {response.status_code} redirect to {location[:512]}: "
                               "fourfold follows no redirect, give --host the final URL")
    return record


def _finish(dialect: Dialect, request: HttpRequest, record: RequestRecord, t0: int, times: list[int],
            chunks: list[bytes], transport_error: str, transport_detail: str,
            secrets: Secrets = NO_SECRETS, tokenizer: Tokenizer | None = None) -> RequestRecord:
    drain_reactor()       # read what other streams have received before this longer piece of work
    parser = dialect.parser(request.stream)
    offsets: list[float] = []
    counts: list[int] = []         # the deltas each content chunk completed, with `offsets`
    feed_chunks = getattr(parser, "feed_chunks", None)
    per_chunk = feed_chunks(chunks) if feed_chunks is not None and len(chunks) > 1 else None
    if per_chunk is not None:      # the whole body in one go (see JsonEventParser.feed_chunks)
        offsets = offsets_ms(times, per_chunk, t0)
        counts = [n for n in per_chunk if n]
    else:
        feed = parser.feed
        pause = _cooperative_pause()
        for i, (t, data) in enumerate(zip(times, chunks)):
            n = feed(data)
            if n:
                offsets.append(round((t - t0) / 1e6, 3))
                counts.append(n)
            if pause is not None and i & 31 == 31:
                pause()   # let the hub run other streams: parsing a long body must not hold it
    completion = parser.finish()
    if transport_error and completion.extra.pop(NO_TERMINAL_EVENT, None):
        completion.terminal = False   # a finish reason is complete only with a clean end of the body
    if not request.stream and completion.content_deltas and times:
        offsets = [round((times[-1] - t0) / 1e6, 3)]
    record.sent_mono_s = t0 / 1e9
    record.chunk_offsets_ms = offsets
    record.content_chunks = len(offsets)
    if offsets:
        record.ttft_ms = offsets[0]
        record.reasoning_chunks = answer_chunk(counts, completion.first_answer_delta)
        if record.reasoning_chunks < len(offsets):
            record.ttfo_ms = offsets[record.reasoning_chunks]
    if times:
        record.e2e_ms = round((times[-1] - t0) / 1e6, 3)
    elif record.ttfb_ms is not None:
        record.e2e_ms = record.ttfb_ms
    if completion.output_tokens is not None:
        record.output_tokens, record.output_tokens_source = completion.output_tokens, "usage"
    elif not request.stream and completion.text:   # one body is one "chunk", not one token: estimate
        record.output_tokens, record.output_tokens_source = estimate_tokens(completion.text), "estimate"
    else:
        record.output_tokens, record.output_tokens_source = completion.content_deltas, "chunks"
    record.input_tokens = completion.input_tokens
    record.cached_tokens = completion.cached_tokens
    if completion.reasoning_tokens is not None:
        record.reasoning_tokens, record.reasoning_tokens_source = completion.reasoning_tokens, "usage"
    elif completion.reasoning_deltas:
        record.reasoning_tokens, record.reasoning_tokens_source = (
            (estimate_tokens(completion.reasoning), "estimate") if not request.stream
            else (completion.reasoning_deltas, "chunks"))
    if tokenizer is not None:
        answer = completion.text + "".join(call["name"] + call["arguments"] for call in completion.tool_calls)
        count_record_tokens(record, request.json, answer, tokenizer, completion.reasoning)
    if request.stream and offsets:       # how many tokens a chunk carried; the client's count beside usage
        if record.output_tokens_source == "usage" and record.client_output_tokens is None:
            record.client_output_tokens = completion.content_deltas
        streamed = streamed_tokens(record.output_tokens, record.reasoning_tokens, record.reasoning_chunks)
        record.multi_token_chunks = multi_token_chunks(streamed, len(offsets))
    record.terminal = completion.terminal
    record.finish_reason = completion.finish_reason
    record.set_text(secrets.scrub(completion.text))     # before the 16 KiB cap: no key cut in half
    if completion.server_timing:
        record.server_timing.update(completion.server_timing)
    found = getattr(parser, "server_timing", None)    # timings a parser read from the body (Triton's
    if found:                                         # inference_time_ms): kept, not dropped
        record.server_timing.update(stage_ms(found))
    if completion.extra:
        record.extra.update(completion.extra)
    if completion.tool_calls:
        schemas = offered_schemas(request.json)         # the tools the request offered: calls judged by them
        record.extra.update(tool_call_facts(completion.tool_calls, secrets.scrub, schemas))
    record.error_class, record.error_detail = _classify(record, completion.error_class,
                                                        completion.error_detail, transport_error,
                                                        transport_detail)
    return record


def stage_ms(timings: dict[str, float]) -> dict[str, float]:
    """Server timings by stage in ms: ``inference_time_ms`` -> ``inference_time``, ``*_us`` / 1000."""
    out = {}
    for key, value in timings.items():
        if key.endswith("_us"):
            out[key[:-3]] = value / 1000
        else:
            out[key.removesuffix("_ms")] = value
    return out


def _cooperative_pause():  # type: ignore[no-untyped-def]
    """``gevent.sleep(0)`` when running under gevent (Locust), else None.

    Late parsing of a finished stream takes ~7 µs per chunk; when many streams end in the same
    decode step the parsing would queue up and delay the timestamps of every other stream.
    Yielding to the hub every 32 chunks bounds that delay to a fraction of a millisecond.
    """
    return sleep if monkey.is_module_patched("socket") else None


def _classify(record: RequestRecord, parser_error: str, parser_detail: str, transport_error: str,
              transport_detail: str) -> tuple[str, str]:
    """One class per request; the first cause wins: transport, then parser, then stream shape."""
    if transport_error == "read_timeout":
        return ("ttft_timeout" if record.ttft_ms is None else "read_timeout"), transport_detail
    if transport_error:
        return transport_error, transport_detail
    if parser_error:
        return parser_error, parser_detail
    if not record.terminal and record.extra.get("content_type"):
        return "malformed_stream", f"expected text/event-stream, got {record.extra['content_type']!r}"
    if not record.terminal:
        return "interrupted", "the stream ended without its terminal event"
    if record.finish_reason == "length" and not record.extra.get("ignore_eos"):
        return "truncated", "the server stopped at max_tokens"
    return "ok", ""

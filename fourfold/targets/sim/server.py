"""The simulator's connection handling: one ``asyncio.Protocol`` per connection, raw HTTP/1.1.

A connection serves one request at a time (pipelined requests wait in the parser's buffer).
A generation request is admitted by the gateway, planned, and handed to the shared
:class:`fourfold.targets.sim.scheduler.TokenScheduler` as a :class:`Generation` job. Streams send their
response head (with ``x-fourfold-plan``) at once and each token at its planned time in
chunked encoding; non-streaming answers are sent whole when the last token is due.

Faults (:mod:`fourfold.targets.sim.faults`) hook in here: each generation request draws its fault; a head
fault (429/500/503, wrong content type) is answered at once, ``slow_headers`` delays admission,
and stream faults shape the plan (stall) or wrap the :class:`Generation`'s encoder (malformed
chunk, invalid UTF-8, missing terminal event, huge chunk) or its scheduler job (disconnect,
endless stream).
"""

from __future__ import annotations

import asyncio
import math
from bisect import bisect_right
from collections.abc import Callable

from fourfold.targets.sim import faults as _faults
from fourfold.targets.sim.app import PLAN_DETAIL_HEADER, PLAN_HEADER, Reply, SimApp, error_reply
from fourfold.targets.sim.fault_spec import FAULT_KINDS
from fourfold.targets.sim.gateway import api_key_of
from fourfold.targets.sim.httpio import (
    LAST_CHUNK,
    HttpParseError,
    IncomingRequest,
    RequestParser,
    chunk,
    response_head,
)
from fourfold.targets.sim.plan import Plan
from fourfold.targets.sim.wire import Encoder, ParsedRequest

SERVER_HEADER = ("server", "fourfold-sim")


class Generation:
    """One admitted request being "generated": writes its due tokens when the scheduler steps it."""

    __slots__ = ("conn", "app", "plan", "encoder", "stream", "head", "dues", "index", "done")
    # head: for a non-streaming answer, the whole response (head + body) sent at the last due time

    def __init__(self, conn: SimProtocol, plan: Plan, encoder: Encoder, stream: bool, t0_s: float,
                 head: bytes) -> None:
        self.conn = conn
        self.app = conn.app
        self.plan = plan
        self.encoder = encoder
        self.stream = stream
        self.head = head
        self.dues = [t0_s + offset_ms * 0.001 for offset_ms in plan.offsets_ms] or [t0_s]
        self.index = 0
        self.done = False

    @property
    def first_due_s(self) -> float:
        return self.dues[0]

    def step(self, now_s: float, horizon_s: float) -> float | None:
        if self.done:
            return None
        transport = self.conn.transport
        counters = self.app.counters
        tokens = self.plan.tokens
        dues = self.dues
        n_tokens = len(tokens)
        if not self.stream:
            counters.lag.record((now_s - dues[-1]) * 1000.0)
            self.index = n_tokens
            counters.generation_tokens_total += n_tokens
            transport.write(self.head)  # type: ignore[union-attr]
            self._finish(self.plan.finish_reason)
            return None
        start = self.index
        stop = bisect_right(dues, horizon_s, start, n_tokens)
        self.index = stop
        counters.lag.record_run(now_s, dues, start, stop)
        counters.generation_tokens_total += stop - start
        counters.kv_tokens += stop - start
        payload = self.encoder.tokens(start, tokens[start:stop]) if stop > start else b""
        if stop >= n_tokens:
            transport.write(chunk(payload + self.encoder.closing()) + LAST_CHUNK)  # type: ignore[union-attr]
            self._finish(self.plan.finish_reason)
            return None
        if payload:
            transport.write(chunk(payload))  # type: ignore[union-attr]
        return dues[stop]

    def _finish(self, reason: str) -> None:
        self.done = True
        sent = self.index if self.stream else 0
        self.app.finished(self.plan, sent, reason)
        self.conn.response_done()

    def abort(self) -> None:
        """The client went away: stop, and free the slot (the heap entry is skipped later)."""
        if not self.done:
            self.done = True
            self.app.finished(self.plan, self.index if self.stream else 0, "abort")


class SimProtocol(asyncio.Protocol):
    """One client connection."""

    def __init__(self, app: SimApp) -> None:
        self.app = app
        self.transport: asyncio.Transport | None = None
        self.parser = RequestParser()
        self.busy = False
        self.closed = False
        self.keep_alive = True
        self.job: Generation | None = None
        self._queued_start: Callable[[], None] | None = None
        self._idle_timer: asyncio.TimerHandle | None = None
        self._fault_timer: asyncio.TimerHandle | None = None   # a slow_headers fault's delay
        self._read_s = 0.0
        self._served = 0                 # requests read on this connection

    # --- asyncio callbacks -------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self._arm_idle_timer()

    def data_received(self, data: bytes) -> None:
        # Stamped now, handled later (SimApp.handle_soon: one request per loop iteration), so in a
        # burst every request is stamped when it was read, not after the handling (~0.1-0.3 ms
        # each) of all those that came before it.
        self._read_s = self.app.loop.time()     # a request's arrival: when its last bytes were read
        self._cancel_idle_timer()
        self.parser.feed(data)
        self.app.handle_soon(self._process_read)

    def _process_read(self) -> None:
        self._process(self._read_s)

    def eof_received(self) -> bool | None:
        """The client half-closed: finish the response in progress (if any), then close."""
        self.keep_alive = False
        return True if self.busy else None

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._cancel_idle_timer()
        if self._fault_timer is not None:
            self._fault_timer.cancel()
            self._fault_timer = None
        if self.job is not None:
            self.job.abort()
            self.job = None
        if self._queued_start is not None:
            self.app.gateway.withdraw(self._queued_start)
            self.app.counters.waiting = self.app.gateway.waiting
            self._queued_start = None

    # --- request handling --------------------------------------------------------------
    def _process(self, arrived_s: float | None = None) -> None:
        """Handle the buffered requests while the connection is free. ``arrived_s``: when the
        connection's latest bytes were read, i.e. when the first of them was complete (None: a
        pipelined request, whose time starts when the connection became free, i.e. now)."""
        while not self.busy and not self.closed:
            try:
                request = self.parser.next_request()
            except HttpParseError as exc:
                self.keep_alive = False
                self.busy = True
                self._send_reply(error_reply(exc.status, exc.message))
                return
            if request is None:
                if not self.busy:
                    self._arm_idle_timer()
                return
            self.busy = True
            self._served += 1
            self.keep_alive = request.keep_alive and self.app.config.gateway.keeps_alive(self._served)
            try:
                self._handle(request, arrived_s)
            except Exception as exc:  # a bug in the simulator must not kill the connection silently
                self.keep_alive = False
                self._send_reply(error_reply(500, f"simulator error: {type(exc).__name__}: {exc}"))
            arrived_s = None

    def _handle(self, request: IncomingRequest, arrived_s: float | None = None) -> None:
        routed = self.app.route(request)
        if isinstance(routed, Reply):
            if routed.delay_s > 0:     # embeddings, rerank: the whole reply once it is due
                self._send_later(routed, arrived_s if arrived_s is not None else self.app.loop.time())
            else:
                self._send_reply(routed)
            return
        wait_s = self.app.key_limit.take(api_key_of(request.headers), self.app.loop.time())
        if wait_s > 0:      # --key-rate-limit: this key's bucket is empty (never names the key)
            self.app.counters.rejected_total += 1
            self._send_reply(error_reply(429, "the simulated gateway's rate limit for this API key is spent",
                                         [("retry-after", str(max(1, math.ceil(wait_s))))]))
            return
        forced = request.headers.get(_faults.FAULT_HEADER, "").strip()
        if forced and forced not in FAULT_KINDS:
            self._send_reply(error_reply(400, f"unknown fault {forced!r} in {_faults.FAULT_HEADER}; "
                                              f"valid: {', '.join(FAULT_KINDS)}"))
            return
        fault = self.app.choose_fault(routed, forced)
        if fault in _faults.HEAD_FAULTS:
            self._send_reply(Reply(*_faults.fault_reply(fault, self.app.faults.spec)), fault)
            return
        received_s = arrived_s if arrived_s is not None else self.app.loop.time()
        detail = request.headers.get(PLAN_DETAIL_HEADER, "").strip() in ("1", "true", "yes")
        if fault == "slow_headers":    # no status line until the delay has passed

            def admit_late() -> None:
                self._fault_timer = None
                if not self.closed:
                    self._admit(routed, received_s, detail, fault, anchored=False)

            self._fault_timer = self.app.loop.call_later(self.app.faults.spec.slow_headers_s, admit_late)
            return
        self._admit(routed, received_s, detail, fault)

    def _admit(self, routed: ParsedRequest, received_s: float, detail: bool, fault: str,
               anchored: bool = True) -> None:
        """Start the generation now, or when the simulated gateway lets it in. Started at once,
        its plan is anchored to the request's arrival (``received_s``): a real server's TTFT
        counts from then too, and the simulator's own handling time must not shift its ground
        truth. Started later (a gateway queue, a slow_headers fault), it counts from the start."""
        admitting = anchored

        def start() -> None:
            self._queued_start = None
            if not self.closed:
                self._start_generation(routed, received_s, detail, fault, received_s if admitting else None)
            else:
                self.app.gateway.release()

        self._queued_start = start
        status = self.app.gateway.admit(start)
        admitting = False
        self.app.counters.waiting = self.app.gateway.waiting
        if status is not None:
            self._queued_start = None
            self.app.counters.rejected_total += 1
            headers = [("retry-after", str(self.app.config.gateway.retry_after_s))] if status == 429 else []
            self._send_reply(error_reply(status, "the simulated gateway is at its concurrency limit",
                                         headers))

    def _start_generation(self, parsed: ParsedRequest, received_s: float, detail: bool, fault: str = "",
                          t0_s: float | None = None) -> None:
        app = self.app
        if t0_s is None:
            t0_s = app.loop.time()
        plan = app.plan(parsed)
        plan.queued_ms = (t0_s - received_s) * 1000.0
        if fault:
            _faults.shape_plan(plan, fault, app.faults.spec)
        request_id = app.request_id()
        assert parsed.make_encoder is not None
        encoder = parsed.make_encoder(plan, request_id)
        if fault:
            encoder = _faults.wrap_encoder(encoder, plan, fault, app.faults.spec)
        headers = [
            SERVER_HEADER,
            ("content-type", encoder.content_type if parsed.stream else "application/json"),
            ("x-request-id", request_id),
            (PLAN_HEADER, app.plan_header(plan, request_id, detail, t0_s)),
        ]
        if parsed.stream:
            headers.append(("cache-control", "no-cache"))
            head = response_head(200, headers, keep_alive=self.keep_alive)
            self.transport.write(head + chunk(encoder.prelude()))  # type: ignore[union-attr]
            job = Generation(self, plan, encoder, True, t0_s, b"")
        else:
            body = encoder.body()
            head = response_head(200, headers, keep_alive=self.keep_alive, content_length=len(body))
            job = Generation(self, plan, encoder, False, t0_s, head + body)
        self.job = job
        app.scheduler.add(_faults.wrap_job(job, fault) if fault else job,
                          job.dues[-1] if not parsed.stream else job.first_due_s)

    def _send_later(self, reply: Reply, received_s: float) -> None:
        """Send ``reply`` ``reply.delay_s`` after ``received_s`` (a timer: the loop serves others meanwhile;
        the connection's loss cancels it)."""

        def send() -> None:
            self._fault_timer = None
            if not self.closed:
                self._send_reply(reply)

        self._fault_timer = self.app.loop.call_at(received_s + reply.delay_s, send)

    def _send_reply(self, reply: Reply, fault: str = "") -> None:
        headers = [SERVER_HEADER, ("content-type", reply.content_type), *self.app.plain_headers(fault),
                   *reply.headers]
        head = response_head(reply.status, headers, keep_alive=self.keep_alive,
                             content_length=len(reply.body))
        self.transport.write(head + reply.body)  # type: ignore[union-attr]
        self.response_done()

    def response_done(self) -> None:
        """The current response is complete: close, or serve the next pipelined request."""
        self.job = None
        self.busy = False
        if self.closed:
            return
        if not self.keep_alive:
            self.closed = True
            self.transport.close()  # type: ignore[union-attr]
            return
        if self.parser.buffered_bytes:
            self.app.loop.call_soon(self._process)
        else:
            self._arm_idle_timer()

    # --- idle keep-alive timeout ---------------------------------------------------------
    def _arm_idle_timer(self) -> None:
        timeout_s = self.app.config.gateway.keepalive_timeout_s
        if timeout_s > 0 and not self.closed and self._idle_timer is None:
            self._idle_timer = self.app.loop.call_later(timeout_s, self._idle_timeout)

    def _cancel_idle_timer(self) -> None:
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None

    def _idle_timeout(self) -> None:
        self._idle_timer = None
        if not self.busy and not self.closed:
            self.closed = True
            self.transport.close()  # type: ignore[union-attr]


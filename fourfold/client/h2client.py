"""HTTP/2 through httpx's own transport, with the same connection facts as RawH1Transport.

How httpx gets to HTTP/2 (checked against hypercorn, httpx 0.29.0 / httpcore 1.0.9):

- ``https://``: ``http2=True`` offers h2 by ALPN; a server that does not take it gets HTTP/1.1.
- ``http://``: httpx never sends an ``Upgrade: h2c``; with ``http2=True`` alone it silently speaks
  HTTP/1.1. Only ``http1=False, http2=True`` gives HTTP/2, by *prior knowledge* (h2c: the client
  opens with the HTTP/2 preface). A server that only speaks HTTP/1.1 (fourfold's simulator) then
  fails the request, which is what a user who asked for HTTP/2 should see.

:class:`TracedTransport` wraps ``httpx.HTTPTransport`` and reads httpcore's ``trace`` request
extension: a request that emitted ``connection.connect_tcp.started``/``complete`` opened a new
connection (``reused=False``; ``connect_ms`` spans TCP connect plus TLS, ``tcp_ms`` and ``tls_ms``
each), any other reused one; the request body's last byte sent and the response head received give
its ``send_ms`` and ``wait_ms`` (:meth:`ConnFacts.phases`).
When the pool held an idle connection to the same origin before the request and the request
still had to connect, httpcore had found that connection closed by the server (an idle timeout
or GOAWAY): that is a reconnect (``reconnected=True``), as in RawH1Transport. The facts go into
``response.extensions["fourfold"]`` as :class:`~fourfold.client.transport.ConnFacts`.
"""

from __future__ import annotations

import ssl
import time
from typing import Any

import httpcore
import httpx

from fourfold.adapters.httpx import connection_pool
from fourfold.client.transport import ConnFacts

_DEFAULT_PORTS = {b"http": 80, b"https": 443}


class _Trace:
    """httpcore trace callback: the times of one request's events (``perf_counter_ns``) by name,
    without the protocol prefix (``http2.send_request_body.complete`` -> ``send_request_body.complete``)."""

    __slots__ = ("at", "chained")

    def __init__(self, chained: Any = None) -> None:
        self.chained = chained
        self.at: dict[str, int] = {}

    def __call__(self, name: str, info: dict[str, Any]) -> None:
        self.at[name.split(".", 1)[1] if name.startswith(("http11.", "http2.")) else name] = \
            time.perf_counter_ns()
        if self.chained is not None:
            self.chained(name, info)

    def span_ms(self, start: str, end: str) -> float | None:
        if start not in self.at or end not in self.at:
            return None
        return (self.at[end] - self.at[start]) / 1e6

    @property
    def connected(self) -> bool:
        return "connection.connect_tcp.started" in self.at

    @property
    def connect_ms(self) -> float | None:
        end = ("connection.start_tls.complete" if "connection.start_tls.complete" in self.at
               else "connection.connect_tcp.complete")
        return self.span_ms("connection.connect_tcp.started", end)


def connection_facts(trace: _Trace, t_start_ns: int, http_version: str, had_idle: bool) -> ConnFacts:
    """The facts of one request from what its trace saw (pure). httpcore resolves the name inside its
    TCP connect: ``tcp_ms`` holds the lookup, ``dns_ms`` stays unknown."""
    return ConnFacts(reused=not trace.connected, connect_ms=trace.connect_ms, t_start_ns=t_start_ns,
                     http_version=http_version, reconnected=trace.connected and had_idle,
                     tcp_ms=trace.span_ms("connection.connect_tcp.started",
                                          "connection.connect_tcp.complete"),
                     tls_ms=trace.span_ms("connection.start_tls.started", "connection.start_tls.complete"),
                     t_sent_ns=trace.at.get("send_request_body.complete"),
                     t_head_ns=trace.at.get("receive_response_headers.complete"))


class TracedTransport(httpx.BaseTransport):
    """``httpx.HTTPTransport`` plus per-request :class:`ConnFacts` (see the module docstring)."""

    def __init__(self, inner: httpx.HTTPTransport) -> None:
        self._inner = inner
        self._pool = connection_pool(inner)     # httpcore's pool, made with the transport: looked up once

    def _has_idle_connection(self, url: httpx.URL) -> bool:
        pool = self._pool
        if pool is None:
            return False
        origin = httpcore.Origin(url.raw_scheme, url.raw_host,
                                 url.port or _DEFAULT_PORTS.get(url.raw_scheme, 80))
        try:
            return any(conn.can_handle_request(origin) and conn.is_idle() for conn in pool.connections)
        except Exception:  # noqa: BLE001 - httpcore internals changed: the fact is unknown, not fatal
            return False

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        t_start_ns = time.perf_counter_ns()
        trace = _Trace(request.extensions.get("trace"))
        request.extensions["trace"] = trace
        had_idle = self._has_idle_connection(request.url)
        response = self._inner.handle_request(request)
        version = response.extensions.get("http_version", b"HTTP/1.1")
        version_text = version.decode("ascii", "replace") if isinstance(version, bytes) else str(version)
        response.extensions["fourfold"] = connection_facts(trace, t_start_ns, version_text, had_idle)
        return response

    def close(self) -> None:
        self._inner.close()


def make_h2_client(base_url: str, *, verify: ssl.SSLContext, timeout: httpx.Timeout,
                   headers: dict[str, str], max_connections: int | None = None) -> httpx.Client:
    """An HTTP/2 client: ALPN over https, prior knowledge (h2c) over plain http."""
    prior_knowledge = base_url.lower().startswith("http://")
    # No cap on connections (a cap would queue requests inside httpx: hidden client queueing);
    # over h2 one connection carries every concurrent request anyway.
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=max_connections)
    inner = httpx.HTTPTransport(verify=verify, http1=not prior_knowledge, http2=True, limits=limits)
    return httpx.Client(base_url=base_url, transport=TracedTransport(inner), timeout=timeout, headers=headers)


__all__ = ["TracedTransport", "connection_facts", "make_h2_client"]

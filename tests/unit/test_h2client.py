"""HTTP/2 client: connection facts from httpcore's trace events; prior knowledge over plain http."""

from __future__ import annotations

import httpx

from fourfold.client.factory import make_http_client
from fourfold.client.h2client import TracedTransport, _Trace, connection_facts


class _FakeInner(httpx.BaseTransport):
    """Plays httpcore: emits the trace events of a new connection on the first request only."""

    def __init__(self) -> None:
        self.requests = 0
        self.seen_trace: list[str] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        trace = request.extensions["trace"]
        if self.requests == 0:
            trace("connection.connect_tcp.started", {})
            trace("connection.connect_tcp.complete", {})
        trace("http2.send_request_headers.started", {})
        self.requests += 1
        return httpx.Response(200, content=b"data: [DONE]\n\n", extensions={"http_version": b"HTTP/2"})


def test_traced_transport_tells_new_from_reused_connections():
    inner = _FakeInner()
    client = httpx.Client(transport=TracedTransport(inner),  # type: ignore[arg-type]
                          base_url="http://127.0.0.1:1")
    first = client.post("/v1/chat/completions", json={})
    second = client.post("/v1/chat/completions", json={})
    f1, f2 = first.extensions["fourfold"], second.extensions["fourfold"]
    assert (f1.reused, f2.reused) == (False, True)
    assert f1.connect_ms is not None and f1.connect_ms >= 0 and f2.connect_ms is None
    assert f1.http_version == "HTTP/2" and first.http_version == "HTTP/2"
    assert not f1.reconnected and not f2.reconnected       # no idle connection existed before
    assert f2.t_start_ns > f1.t_start_ns


def test_a_new_connection_while_an_idle_one_existed_is_a_reconnect():
    trace = _Trace()
    trace("connection.connect_tcp.started", {})
    trace("connection.connect_tcp.complete", {})
    assert connection_facts(trace, 0, "HTTP/2", had_idle=True).reconnected
    assert not connection_facts(_Trace(), 0, "HTTP/2", had_idle=True).reconnected   # reused it
    assert not connection_facts(trace, 0, "HTTP/2", had_idle=False).reconnected


def test_a_callers_own_trace_still_sees_every_event():
    seen: list[str] = []
    trace = _Trace(chained=lambda name, info: seen.append(name))
    trace("connection.connect_tcp.started", {})
    trace("http2.receive_response_body.started", {})
    assert seen == ["connection.connect_tcp.started", "http2.receive_response_body.started"]


def test_http2_over_plain_http_is_prior_knowledge_and_over_https_alpn():
    plain = make_http_client("http://127.0.0.1:1", http2=True)
    tls = make_http_client("https://127.0.0.1:1", http2=True)
    for client, http1 in ((plain, False), (tls, True)):
        transport = client._transport
        assert isinstance(transport, TracedTransport)
        pool = transport._inner._pool
        assert (pool._http1, pool._http2) == (http1, True)
        client.close()

"""stream.send skips httpx's client machinery for a client that adds nothing to a request
(``stream._direct_transport``): the bytes on the wire and the record stay what ``client.stream``
gives, and a cookie the server sets still rides on the next request."""

from __future__ import annotations

import socket
import threading

import httpx
import pytest

from fourfold.client import stream as stream_mod
from fourfold.client.dialects import RequestOptions, get_dialect
from fourfold.client.factory import make_http_client
from fourfold.measure.record import RequestRecord
from fourfold.workloads.items import Item

pytestmark = pytest.mark.integration
_BODY = (b'data: {"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}\n\n'
         b"data: [DONE]\n\n")


class Capture:
    """A keep-alive HTTP/1.1 server that records each request's bytes and answers with an SSE
    body (with ``Set-Cookie`` on the first answer when asked)."""

    def __init__(self, set_cookie: bool = False) -> None:
        self.requests: list[bytes] = []
        self.set_cookie = set_cookie
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}/base"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        buf = b""
        with conn:
            while True:
                while b"\r\n\r\n" not in buf:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buf += data
                head, _, rest = buf.partition(b"\r\n\r\n")
                length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                                  if line.lower().startswith(b"content-length")))
                while len(rest) < length:
                    rest += conn.recv(65536)
                self.requests.append(head + b"\r\n\r\n" + rest[:length])
                buf = rest[length:]
                cookie = (b"Set-Cookie: route=b2; Path=/\r\n" if self.set_cookie and len(self.requests) == 1
                          else b"")
                conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n" + cookie
                             + b"content-length: %d\r\n\r\n" % len(_BODY) + _BODY)


def _send(client: httpx.Client) -> RequestRecord:
    dialect = get_dialect("openai")
    item = Item(id="q", messages=({"role": "user", "content": "hi"},))
    request = dialect.build(item, RequestOptions(max_tokens=5))
    request.headers["x-fourfold-test"] = "1"
    return stream_mod.send(client, dialect, request, RequestRecord())


def test_the_direct_path_sends_what_httpx_sends(monkeypatch: pytest.MonkeyPatch) -> None:
    server = Capture()
    used = []
    original = stream_mod._Direct.__enter__

    def counted(self: stream_mod._Direct) -> httpx.Response:
        used.append(1)
        return original(self)

    monkeypatch.setattr(stream_mod._Direct, "__enter__", counted)
    with make_http_client(server.url, headers={"Authorization": "Bearer sk-test"}) as client:
        direct = _send(client)
        monkeypatch.setattr(stream_mod, "_direct_transport", lambda client: None)
        through_httpx = _send(client)
    assert used == [1]
    assert server.requests[0] == server.requests[1]          # the same bytes on the wire
    assert server.requests[0].startswith(b"POST /base/v1/chat/completions HTTP/1.1\r\n")
    assert (b"x-fourfold-test: 1" in server.requests[0].lower()
            and b"bearer sk-test" in server.requests[0].lower())
    for key in ("error_class", "text", "status", "content_chunks", "terminal", "finish_reason",
                "http_version"):
        assert getattr(direct, key) == getattr(through_httpx, key), key
    assert direct.text == "hi" and direct.error_class == "ok"
    assert through_httpx.conn_reused           # the direct path gave its connection back to the pool


def test_a_cookie_the_server_sets_rides_on_the_next_request() -> None:
    server = Capture(set_cookie=True)
    with make_http_client(server.url) as client:
        assert stream_mod._direct_transport(client) is not None
        _send(client)
        assert stream_mod._direct_transport(client) is None          # a stored cookie: httpx's path
        _send(client)
    assert b"cookie:" not in server.requests[0].lower()
    assert b"cookie: route=b2" in server.requests[1].lower()


def test_a_client_that_adds_to_requests_goes_through_httpx() -> None:
    with make_http_client("http://127.0.0.1:9") as client:
        assert stream_mod._direct_transport(client) is not None
        client.auth = ("user", "pass")
        assert stream_mod._direct_transport(client) is None
    with make_http_client("http://127.0.0.1:9") as client:
        client.event_hooks = {"request": [print], "response": []}
        assert stream_mod._direct_transport(client) is None
    assert stream_mod._direct_transport(client) is None                # closed
    with make_http_client("http://127.0.0.1:9", http2=True) as client:
        assert stream_mod._direct_transport(client) is None            # httpx's own transport

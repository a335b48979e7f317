"""Random bytes from a real socket through fourfold's whole client (RawH1Transport, chunked framing,
the dialect parsers): every response ends in a classified error, never an exception, never a
``client_error`` (a bug in fourfold) and never a wait past the read timeout.
"""

from __future__ import annotations

import socket
import threading
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fourfold.client.dialects import RequestOptions, get_dialect
from fourfold.client.stream import StreamLimits, send
from fourfold.levels.base import make_client
from fourfold.levels.options import Settings
from fourfold.measure.record import ERROR_CLASSES, RequestRecord
from fourfold.workloads.items import Item

pytestmark = pytest.mark.integration
ITEM = Item(id="q", messages=({"role": "user", "content": "hi"},))
READ_TIMEOUT_S = 0.5


class RandomServer:
    """Answers every request with ``self.payload`` (whatever bytes), then closes the connection."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.payload = b""
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                more = conn.recv(65536)
                if not more:
                    return
                data += more
            try:
                conn.sendall(self.payload)
            except OSError:
                pass

    def close(self) -> None:
        self.sock.close()


@pytest.fixture(scope="module")
def server():
    srv = RandomServer()
    yield srv
    srv.close()


HEADS = st.sampled_from([
    b"", b"HTTP/1.1 200 OK\r\n\r\n", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Length: 40\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n",
    b"HTTP/1.1 100 Continue\r\n\r\n", b"HTTP/1.1 429 Too Many\r\nContent-Length: 5\r\n\r\n",
    b"HTTP/1.1 abc\r\n\r\n", b"HTTP/2 200\r\n\r\n", b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n",
])
BODIES = st.lists(st.one_of(st.binary(max_size=60), st.sampled_from([
    b"data: [DONE]\n\n", b'data: {"choices":[{"delta":{"content":"x"}}]}\n\n', b"5\r\nhello\r\n",
    b"0\r\n\r\n", b"\xff\xfe\xfd", b"\r\n\r\n", b"ffffffff\r\n", b"HTTP/1.1 200 OK\r\n"])), max_size=8)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(head=HEADS, body=BODIES, dialect=st.sampled_from(["openai", "anthropic", "triton"]),
       stream=st.booleans())
def test_random_bytes_from_the_socket_are_classified(server: RandomServer, head: bytes, body: list[bytes],
                                                     dialect: str, stream: bool) -> None:
    server.payload = head + b"".join(body)
    client = make_client(Settings(read_timeout_s=READ_TIMEOUT_S, connect_timeout_s=2), server.url)
    d = get_dialect(dialect)
    t0 = time.monotonic()
    record = send(client, d, d.build(ITEM, RequestOptions(stream=stream)), RequestRecord(),
                  StreamLimits(max_response_bytes=4096, max_duration_s=2))
    client.close()
    assert record.error_class in ERROR_CLASSES and record.error_class != "client_error", record.error_detail
    assert time.monotonic() - t0 < 2 + READ_TIMEOUT_S     # the server closes: nothing waits for a timeout


@pytest.mark.parametrize(("payload", "error_class"), [
    (b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n", "malformed_stream"),      # not HTTP
    (b"HTTP/1.1 abc\r\n\r\n", "malformed_stream"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\nshort", "interrupted")])       # HTTP, cut short
def test_a_rejected_response_leaves_no_read_timeout_behind(server: RandomServer, payload: bytes,
                                                           error_class: str) -> None:
    """The read-timeout watchdog must stop with the request, or it throws ReadTimeout into whatever
    the user's greenlet does next (found by the fuzz test above: a bad Content-Length)."""
    import gevent

    server.payload = payload
    client = make_client(Settings(read_timeout_s=0.2), server.url)
    d = get_dialect("openai")
    record = send(client, d, d.build(ITEM, RequestOptions()), RequestRecord())
    client.close()
    assert record.error_class == error_class, record.error_detail
    gevent.sleep(0.6)          # a leaked watchdog would raise httpx.ReadTimeout right here

"""A small OpenAI-style streaming server over TLS with HTTP/1.1 keep-alive
(for tests/integration/test_tls.py).

    python tests/tls_sse_server.py CERT KEY   # prints "listening https://127.0.0.1:PORT", serves until killed
    python tests/tls_sse_server.py --plain HEAD_DELAY_MS   # plain HTTP, each response head that late

Every POST gets a short SSE chat completion (Content-Length framed, the connection kept open);
``GET /stats`` answers ``{"requests": N, "connections": M}`` (the POSTs answered and the TLS
connections accepted so far), so a test can hold the client's records against what the server saw.
"""

from __future__ import annotations

import json
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

COUNTS = {"requests": 0, "connections": 0}
HEAD_DELAY_S = [0.0]        # --plain: how long each POST waits before its response head
LOCK = threading.Lock()


def sse_body(tokens: int = 5) -> bytes:
    events = [{"choices": [{"index": 0, "delta": {"content": f"w{i} "}, "finish_reason": None}]}
              for i in range(tokens)]
    events.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                   "usage": {"prompt_tokens": 3, "completion_tokens": tokens}})
    return b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events) + b"data: [DONE]\n\n"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        with LOCK:
            COUNTS["connections"] += 1

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        with LOCK:
            COUNTS["requests"] += 1
        time.sleep(HEAD_DELAY_S[0])
        self._send(200, "text/event-stream", sse_body())

    def do_GET(self) -> None:  # noqa: N802
        with LOCK:
            body = json.dumps(COUNTS).encode()
        self._send(200, "application/json", body)

    def _send(self, status: int, content_type: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args: object) -> None:
        pass


def main(cert: str, key: str) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    print(f"listening https://127.0.0.1:{server.server_address[1]}", flush=True)
    server.serve_forever()


def main_plain(head_delay_ms: float) -> None:
    HEAD_DELAY_S[0] = head_delay_ms / 1000
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(f"listening http://127.0.0.1:{server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    if sys.argv[1] == "--plain":
        main_plain(float(sys.argv[2]))
    else:
        main(sys.argv[1], sys.argv[2])

"""A tiny threaded HTTP/1.1 server that misbehaves on purpose, in rotation.

Each request gets the next fault of ``FAULTS`` (or the one named by the ``x-fault`` header), so
a test knows exactly what the client met. Bound to 127.0.0.1; stop() ends it.
"""

from __future__ import annotations

import itertools
import json
import socketserver
import threading
import time

GOOD = [b'data: {"choices":[{"index":0,"delta":{"content":"Hello"}}]}\n\n',
        b'data: {"choices":[{"index":0,"delta":{"content":" world"},"finish_reason":"stop"}]}\n\n',
        b'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2}}\n\n',
        b"data: [DONE]\n\n"]
FAULTS = ("ok", "malformed_json", "drop_mid_stream", "http_500", "http_429", "no_done", "no_finish",
          "context_length")
# also on request (not in the default rotation): "echo_auth", a 401 whose body and a 200 stream
# whose text quote the request's credentials, as a careless gateway or a reflecting proxy would;
# and what real targets were seen to do (fourfold#20):
# "header_drip"     the status line, then one header line every 0.2 s, forever
# "ping_only"       200 and then ": ping" comments every 0.1 s, forever
# "ping_after_token"  one content token, then ": ping" comments every 0.1 s, forever
# "usage=VALUE"     the good stream with "completion_tokens": VALUE (JSON text: -5, 1e29, "12", ...)
# "redirect"        301 to another URL
# "unsolicited"     the good stream and, in the same write, a second response nobody asked for
# "unsolicited_late"  the same, the second response 50 ms later (the connection idle in the pool)


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


class _Handler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        sock = self.request
        buf = b""
        while True:
            while b"\r\n\r\n" not in buf:
                data = sock.recv(65536)
                if not data:
                    return
                buf += data
            head, _, buf = buf.partition(b"\r\n\r\n")
            headers = {k.strip().lower(): v.strip() for k, _, v in
                       (line.partition(b":") for line in head.split(b"\r\n")[1:])}
            length = int(headers.get(b"content-length", b"0"))
            while len(buf) < length:
                buf += sock.recv(65536)
            buf = buf[length:]
            fault = headers.get(b"x-fault", b"").decode() or self.server.next_fault()
            self.credentials = b" ".join(headers.get(k, b"")
                                         for k in (b"authorization", b"x-api-key")).decode()
            self.server.seen.append(fault)
            if not self.respond(sock, fault):
                return

    def respond(self, sock, fault: str) -> bool:  # noqa: ANN001
        if fault in ("header_drip", "ping_only", "ping_after_token"):
            return self.stuck(sock, fault)
        if fault == "redirect":
            sock.sendall(b"HTTP/1.1 301 Moved Permanently\r\nLocation: https://api.example.com/v1/chat/completions"
                         b"\r\nContent-Length: 0\r\n\r\n")
            return True
        if fault in ("unsolicited", "unsolicited_late"):
            body = b"".join(_chunk(e) for e in GOOD) + b"0\r\n\r\n"
            answer = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                      b"Transfer-Encoding: chunked\r\n\r\n" + body)
            if fault == "unsolicited":
                sock.sendall(answer + answer)
            else:                             # the second answer while the connection is idle
                sock.sendall(answer)
                time.sleep(0.05)
                sock.sendall(answer)
            return True
        if fault.startswith("usage="):
            events = [*GOOD[:2],
                      b'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":%s}}\n\n'
                      % fault[6:].encode(), GOOD[-1]]
            sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                         b"Transfer-Encoding: chunked\r\n\r\n"
                         + b"".join(_chunk(e) for e in events) + b"0\r\n\r\n")
            return True
        if fault == "echo_auth":
            if self.server.echo_count % 2 == 0:
                data = json.dumps({"error": {"message": f"invalid credentials: {self.credentials}"}}).encode()
                sock.sendall(b"HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\n"
                             b"Content-Length: %d\r\n\r\n%s" % (len(data), data))
            else:
                event = {"choices": [{"delta": {"content": f"you sent {self.credentials}"},
                                      "finish_reason": "stop"}]}
                sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                             b"Transfer-Encoding: chunked\r\n\r\n"
                             + _chunk(b"data: " + json.dumps(event).encode() + b"\n\n") + _chunk(GOOD[-1])
                             + b"0\r\n\r\n")
            self.server.echo_count += 1
            return True
        if fault in ("http_500", "http_429", "context_length"):
            status, body = {"http_500": (b"500 Internal Server Error", {"error": "boom"}),
                            "http_429": (b"429 Too Many Requests", {"error": "slow down"}),
                            "context_length": (b"400 Bad Request", {"error": {
                                "message": "This model's maximum context length is 4096 tokens",
                                "code": "context_length_exceeded"}})}[fault]
            data = json.dumps(body).encode()
            extra = b"Retry-After: 2\r\n" if fault == "http_429" else b""
            sock.sendall(b"HTTP/1.1 %s\r\nContent-Type: application/json\r\n%sContent-Length: %d\r\n\r\n%s"
                         % (status, extra, len(data), data))
            return True
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                     b"Transfer-Encoding: chunked\r\n\r\n")
        events = list(GOOD)
        if fault == "malformed_json":
            events.insert(1, b'data: {"choices":[{"delta":{"content": BROKEN\n\n')
        for i, event in enumerate(events):
            if fault == "drop_mid_stream" and i == 2:
                sock.close()
                return False
            if fault == "no_done" and event.startswith(b"data: [DONE]"):
                break
            if fault == "no_finish" and i == 1:      # the stream ends without a finish reason or [DONE]
                break
            sock.sendall(_chunk(event))
            time.sleep(0.002)
        sock.sendall(b"0\r\n\r\n")
        return True


    def stuck(self, sock, fault: str) -> bool:  # noqa: ANN001
        """Bytes keep coming, content never (or never again); until the client gives up."""
        try:
            if fault == "header_drip":
                sock.sendall(b"HTTP/1.1 200 OK\r\n")
                for i in itertools.count():
                    time.sleep(0.2)
                    sock.sendall(b"X-Drip-%d: %s\r\n" % (i, b"." * 20))
            sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                         b"Transfer-Encoding: chunked\r\n\r\n")
            if fault == "ping_after_token":
                sock.sendall(_chunk(GOOD[0]))
            while True:
                time.sleep(0.1)
                sock.sendall(_chunk(b": ping\n\n"))
        except OSError:
            return False


class FaultyServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, faults=FAULTS) -> None:  # noqa: ANN001
        super().__init__(("127.0.0.1", 0), _Handler)
        self._faults = itertools.cycle(faults)
        self._lock = threading.Lock()
        self.seen: list[str] = []
        self.echo_count = 0
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def next_fault(self) -> str:
        with self._lock:
            return next(self._faults)

    def stop(self) -> None:
        self.shutdown()
        self.server_close()

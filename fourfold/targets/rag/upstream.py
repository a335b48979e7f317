"""The RAG service's LLM client: streamed OpenAI chat completions over ``http.client``.

One keep-alive connection per server thread. :meth:`Upstream.stream_chat` always asks for a
stream (``stream: true`` with ``stream_options.include_usage``), so the service can time the
model's first token even when its own caller asked for one JSON body, and yields
:class:`Delta` / :class:`Usage` values as the lines arrive. Its own minimal SSE reading lives
here on purpose: the service must not share fourfold's client parsers (see ``targets/``).

Errors: :class:`UpstreamError` (HTTP status from the model server, or 502 when it cannot be
reached or its stream breaks).
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from fourfold.errors import UpstreamError

__all__ = ["Delta", "Upstream", "UpstreamError", "Usage"]


@dataclass(frozen=True)
class Delta:
    text: str


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int | None
    completion_tokens: int | None
    finish_reason: str = ""


class Upstream:
    """An OpenAI-compatible ``/v1/chat/completions`` endpoint (the simulator by default)."""

    def __init__(self, base_url: str, model: str = "fourfold-sim", timeout_s: float = 60.0,
                 api_key: str = "") -> None:
        parts = urlsplit(base_url if "://" in base_url else f"http://{base_url}")
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"--upstream {base_url!r}: expected http(s)://host[:port][/v1]")
        self.url = base_url
        self.https = parts.scheme == "https"
        self.host = parts.hostname
        self.port = parts.port or (443 if self.https else 80)
        base = parts.path.rstrip("/")
        self.path = f"{base}/chat/completions" if base.endswith("/v1") else f"{base}/v1/chat/completions"
        self.model = model
        self.timeout_s = timeout_s
        self.headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        if api_key:
            self.headers["Authorization"] = f"Bearer {api_key}"
        self._local = threading.local()

    def _connection(self, fresh: bool = False) -> http.client.HTTPConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None or fresh:
            if conn is not None:
                conn.close()
            cls = http.client.HTTPSConnection if self.https else http.client.HTTPConnection
            conn = cls(self.host, self.port, timeout=self.timeout_s)
            self._local.conn = conn
        return conn

    def _open(self, body: bytes) -> http.client.HTTPResponse:
        for attempt in (0, 1):
            conn = self._connection(fresh=attempt == 1)
            try:
                conn.request("POST", self.path, body=body, headers=self.headers)
                conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # type: ignore[union-attr]
                return conn.getresponse()
            except (http.client.RemoteDisconnected, ConnectionError, http.client.CannotSendRequest,
                    http.client.ResponseNotReady) as exc:
                if attempt == 1:          # a reused connection may have been closed idle: retry once
                    raise UpstreamError(502, f"upstream {self.url} unreachable: {exc}") from None
            except OSError as exc:
                self._local.conn = None
                raise UpstreamError(502, f"upstream {self.url} unreachable: {exc}") from None
        raise AssertionError("unreachable")

    def stream_chat(self, messages: list[dict[str, str]],
                    max_tokens: int | None = None) -> Iterator[Delta | Usage]:
        """Send the chat request; yield each text delta, then one Usage at the end of the stream."""
        payload: dict[str, Any] = {"model": self.model, "messages": messages, "stream": True,
                                   "stream_options": {"include_usage": True}}
        if max_tokens:
            payload["max_tokens"] = max_tokens
        response = self._open(json.dumps(payload).encode())
        if response.status != 200:
            text = response.read(4096).decode("utf-8", "replace")
            self._local.conn = None
            response.close()
            raise UpstreamError(response.status, f"upstream answered {response.status}: {text[:300]}")
        usage = Usage(None, None)
        finish = ""
        done = False
        try:
            for raw in response:
                line = raw.strip()
                if not line.startswith(b"data:"):
                    continue
                data = line[5:].strip()
                if data == b"[DONE]":
                    done = True
                    break
                try:
                    obj = json.loads(data)
                except ValueError:
                    continue
                if obj.get("error"):
                    raise UpstreamError(502, f"upstream error: {json.dumps(obj['error'])[:300]}")
                for choice in obj.get("choices") or ():
                    content = (choice.get("delta") or {}).get("content")
                    if content:
                        yield Delta(content)
                    finish = choice.get("finish_reason") or finish
                if isinstance(obj.get("usage"), dict):
                    u = obj["usage"]
                    usage = Usage(u.get("prompt_tokens"), u.get("completion_tokens"), finish)
        except (OSError, http.client.HTTPException) as exc:
            self._local.conn = None
            raise UpstreamError(502, f"upstream stream broke: {exc}") from None
        finally:
            if not done:
                self._local.conn = None     # the connection is in an unknown state: drop it
                response.close()
        if not done:
            raise UpstreamError(502, "upstream stream ended without [DONE]")
        response.read()                     # drain the chunked terminator so the connection is reusable
        yield Usage(usage.prompt_tokens, usage.completion_tokens, finish)

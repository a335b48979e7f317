"""A small ASGI app that streams OpenAI chat completions (SSE), for HTTP/2 tests under hypercorn.

fourfold's simulator speaks HTTP/1.1 only; hypercorn serves this app over HTTP/1.1 and HTTP/2 on
the same plain-http port (h2c by prior knowledge, which is what httpx does with
``http1=False, http2=True``)::

    python -m hypercorn --bind 127.0.0.1:PORT tests.h2_sse_app:app

Each answer: the first token after 20 ms, then one every 5 ms, ``min(max_tokens, 12)`` tokens,
usage and ``[DONE]``. With ``H2_APP_API_KEY`` set, a request without ``Authorization: Bearer
<key>`` or ``x-api-key: <key>`` gets a 401, so a test can tell the key was really sent.
"""

from __future__ import annotations

import asyncio
import json
import os

FIRST_TOKEN_S = 0.020
TOKEN_GAP_S = 0.005


async def _lifespan(receive, send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


async def _reply(send, status: int, body: dict) -> None:
    data = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(data)).encode())]})
    await send({"type": "http.response.body", "body": data})


def _authorised(headers: dict[bytes, bytes]) -> bool:
    key = os.environ.get("H2_APP_API_KEY", "")
    if not key:
        return True
    return (headers.get(b"authorization") == f"Bearer {key}".encode()
            or headers.get(b"x-api-key") == key.encode())


async def app(scope, receive, send) -> None:
    if scope["type"] == "lifespan":
        await _lifespan(receive, send)
        return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    if scope["path"] != "/v1/chat/completions" or scope["method"] != "POST":
        await _reply(send, 404, {"error": {"message": "no such route"}})
        return
    if not _authorised(dict(scope["headers"])):
        await _reply(send, 401, {"error": {"message": "missing or wrong API key", "type": "auth_error"}})
        return
    request = json.loads(body or b"{}")
    tokens = min(int(request.get("max_tokens") or 12), 12)
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]})
    await asyncio.sleep(FIRST_TOKEN_S)
    for i in range(tokens):
        delta = {"choices": [{"index": 0, "delta": {"content": f"word{i} "},
                              "finish_reason": "stop" if i == tokens - 1 else None}]}
        await send({"type": "http.response.body", "body": f"data: {json.dumps(delta)}\n\n".encode(),
                    "more_body": True})
        if i < tokens - 1:
            await asyncio.sleep(TOKEN_GAP_S)
    usage = {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": tokens}}
    await send({"type": "http.response.body",
                "body": f"data: {json.dumps(usage)}\n\ndata: [DONE]\n\n".encode(),
                "more_body": False})

"""Capture response bodies byte for byte from a running OpenAI-compatible server (tests/recorded/).

    python -m tests.real.capture http://127.0.0.1:8000 tests/recorded

writes the ``llamacpp_captured_*`` files: two streams (one that ends by ``stop``, one cut at
``max_tokens``: ``finish_reason: "length"``), each also asked with ``stream_options.include_usage``, and
the same two requests non-streaming (``.json``). The bytes are the HTTP body as it came off the socket,
chunked transfer-encoding removed and nothing else (httpx ``iter_raw``: no content decoding, no
re-serialising). tests/real/test_captured.py captures them again from the real server and checks
that the stored files still describe what it sends.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import httpx

STOP_PROMPT = "What is the capital of France?"
LENGTH_PROMPT = "Write a long story about a dragon who learns to bake bread."

# name -> (request body minus "model"; the server decides the rest)
REQUESTS: dict[str, dict[str, Any]] = {
    "llamacpp_captured_stop": {"messages": [{"role": "user", "content": STOP_PROMPT}], "max_tokens": 32,
                               "temperature": 0, "seed": 1, "stream": True},
    "llamacpp_captured_length": {"messages": [{"role": "user", "content": LENGTH_PROMPT}], "max_tokens": 12,
                                 "temperature": 0, "seed": 1, "stream": True,
                                 "stream_options": {"include_usage": True}},
}


def capture(base_url: str, body: dict[str, Any],
            timeout_s: float = 120.0) -> tuple[int, dict[str, str], bytes]:
    """POST ``body`` to ``/v1/chat/completions``: (status, headers, the body's raw bytes)."""
    with httpx.Client(timeout=timeout_s) as client, client.stream(
            "POST", base_url.rstrip("/") + "/v1/chat/completions", json=body) as response:
        raw = b"".join(response.iter_raw())
        return response.status_code, dict(response.headers), raw


def capture_all(base_url: str, model: str = "smollm2-135m") -> dict[str, bytes]:
    """Every file of REQUESTS, streaming (``.sse``) and non-streaming (``.json``): {file name: bytes}."""
    out: dict[str, bytes] = {}
    for name, body in REQUESTS.items():
        for suffix, stream in ((".sse", True), (".json", False)):
            request = {**body, "model": model, "stream": stream}
            if not stream:
                request.pop("stream_options", None)
            status, _, raw = capture(base_url, request)
            if status != 200:
                raise RuntimeError(f"{name}{suffix}: HTTP {status}: {raw[:300]!r}")
            out[name + suffix] = raw
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m tests.real.capture BASE_URL OUT_DIR", file=sys.stderr)
        return 2
    out_dir = Path(argv[1])
    for name, raw in capture_all(argv[0]).items():
        (out_dir / name).write_bytes(raw)
        print(f"{out_dir / name}: {len(raw)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

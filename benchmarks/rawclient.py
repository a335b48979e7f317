"""A minimal raw-socket streaming client: the floor any Python load generator can reach.

One thread, non-blocking sockets and ``selectors`` (epoll): each stream sends one request, and
every ``recv`` is timestamped the moment it returns. No HTTP library, no SSE parser in the loop.
After the run it finds the first and the content chunks by looking for ``"content"`` / text
deltas in the raw bytes. Used by benchmarks as the reference for timing error and CPU per token.

    python benchmarks/rawclient.py --url http://127.0.0.1:8000 --streams 64 --duration 10
"""

from __future__ import annotations

import argparse
import json
import re
import resource
import selectors
import socket
import time
from dataclasses import dataclass, field
from urllib.parse import urlsplit


@dataclass
class RawStream:
    sock: socket.socket
    fresh: bool = True           # first request on its connection (a warm-up: excluded from errors)
    t_send_ns: int = 0
    started_at: float = 0.0
    head: bytes = b""
    head_done: bool = False
    plan: dict = field(default_factory=dict)
    times_ns: list[int] = field(default_factory=list)
    chunks: list[bytes] = field(default_factory=list)


_CONTENT = re.compile(rb'"content":\s*"[^"]')


def _content_offsets(stream: RawStream) -> list[float]:
    """Offsets (ms) of the reads that carried a non-empty content delta (OpenAI chat SSE)."""
    return [(t - stream.t_send_ns) / 1e6 for t, data in zip(stream.times_ns, stream.chunks)
            if _CONTENT.search(data)]


def planned_offsets(plan: dict) -> list[float] | None:
    """Every token's planned send offset (ms): the plan's own list when it was asked for
    (``x-fourfold-plan-detail``), else rebuilt from ttft + i * itl, which is exact for a plan
    without jitter or pauses (the ``flat`` profile). Asking for the detail costs the simulator
    ~0.1 ms per request (a 200-number JSON header) and the client the same to read it, which at
    64 streams arriving together delays the last request's admission by several ms."""
    if plan.get("offsets_ms"):
        return plan["offsets_ms"]
    if plan.get("profile") != "flat" or plan.get("pauses") or "ttft_ms" not in plan:
        return None
    ttft, itl = plan["ttft_ms"], plan["itl_ms"]
    return [ttft + i * itl for i in range(plan.get("output_tokens", 0))]


def run(url: str, streams: int, duration_s: float, body: dict, plan_detail: bool = False) -> dict:
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    payload = json.dumps(body).encode()
    extra = b"x-fourfold-plan-detail: 1\r\n" if plan_detail else b""
    request = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
               b"%sContent-Length: %d\r\n\r\n" % (host.encode(), extra, len(payload))) + payload
    selector = selectors.DefaultSelector()
    finished: list[RawStream] = []
    deadline = time.monotonic() + duration_s

    def start(sock: socket.socket | None = None) -> None:
        fresh = sock is None
        if sock is None:
            sock = socket.create_connection((host, port))
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.setblocking(False)
        stream = RawStream(sock, fresh)
        stream.started_at = time.time()
        stream.t_send_ns = time.perf_counter_ns()
        sock.sendall(request)
        selector.register(sock, selectors.EVENT_READ, stream)

    for _ in range(streams):
        start()
    cpu0 = resource.getrusage(resource.RUSAGE_SELF)
    wall0 = time.monotonic()
    now = time.perf_counter_ns
    while selector.get_map():
        for key, _ in selector.select(timeout=1.0):
            stream = key.data
            data = stream.sock.recv(65536)
            t = now()
            if not stream.head_done:
                stream.head += data
                end = stream.head.find(b"\r\n\r\n")
                if end < 0:
                    continue
                stream.head_done = True
                for line in stream.head[:end].split(b"\r\n"):
                    if line.lower().startswith(b"x-fourfold-plan:"):
                        stream.plan = json.loads(line.split(b":", 1)[1])
                data = stream.head[end + 4:]
                if not data:
                    continue
            stream.times_ns.append(t)
            stream.chunks.append(data)
            if data.endswith(b"0\r\n\r\n") or not data:
                selector.unregister(stream.sock)
                finished.append(stream)
                if time.monotonic() < deadline:
                    start(stream.sock)
                else:
                    stream.sock.close()
    cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    wall = time.monotonic() - wall0
    return {"streams": finished, "cpu_s": (cpu1.ru_utime + cpu1.ru_stime) - (cpu0.ru_utime + cpu0.ru_stime),
            "sys_s": cpu1.ru_stime - cpu0.ru_stime, "wall_s": wall}


def errors(streams: list[RawStream]) -> tuple[list[float], list[float], int]:
    """TTFT errors (ms), absolute ITL errors (ms) and tokens, against each stream's plan."""
    ttft_err, itl_err, tokens = [], [], 0
    for stream in streams:
        tokens += sum(len(_CONTENT.findall(data)) for data in stream.chunks)
        offsets = _content_offsets(stream)
        planned = planned_offsets(stream.plan)
        if stream.fresh or not offsets or not planned:
            continue
        ttft_err.append(offsets[0] - planned[0])
        n = min(len(offsets), len(planned))
        for i in range(1, n):
            itl_err.append(abs((offsets[i] - offsets[i - 1]) - (planned[i] - planned[i - 1])))
    return ttft_err, itl_err, tokens


def first_token_lag(streams: list[RawStream]) -> list[float]:
    """Client receive time of the first token - the simulator's planned send time (ms), both on
    CLOCK_MONOTONIC (time.perf_counter_ns on Linux), so transit and admission are left out."""
    lags = []
    for stream in streams:
        offsets = _content_offsets(stream)
        planned = planned_offsets(stream.plan)
        t0 = stream.plan.get("t0_monotonic_s")
        if stream.fresh or not offsets or not planned or t0 is None:
            continue
        lags.append(stream.t_send_ns / 1e6 + offsets[0] - (t0 * 1000 + planned[0]))
    return lags


def admission_delays(streams: list[RawStream]) -> list[float]:
    """The simulator's admission time of each request - the client's send time (ms), both on
    CLOCK_MONOTONIC: the request's transit plus the simulator's read and admission delay."""
    return [(stream.plan["t0_monotonic_s"] * 1000 - stream.t_send_ns / 1e6) for stream in streams
            if not stream.fresh and stream.plan.get("t0_monotonic_s") is not None]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--streams", type=int, default=64)
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--max-tokens", type=int, default=200)
    args = parser.parse_args()
    body = {"model": "m", "stream": True, "max_tokens": args.max_tokens, "ignore_eos": True,
            "messages": [{"role": "user", "content": "Briefly explain quantum annealing."}]}
    result = run(args.url, args.streams, args.duration, body)
    ttft, itl, tokens = errors(result["streams"])
    ttft.sort()
    itl.sort()
    print(json.dumps({"requests": len(result["streams"]), "tokens": tokens,
                      "ttft_err_p50_ms": ttft[len(ttft) // 2] if ttft else None,
                      "ttft_err_p99_ms": ttft[int(len(ttft) * 0.99)] if ttft else None,
                      "itl_err_p50_ms": itl[len(itl) // 2] if itl else None,
                      "cpu_ms_per_1k_tokens": 1e6 * result["cpu_s"] / tokens if tokens else None,
                      "tokens_per_s": tokens / result["wall_s"]}))


if __name__ == "__main__":
    main()

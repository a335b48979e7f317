"""How many streamed tokens per second can the simulator pace on one core, and how accurately?

Starts ``python -m targets.sim --profile flat`` pinned to one core (``taskset``), opens N
raw-socket streams from this process pinned to another core, each asking for exactly
``--tokens`` tokens (``ignore_eos``) at ``--itl-ms``, and reports:

- achieved tokens/s (client-counted content events / wall time) against the planned rate;
- the simulator's CPU use (cores, from /proc) during the run;
- send lag p50/p99/max: how late the simulator wrote each token versus its plan (its own
  0.01 ms histogram, ``fourfold_sim_send_lag_*`` on /metrics);
- arrival lag p50/p99 as this client saw it (planned times from ``x-fourfold-plan``: its
  ``t0_monotonic_s`` - same host, same monotonic clock - plus ttft + i * itl), which adds the
  client's own delay.

    python benchmarks/sim_ceiling.py --streams 256 --itl-ms 1 --tokens 2000
    python benchmarks/sim_ceiling.py --streams 64 128 256 512 --itl-ms 1 --tokens 1000
"""

from __future__ import annotations

import argparse
import json
import os
import selectors
import shutil
import socket
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fourfold.targets.launch import start_simulator  # noqa: E402

TOKEN_MARK = b'{"content":'
DONE_MARK = b"data: [DONE]"


@dataclass
class Stream:
    sock: socket.socket
    head: bytearray = field(default_factory=bytearray)
    t0_s: float = 0.0
    offsets_ms: list[float] = field(default_factory=list)
    tokens: int = 0
    tail: bytes = b""
    done: bool = False
    lags_ms: list[float] = field(default_factory=list)
    first_token_s: float = 0.0
    last_token_s: float = 0.0


def request_bytes(port: int, n_tokens: int) -> bytes:
    body = json.dumps({"model": "sim", "stream": True, "ignore_eos": True, "max_tokens": n_tokens,
                       "messages": [{"role": "user", "content": "Why is the sky blue?"}]}).encode()
    return (f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            "Content-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body


def on_data(stream: Stream, data: bytes, now_s: float) -> None:
    if not stream.offsets_ms:
        stream.head += data
        end = stream.head.find(b"\r\n\r\n")
        if end < 0:
            return
        for line in bytes(stream.head[:end]).split(b"\r\n"):
            if line.lower().startswith(b"x-fourfold-plan:"):
                plan = json.loads(line.split(b":", 1)[1])
                ttft_ms, itl_ms = plan["ttft_ms"], plan["itl_ms"]   # flat profile: no jitter, no pauses
                stream.t0_s = plan["t0_monotonic_s"]
                stream.offsets_ms = [ttft_ms + i * itl_ms for i in range(plan["output_tokens"])]
        data = bytes(stream.head[end + 4:])
    scan = stream.tail + data
    new = scan.count(TOKEN_MARK)
    if new:
        t0_s, offsets = stream.t0_s, stream.offsets_ms
        for i in range(stream.tokens, min(stream.tokens + new, len(offsets))):
            stream.lags_ms.append((now_s - t0_s) * 1000.0 - offsets[i])
        if not stream.tokens:
            stream.first_token_s = now_s
        stream.tokens += new
        stream.last_token_s = now_s
    if DONE_MARK in scan:
        stream.done = True
    stream.tail = scan[-(len(DONE_MARK) - 1):]


def run_streams(port: int, n_streams: int, n_tokens: int, timeout_s: float) -> tuple[list[Stream], float]:
    selector = selectors.DefaultSelector()
    streams = []
    payload = request_bytes(port, n_tokens)
    started_s = time.monotonic()
    for _ in range(n_streams):
        sock = socket.create_connection(("127.0.0.1", port))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.sendall(payload)
        sock.setblocking(False)
        stream = Stream(sock)
        streams.append(stream)
        selector.register(sock, selectors.EVENT_READ, stream)
    open_streams = n_streams
    deadline_s = started_s + timeout_s
    while open_streams and time.monotonic() < deadline_s:
        for key, _ in selector.select(0.5):
            stream = key.data
            try:
                data = stream.sock.recv(262144)
            except BlockingIOError:
                continue
            now_s = time.monotonic()
            if data:
                on_data(stream, data, now_s)
            if not data or stream.done:
                selector.unregister(stream.sock)
                stream.sock.close()
                open_streams -= 1
    wall_s = time.monotonic() - started_s
    for stream in streams:
        if not stream.done:
            stream.sock.close()
    return streams, wall_s


def scrape(url: str) -> dict[str, float]:
    out = {}
    for line in urllib.request.urlopen(url + "/metrics", timeout=10).read().decode().splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def quantile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def measure(n_streams: int, args: argparse.Namespace) -> dict[str, float]:
    prefix = (["taskset", "-c", str(args.server_cpu)] if shutil.which("taskset") and args.server_cpu >= 0
              else [])
    extra = ["--itl-ms", str(args.itl_ms), "--ttft-ms", str(args.ttft_ms), "--max-batch", "1000000"]
    with start_simulator("flat", seed=0, extra_args=extra, prefix=prefix) as sim:
        cpu_before_s = cpu_s(sim.process.pid)
        streams, wall_s = run_streams(sim.port, n_streams, args.tokens, args.timeout_s)
        cpu_used_s = cpu_s(sim.process.pid) - cpu_before_s
        metrics = scrape(sim.url)
    tokens = sum(s.tokens for s in streams)
    flowing = [s for s in streams if s.tokens]
    window_s = (max(s.last_token_s for s in flowing) - min(s.first_token_s for s in flowing)
                if flowing else 1.0)
    planned_s = (args.ttft_ms + (args.tokens - 1) * args.itl_ms) / 1000.0
    lags = [lag for s in streams for lag in s.lags_ms]
    key = '{model_name="fourfold-sim",quantile="%s"}'
    return {
        "streams": n_streams,
        "itl_ms": args.itl_ms,
        "planned_tps": n_streams * 1000.0 / args.itl_ms,
        "achieved_tps": tokens / window_s,   # over the window in which tokens flowed
        "complete": sum(s.done for s in streams),
        "wall_s": wall_s,
        "planned_stream_s": planned_s,
        "server_cores": cpu_used_s / window_s,
        "send_lag_p50_ms": metrics["fourfold_sim_send_lag_quantile_seconds" + key % "0.5"] * 1000.0,
        "send_lag_p99_ms": metrics["fourfold_sim_send_lag_quantile_seconds" + key % "0.99"] * 1000.0,
        "send_lag_mean_ms": 1000.0 * metrics['fourfold_sim_send_lag_seconds_sum{model_name="fourfold-sim"}']
        / max(1.0, metrics['fourfold_sim_send_lag_seconds_count{model_name="fourfold-sim"}']),
        "arrival_lag_p50_ms": quantile(lags, 0.5),
        "arrival_lag_p99_ms": quantile(lags, 0.99),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, nargs="+", default=[256])
    parser.add_argument("--itl-ms", type=float, default=1.0)
    parser.add_argument("--ttft-ms", type=float, default=500.0,
                        help="first token after this "
                             "(long enough that every stream is admitted before tokens flow)")
    parser.add_argument("--tokens", type=int, default=2000)
    parser.add_argument("--server-cpu", type=int, default=1, help="core for the simulator (-1: no pinning)")
    parser.add_argument("--client-cpu", type=int, default=0, help="core for this client (-1: no pinning)")
    parser.add_argument("--timeout-s", type=float, default=120.0)
    parser.add_argument("--json", action="store_true", help="print one JSON object per run")
    args = parser.parse_args(argv)
    if args.client_cpu >= 0 and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {args.client_cpu})
    for n_streams in args.streams:
        result = measure(n_streams, args)
        if args.json:
            print(json.dumps(result))
            continue
        print(f"streams={result['streams']} itl={result['itl_ms']}ms  "
              f"planned {result['planned_tps']:,.0f} tok/s  "
              f"achieved {result['achieved_tps']:,.0f} tok/s  complete {result['complete']}/{n_streams}  "
              f"server {result['server_cores']:.2f} cores")
        print(f"  send lag (server)    p50 {result['send_lag_p50_ms']:.2f} ms  "
              f"p99 {result['send_lag_p99_ms']:.2f} ms  mean {result['send_lag_mean_ms']:.2f} ms")
        print(f"  arrival lag (client) p50 {result['arrival_lag_p50_ms']:.2f} ms  "
              f"p99 {result['arrival_lag_p99_ms']:.2f} ms  "
              f"wall {result['wall_s']:.2f} s vs planned {result['planned_stream_s']:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

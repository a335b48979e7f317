"""Drive vLLM's own streaming request function in a closed loop (run with the vLLM peer's Python).

The full ``vllm`` package needs CUDA torch, so ``benchmarks/peers.py`` installs it with
``--no-deps`` plus aiohttp, regex and tqdm, and this script loads only
``vllm/benchmarks/lib/endpoint_request_func.py`` from the installed files (it imports nothing from
vLLM) and calls its ``async_request_openai_chat_completions``: the code that times TTFT and ITL in
``vllm bench serve``. The loop around it is what ``vllm bench serve --max-concurrency N
--request-rate inf`` does, rebuilt without torch: one aiohttp session with the connector
``serve.py`` builds (limit = N, keep-alive), the GC heap frozen before the run
(``freeze_gc_heap``), and N tasks that each send the next request as soon as their last one ended,
until ``--duration`` seconds have passed. Each stream's first request is marked ``warmup``.

Writes one JSON object to ``--out``: ``{"requests": [{"stream", "warmup", "start_s", "ttft_s",
"itl_s", "output_tokens", "success", "error"}]}`` with ``start_s`` on the wall clock (time.time).

    python peer_vllm_driver.py --module .../endpoint_request_func.py --url http://127.0.0.1:8000 \\
        --streams 16 --duration 20 --max-tokens 200 --out /tmp/vllm.json
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib.util
import json
import time

PROMPT = "Briefly explain quantum annealing."


def load_request_module(path: str):
    spec = importlib.util.spec_from_file_location("vllm_endpoint_request_func", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def drive(module, url: str, streams: int, duration_s: float, max_tokens: int) -> list[dict]:
    import aiohttp

    request_input = module.RequestFuncInput(
        prompt=PROMPT, api_url=url.rstrip("/") + "/v1/chat/completions", prompt_len=0,
        output_len=max_tokens, model="m", ignore_eos=True,
        chat_messages=[{"role": "user", "content": PROMPT}])
    connector = aiohttp.TCPConnector(limit=streams, limit_per_host=streams, ttl_dns_cache=300,
                                     use_dns_cache=True, keepalive_timeout=60, enable_cleanup_closed=True,
                                     force_close=False, ssl=False)
    session = aiohttp.ClientSession(connector=connector, trust_env=True,
                                    timeout=aiohttp.ClientTimeout(total=6 * 60 * 60))
    wall_minus_perf = time.time() - time.perf_counter()
    deadline = time.perf_counter() + duration_s
    records: list[dict] = []

    async def stream_loop(index: int) -> None:
        first = True
        while time.perf_counter() < deadline:
            out = await module.async_request_openai_chat_completions(request_input, session)
            records.append({"stream": index, "warmup": first, "start_s": out.start_time + wall_minus_perf,
                            "ttft_s": out.ttft, "itl_s": out.itl, "output_tokens": out.output_tokens,
                            "success": out.success, "error": out.error[-300:]})
            first = False

    try:
        await asyncio.gather(*(stream_loop(i) for i in range(streams)))
    finally:
        await session.close()
    return records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--module", required=True,
                        help="path of vllm/benchmarks/lib/endpoint_request_func.py")
    parser.add_argument("--url", required=True)
    parser.add_argument("--streams", type=int, required=True)
    parser.add_argument("--duration", type=float, required=True)
    parser.add_argument("--max-tokens", type=int, default=200)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    module = load_request_module(args.module)
    gc.collect(0)
    gc.collect(1)
    gc.collect(2)
    gc.freeze()
    records = asyncio.run(drive(module, args.url, args.streams, args.duration, args.max_tokens))
    with open(args.out, "w") as out:
        json.dump({"requests": records}, out)


if __name__ == "__main__":
    main()

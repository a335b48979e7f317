"""Ingest scaling: tokens/s one and two fourfold worker processes take in, and memory per worker.

For each ``--processes N`` the simulator (profile ``flat``, ``--itl-ms``) starts, then
``locust -f locustfiles/l1_throughput.py --processes N`` (Locust forks N workers and a master;
the workers measure, the master merges and writes the run) with ``--users`` streams of
``--max-tokens`` tokens each. While it runs, psutil samples every process of the tree: the
resident set of each worker and the CPU each used in the steady window (the first
``--warm`` seconds and the last two are left out). From the run's records:

- tokens/s ingested in the window (content tokens whose receive time falls inside it);
- TTFT error p50/p99 against the simulator's plan (``x-fourfold-plan``), and the
  first-token lag (client receive time - planned send time, same host's CLOCK_MONOTONIC);
- the simulator's own CPU share, because on a 2-core machine the simulator competes with the
  workers for the same cores: when it is saturated, the workers cannot take in more.

    python benchmarks/scaling.py   # 1 and 2 workers (1, 2, 4, 8 on >= 12 cores)
    python benchmarks/scaling.py --processes 1 2 --users 256 --itl-ms 2 --duration 30
    python benchmarks/scaling.py --processes 1 2 4 8 --sim-cores 12-15 --locust-cores 0-11   # 16 cores

``--sim-cores`` / ``--locust-cores`` pin the simulator and the locust tree (``taskset -c``), so the
simulator has cores of its own (default on a machine with at least 12 cores: its last 4 for the
simulator, the rest for locust). The simulator is one single-threaded process: keep the offered
load (users / itl) inside what it can pace (~100k tokens/s on one core of this VM, see ingest.py's
128 x 1 ms point), or its lateness shows as every worker count's TTFT error.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.append(str(REPO / "benchmarks"))

from ingest import errors_from_records, pct  # noqa: E402

from fourfold.targets.launch import start_simulator  # noqa: E402


def sample_tree(root: psutil.Process, stop: threading.Event, samples: list[dict]) -> None:
    """Every 0.25 s: {pid: (cmdline role, rss bytes, cpu seconds)} for the locust process tree."""
    while not stop.is_set():
        snapshot = {}
        try:
            procs = [root, *root.children(recursive=True)]
        except psutil.Error:
            break
        for proc in procs:
            try:
                with proc.oneshot():
                    cpu = sum(proc.cpu_times()[:2])
                    snapshot[proc.pid] = (proc.memory_info().rss, cpu)
            except psutil.Error:
                continue
        samples.append({"t": time.time(), "procs": snapshot})
        stop.wait(0.25)


def taskset(cores: str | None) -> list[str]:
    return ["taskset", "-c", cores] if cores and shutil.which("taskset") else []


def default_cores() -> tuple[str | None, str | None]:
    """(simulator cores, locust cores): the last 4 cores for the simulator on >= 12 cores, else unpinned."""
    count = os.cpu_count() or 1
    return (f"{count - 4}-{count - 1}", f"0-{count - 5}") if count >= 12 else (None, None)


def run_point(processes: int, users: int, itl_ms: float, duration_s: float, warm_s: float,
              max_tokens: int, sim_cores: str | None = None, locust_cores: str | None = None) -> dict:
    sim = start_simulator("flat", seed=0, extra_args=["--itl-ms", f"{itl_ms:g}", "--max-batch", "1000000"],
                          prefix=taskset(sim_cores))
    sim_ps = psutil.Process(sim.process.pid)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            command = [*taskset(locust_cores), sys.executable, "-m", "locust",
                       "-f", str(REPO / "locustfiles" / "l1_throughput.py"),
                       "--headless", "--processes", str(processes), "-u", str(users), "-r", str(users),
                       "-t", f"{duration_s:g}s", "--host", sim.url, "--max-tokens", str(max_tokens),
                       "--ignore-eos", "--warmup-requests", "1", "--metrics-url", "off", "--no-record-text",
                       "--run-dir", tmp, "--label", "scaling", "--loglevel", "WARNING", "--only-summary"]
            proc = subprocess.Popen(command, cwd=tmp, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            samples: list[dict] = []
            stop = threading.Event()
            sampler = threading.Thread(target=sample_tree, args=(psutil.Process(proc.pid), stop, samples),
                                       daemon=True)
            sampler.start()
            time.sleep(warm_s)
            sim_a, wall_a = sum(sim_ps.cpu_times()[:2]), time.time()
            time.sleep(max(1.0, duration_s - warm_s - 2.0))
            sim_b, wall_b = sum(sim_ps.cpu_times()[:2]), time.time()
            proc.wait(timeout=duration_s + 120)
            stop.set()
            sampler.join(5)
            run_dir = next(p for p in Path(tmp).iterdir() if p.is_dir())
            found = errors_from_records(run_dir, (wall_a, wall_b))
    finally:
        sim.stop()
    window = wall_b - wall_a
    inside = [s for s in samples if wall_a <= s["t"] <= wall_b]
    first, last = (inside[0], inside[-1]) if len(inside) >= 2 else (samples[0], samples[-1])
    master_pid = proc.pid
    workers = {}
    for pid, (_, cpu_b) in last["procs"].items():
        if pid == master_pid or pid not in first["procs"]:
            continue
        rss_peak = max(s["procs"][pid][0] for s in samples if pid in s["procs"])
        workers[pid] = {"cpu_share": (cpu_b - first["procs"][pid][1]) / (last["t"] - first["t"]),
                        "rss_peak_mib": rss_peak / 2**20}
    master_rss = max((s["procs"][master_pid][0] for s in samples if master_pid in s["procs"]), default=0)
    return {
        "processes": processes, "users": users, "itl_ms": itl_ms,
        "tokens_per_s": found["tokens"] / window,
        "ttft_err_p50_ms": pct(found["ttft_err"], 0.50), "ttft_err_p99_ms": pct(found["ttft_err"], 0.99),
        "first_token_lag_p99_ms": pct(found["lag"], 0.99),
        "workers": list(workers.values()), "master_rss_mib": master_rss / 2**20,
        "sim_cpu_share": (sim_b - sim_a) / window,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sim_default, locust_default = default_cores()
    parser.add_argument("--processes", type=int, nargs="+",
                        default=[1, 2, 4, 8] if (os.cpu_count() or 1) >= 12 else [1, 2])
    parser.add_argument("--sim-cores", default=sim_default, help="taskset -c list for the simulator")
    parser.add_argument("--locust-cores", default=locust_default,
                        help="taskset -c list for master and workers")
    parser.add_argument("--users", type=int, default=256)
    parser.add_argument("--itl-ms", type=float, default=2.0)
    parser.add_argument("--max-tokens", type=int, default=500)
    parser.add_argument("--duration", type=float, default=30.0)
    parser.add_argument("--warm", type=float, default=8.0, help="seconds left out at the start")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = [run_point(n, args.users, args.itl_ms, args.duration, args.warm, args.max_tokens, args.sim_cores,
                      args.locust_cores) for n in args.processes]
    print(f"cores: {os.cpu_count()}; simulator on {args.sim_cores or 'any'}, "
          f"locust on {args.locust_cores or 'any'}")
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    base = rows[0]["tokens_per_s"] or 1.0
    print(f"{'workers':>7} {'users':>5} {'itl':>4} {'tok/s':>8} {'vs first':>8} "
          f"{'TTFT err p50':>12} {'p99':>7} "
          f"{'1st lag p99':>11} {'worker CPU':>10} {'worker RSS MiB':>14} {'master MiB':>10} {'sim CPU':>7}")
    for r in rows:
        cpu = "/".join(f"{w['cpu_share']:.2f}" for w in r["workers"])
        rss = "/".join(f"{w['rss_peak_mib']:.0f}" for w in r["workers"])
        p50, p99, lag = (f"{r[k]:.2f}" if r[k] is not None else "-"
                         for k in ("ttft_err_p50_ms", "ttft_err_p99_ms", "first_token_lag_p99_ms"))
        print(f"{r['processes']:>7} {r['users']:>5} {r['itl_ms']:>4g} {r['tokens_per_s']:>8.0f} "
              f"{r['tokens_per_s'] / base:>8.2f} {p50:>12} {p99:>7} {lag:>11} {cpu:>10} {rss:>14} "
              f"{r['master_rss_mib']:>10.0f} {r['sim_cpu_share']:>7.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Soak: a long headless L1 run at moderate load; does fourfold's memory or connection count grow?

Starts the simulator (profile ``baseline``) with every fault kind of ``targets.sim.faults`` at a
low total rate (``--fault-rate``, spread evenly; stalls and slow headers last past the read
timeout), runs ``locust -f locustfiles/l1_throughput.py --headless`` against it for
``--minutes`` with ``--users`` users, and samples once every ``--interval`` seconds:

- the locust process's RSS, open file descriptors and TCP connections (psutil);
- the simulator's RSS and TCP connections.

At the end it reports RSS growth (last sample − the first sample after one minute of warm-up,
and − the very first sample), the connections still open in the last sample, the records
written against the requests the simulator received (``fourfold_sim_received_total``), the
simulator's running generations after the client exited (0 means no generation leaked), and the
error classes of ``summary.json``.

    python benchmarks/soak.py                       # 10 minutes, 16 users, 2 % faults
    python benchmarks/soak.py --minutes 1 --json    # quick check, JSON out
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fourfold.targets.launch import start_simulator  # noqa: E402
from fourfold.targets.sim.fault_spec import FAULT_KINDS  # noqa: E402

MB = 1024 * 1024


def sample(proc: psutil.Process) -> dict[str, float]:
    """RSS (MB), open fds and established TCP connections of one process (and its children)."""
    try:
        procs = [proc, *proc.children(recursive=True)]
        rss = sum(p.memory_info().rss for p in procs) / MB
        fds = sum(p.num_fds() for p in procs)
        conns = sum(1 for p in procs for c in p.net_connections(kind="tcp")
                    if c.status == psutil.CONN_ESTABLISHED)
    except psutil.Error:
        return {}
    return {"rss_mb": round(rss, 1), "fds": fds, "conns": conns}


def scrape(url: str) -> dict[str, float]:
    """Prometheus text -> {"name{labels}": value} (enough for the simulator's counters)."""
    with urllib.request.urlopen(url + "/metrics", timeout=5) as response:
        text = response.read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            out[re.sub(r'model_name="[^"]*",?', "", name).replace("{}", "")] = float(value)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--users", type=int, default=16)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--fault-rate", type=float, default=0.02,
                        help="total share of faulted requests (0: none)")
    parser.add_argument("--read-timeout", type=float, default=5.0)
    parser.add_argument("--max-response-s", type=float, default=30.0)
    parser.add_argument("--interval", type=float, default=10.0, help="seconds between samples")
    parser.add_argument("--workdir", default="",
                        help="where the run directory goes (default: a new temp dir)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args()

    fault_args: list[str] = []
    if args.fault_rate > 0:
        each = args.fault_rate / len(FAULT_KINDS)
        fault_args = [a for kind in FAULT_KINDS for a in ("--fault", f"{kind}={each:.6f}")]
        fault_args += ["--fault", f"stall_s={args.read_timeout + 2}",
                       "--fault", f"slow_headers_s={args.read_timeout + 2}"]
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="fourfold-soak-"))
    workdir.mkdir(parents=True, exist_ok=True)
    duration_s = args.minutes * 60
    samples: list[dict[str, Any]] = []
    with start_simulator("baseline", seed=0, extra_args=fault_args) as sim:
        sim_proc = psutil.Process(sim.process.pid)
        command = [sys.executable, "-m", "locust", "-f", str(ROOT / "locustfiles" / "l1_throughput.py"),
                   "--headless", "-u", str(args.users), "-r", str(max(1, args.users // 4)),
                   "-t", f"{int(duration_s)}s", "--host", sim.url, "--max-tokens", str(args.max_tokens),
                   "--read-timeout", str(args.read_timeout), "--max-response-s", str(args.max_response_s),
                   "--metrics-url", "off", "--label", "soak", "--run-dir", str(workdir / "runs"),
                   "--only-summary", "--ignore-eos"]
        env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
        with open(workdir / "locust.log", "w") as log:
            locust = subprocess.Popen(command, cwd=workdir, env=env, stdout=log, stderr=subprocess.STDOUT)
            proc = psutil.Process(locust.pid)
            t0 = time.monotonic()
            while locust.poll() is None and not list((workdir / "runs").glob("*/records.jsonl")):
                time.sleep(0.2)      # sampling starts once the first record is written
            while locust.poll() is None:
                row = {"t_s": round(time.monotonic() - t0, 1), "locust": sample(proc),
                       "sim": sample(sim_proc)}
                if row["locust"]:
                    samples.append(row)
                deadline = time.monotonic() + args.interval
                while locust.poll() is None and time.monotonic() < deadline:
                    time.sleep(0.2)
            wall_s = time.monotonic() - t0
        time.sleep(1.0)
        metrics = scrape(sim.url)
        sim_after = sample(sim_proc)
    run_dirs = sorted((workdir / "runs").glob("*-soak*"))
    records = 0
    summary: dict[str, Any] = {}
    if run_dirs:
        with open(run_dirs[-1] / "records.jsonl", "rb") as fh:
            records = sum(1 for _ in fh)
        summary_path = run_dirs[-1] / "summary.json"
        if summary_path.exists():
            summary = json.loads(summary_path.read_text())["total"]
    warm = next((s for s in samples if s["t_s"] >= 60), samples[0] if samples else None)
    last = samples[-1] if samples else None
    result = {
        "minutes": args.minutes, "users": args.users, "max_tokens": args.max_tokens,
        "fault_rate": args.fault_rate,
        "exit_code": locust.returncode, "wall_s": round(wall_s, 1), "workdir": str(workdir),
        "rss_first_mb": samples[0]["locust"]["rss_mb"] if samples else None,
        "rss_warm_mb": warm["locust"]["rss_mb"] if warm else None,
        "rss_last_mb": last["locust"]["rss_mb"] if last else None,
        "rss_max_mb": max((s["locust"]["rss_mb"] for s in samples), default=None),
        "rss_growth_after_warmup_mb": (round(last["locust"]["rss_mb"] - warm["locust"]["rss_mb"], 1)
                                       if last and warm else None),
        "rss_growth_total_mb": (round(last["locust"]["rss_mb"] - samples[0]["locust"]["rss_mb"], 1)
                                if last else None),
        "locust_conns_last": last["locust"]["conns"] if last else None,
        "locust_fds_last": last["locust"]["fds"] if last else None,
        "sim_rss_first_mb": samples[0]["sim"].get("rss_mb") if samples else None,
        "sim_rss_last_mb": sim_after.get("rss_mb"),
        "sim_conns_after_exit": sim_after.get("conns"),
        "sim_running_after_exit": metrics.get("vllm:num_requests_running"),
        "sim_received": metrics.get("fourfold_sim_received_total"),
        "records": records,
        "requests": summary.get("requests"), "errors": summary.get("errors"),
        "output_tps": round(summary["output_tps"], 1) if summary.get("output_tps") else None,
        "faults": {k.split('"')[1]: int(v) for k, v in metrics.items()
                   if k.startswith("fourfold_sim_faults_total")},
        "samples": samples,
    }
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    print(f"{'t (s)':>6} {'locust RSS MB':>13} {'fds':>5} {'conns':>5} {'sim RSS MB':>10} {'sim conns':>9}")
    for s in samples:
        lo, si = s["locust"], s["sim"]
        print(f"{s['t_s']:>6.0f} {lo['rss_mb']:>13.1f} {lo['fds']:>5} {lo['conns']:>5} "
              f"{si.get('rss_mb', 0):>10.1f} {si.get('conns', 0):>9}")
    for key, value in result.items():
        if key != "samples":
            print(f"{key}: {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Does the L2 open-loop dispatcher realise the arrival process it was asked for?

Runs ``locust -f locustfiles/l2_open_loop.py`` headless against the embedded simulator (profile
``flat``, short answers, so the target never limits the rate) and compares, from the run
directory:

- the *schedule*: the pure generator's arrivals for the same seed over the same window
  (``levels.arrivals``), its rate and the CV of its gaps;
- what was *sent*: the records (one per request that reached the target);
  rate = (n - 1) / (last send - first send), CV of the gaps between consecutive send times;
- the client queue (intended arrival -> send, ``queue_ms``) and the dispatcher's own verdict.

A Poisson sample's rate over T seconds has a standard deviation of sqrt(rate / T) (0.82/s at
20/s over 30 s), so "achieved" is judged against the schedule, and the schedule against the
asked rate only within that noise.

    python benchmarks/l2_open_loop.py --rate 20 --duration 30
    python benchmarks/l2_open_loop.py --process gamma --burstiness 0.25 --rate 20 --duration 30
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from fourfold.levels.arrivals import ArrivalProcess, GapStats, arrival_offsets, dispatcher_seed, gaps_of  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=20.0)
    parser.add_argument("--duration", type=int, default=30)
    parser.add_argument("--process", default="poisson", choices=["constant", "poisson", "gamma"])
    parser.add_argument("--burstiness", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-tokens", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        command = [sys.executable, "-m", "locust", "-f", str(REPO / "locustfiles" / "l2_open_loop.py"),
                   "--headless", "-t", f"{args.duration}s", "--arrival-rate", str(args.rate),
                   "--arrival-process", args.process, "--burstiness", str(args.burstiness),
                   "--arrival-seed", str(args.seed), "--sim-profile", "flat", "--max-tokens",
                   str(args.max_tokens), "--ignore-eos", "--run-dir", tmp]
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        env.pop("LOCUST_HOST", None)
        proc = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            print((proc.stdout + proc.stderr)[-3000:], file=sys.stderr)
            return proc.returncode
        run = next(p for p in Path(tmp).iterdir() if p.is_dir())
        summary = json.loads((run / "summary.json").read_text())
        records = [json.loads(line) for line in (run / "records.jsonl").read_text().splitlines() if line]
    loop = summary["l2"]["open_loop"]
    process = ArrivalProcess(args.process, args.rate, args.burstiness)
    schedule = arrival_offsets(process, loop["window_s"], dispatcher_seed(args.seed, 0))
    scheduled = GapStats()
    scheduled.add_all(gaps_of([0.0, *schedule]))
    sends = sorted(r["started_at"] for r in records)
    sent = GapStats()
    sent.add_all(gaps_of(sends))
    queue = [r["queue_ms"] for r in records if not r["warmup"] and r["error_class"] != "cancelled"]
    queue.sort()
    out = {
        "asked": f"{process.describe()} for {args.duration} s (seed {args.seed})",
        "window_s": round(loop["window_s"], 2),
        "scheduled": {"arrivals": len(schedule), "rate_rps": round(len(schedule) / loop["window_s"], 3),
                      "gap_cv": round(scheduled.cv or 0, 3)},
        "dispatcher": {k: loop[k] for k in ("arrivals", "sent", "completed", "unstarted_at_stop", "dropped",
                                            "waited", "generator_kept_up", "target_kept_up")},
        "sent": {"records": len(records), "rate_rps": round((len(sends) - 1) / (sends[-1] - sends[0]), 3),
                 "gap_cv": round(sent.cv or 0, 3)},
        "queue_ms": {"p50": round(statistics.median(queue), 2),
                     "p99": round(queue[min(len(queue) - 1, int(0.99 * len(queue)))], 2),
                     "max": round(queue[-1], 2)},
        "ttft_ms_p50": round(summary["groups"][0]["ttft_ms"]["p50"], 1),
        "warnings": loop["warnings"],
    }
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

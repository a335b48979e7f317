"""The verdicts' calibration table: A/A false-positive rate and power on known effects, by runs a side.

    python -m benchmarks.calibration [--reps 200] [--runs 2,3,5] [--seed 1]

Every comparison is made by fourfold compare's own code (reports.compare + adjust) on simulated runs
(tests/calibration/simulate.py: a between-run CV of 3 %, request latencies with a 25 % spread coupled
by a queue, errors in bursts, similarities per item). Printed as the Markdown table of
docs/statistics.md:

- A/A: the same version on both sides; the share of comparisons where the gate (--fail-on-worse's
  family, Holm) decided any row better or worse, and where any row at all (BH) did.
- power: the candidate with a known effect; the share of comparisons whose gate found the effect's
  row worse (TTFT p50 for a TTFT effect, the paired similarity for a quality drop, ...).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fourfold.reports.compare import CompareSettings  # noqa: E402
from tests.calibration.simulate import NOISY, QUIET, Version, compare_versions, decided  # noqa: E402


def effects(v: Version) -> dict[str, tuple[Version, tuple[str, ...]]]:
    """The known effects, each with the rows that should find it worse."""
    return {
        "TTFT +10 %": (v.slower(1.10), ("ttft_p50", "ttft_p95")),
        "TTFT +15 %": (v.slower(1.15), ("ttft_p50", "ttft_p95")),
        "TTFT +25 %": (v.slower(1.25), ("ttft_p50", "ttft_p95")),
        "TPOT +5 %": (dataclasses.replace(v, tpot_ms=v.tpot_ms * 1.05), ("tpot_p50", "e2e_p50")),
        "TPOT +10 %": (dataclasses.replace(v, tpot_ms=v.tpot_ms * 1.10), ("tpot_p50", "e2e_p50")),
        "errors +3 points": (dataclasses.replace(v, error_rate=v.error_rate + 0.03), ("error_rate",)),
        "similarity -0.03": (dataclasses.replace(v, similarity=-0.03), ("similarity_mean",)),
    }


def false_positives(v: Version, runs: int, reps: int, rng: np.random.Generator,
                    settings: CompareSettings) -> tuple[float, float]:
    gate = table = 0
    for _ in range(reps):
        rows = compare_versions(v, v, runs, rng, settings)
        gate += bool(decided(rows))
        table += bool(decided(rows, gated_only=False))
    return gate / reps, table / reps


def power(baseline: Version, candidate: Version, metrics: tuple[str, ...], runs: int, reps: int,
          rng: np.random.Generator, settings: CompareSettings) -> float:
    hits = 0
    for _ in range(reps):
        rows = compare_versions(baseline, candidate, runs, rng, settings)
        hits += any(r.metric in metrics and r.verdict == "worse" for r in decided(rows))
    return hits / reps


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=200, help="comparisons per cell (default 200)")
    parser.add_argument("--runs", default="2,3,5", help="runs a side, comma-separated (default 2,3,5)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    runs = [int(r) for r in args.runs.split(",")]
    settings = CompareSettings(resamples=400)
    rng = np.random.default_rng(args.seed)
    started = time.monotonic()
    for name, version in (("noisy", NOISY), ("quiet", QUIET)):
        print(f"\n{name}: {version}\n")
        print("| runs a side | " + " | ".join(str(r) for r in runs) + " |")
        print("|---|" + "---:|" * len(runs))
        rates = [false_positives(version, r, args.reps, rng, settings) for r in runs]
        print("| A/A: gate decided (Holm, alpha 0.05) | " + " | ".join(f"{g:.3f}" for g, _ in rates) + " |")
        print("| A/A: any row decided (BH) | " + " | ".join(f"{t:.3f}" for _, t in rates) + " |")
        for effect, (candidate, metrics) in effects(version).items():
            shares = [power(version, candidate, metrics, r, max(20, args.reps // 4), rng, settings)
                      for r in runs]
            print(f"| power: {effect} ({', '.join(metrics)} worse) | "
                  + " | ".join(f"{p:.2f}" for p in shares) + " |")
    print(f"\n{args.reps} A/A comparisons and {max(20, args.reps // 4)} per effect in each cell; "
          f"{time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

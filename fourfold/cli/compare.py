"""``fourfold compare``: argument parsing and printing for :mod:`fourfold.reports` (``fourfold demo``
shares its settings options).

    fourfold compare runs/<baseline> runs/<candidate> [runs/<more> ...] --out reports-out
    fourfold compare --baseline runs/<a1> runs/<a2> --candidate runs/<b1> runs/<b2>   # runs as replicates
    fourfold compare runs/<ab run> [--variants A B]      # two variants of one run (L4 sticky A/B)
    fourfold compare runs/<sweep>                        # one sweep (--sweep run or sweep dir): its sweep.svg
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from fourfold.errors import GateFailed, UsageError
from fourfold.reports.capacity import read_sweep, sweep_plot, sweep_rates_text
from fourfold.reports.compare import DEFAULT_GATE, CompareSettings
from fourfold.reports.markdown import render_tables
from fourfold.reports.report import report_from_paths, report_from_sides, write_report
from fourfold.reports.verdict import parse_min_effects

DEFAULT_OUT = "reports-out"


def settings_arguments(cmd: argparse.ArgumentParser,
                       seed_help: str = "seed of the bootstrap (default 0)") -> None:
    cmd.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples (default 2000)")
    cmd.add_argument("--seed", type=int, default=0, help=seed_help)
    cmd.add_argument("--alpha", type=float, default=0.05,
                     help="significance level of the verdicts (default 0.05; the CI is 1 - alpha)")


def add_arguments(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument("runs", nargs="*", metavar="RUN_DIR",
                     help="baseline run directory, then one or more candidates (or one run with two "
                          "variants); for several runs a side use --baseline / --candidate")
    cmd.add_argument("--baseline", nargs="+", metavar="RUN_DIR", default=None,
                     help="the baseline's runs: several runs of one version are its replicates "
                          "(fourfold repeat)")
    cmd.add_argument("--candidate", nargs="+", action="append", metavar="RUN_DIR", default=None,
                     help="a candidate's runs (repeat the option for more candidates)")
    cmd.add_argument("--min-effect", action="append", default=[], metavar="KEY=VALUE",
                     help="the smallest change that matters for a row, family or pattern, e.g. ttft_p99=5%%, "
                          "latency=3ms, rate=1pp, similarity_mean=0.02 (defaults: docs/statistics.md)")
    cmd.add_argument("--gate", default=None, metavar="PATTERN,...",
                     help="the rows --fail-on-worse decides on (fnmatch patterns of row keys; default: "
                          "TTFT, E2E, ITL p95, TPOT, tokens/s, goodput, error and interruption rates, "
                          "similarity, completion, recall)")
    cmd.add_argument("--strict", action="store_true",
                     help="exit 2 when the sides sent different workloads (dataset, max tokens, users, "
                          "rate...)")
    cmd.add_argument("--out", default=DEFAULT_OUT,
                     help=f"where report.md/.html/.csv go (default {DEFAULT_OUT})")
    cmd.add_argument("--variants", nargs=2, metavar=("BASELINE", "CANDIDATE"), default=None,
                     help="compare two variants of one run (record.variant), baseline first")
    cmd.add_argument("--goodput-slo", default=None, metavar="METRIC=MS,...",
                     help="per-request SLO for goodput, e.g. 'ttft_ms=450,e2e_ms=1400' "
                          "(default: the runs' summary.json slo_ms)")
    cmd.add_argument("--stall-ms", type=float, default=None,
                     help="stall threshold (default: the run's, 150 ms)")
    cmd.add_argument("--no-html", action="store_true", help="write report.md and report.csv only")
    cmd.add_argument("--no-plots", action="store_true",
                     help="report.html without its plots (tables, notes and definitions only; faster)")
    cmd.add_argument("--no-cache", action="store_true",
                     help="read records.jsonl and scores.jsonl, ignoring and not writing the runs' "
                          "compare-cache.npz")
    cmd.add_argument("--fail-on-worse", action="store_true",
                     help="exit 3 when a gated row's verdict is worse (after Holm over the gated rows)")
    settings_arguments(cmd)


def compare_settings(args: argparse.Namespace) -> CompareSettings:
    """The comparison settings of ``fourfold compare`` and ``fourfold demo`` (--resamples, --seed, --alpha,
    --min-effect, --gate), checked."""

    if not 100 <= args.resamples <= 1_000_000:
        raise UsageError("--resamples must be within [100, 1000000]")
    if not 0 < args.alpha < 0.5:
        raise UsageError("--alpha must be within (0, 0.5)")
    gate = DEFAULT_GATE
    if getattr(args, "gate", None) is not None:
        gate = tuple(p.strip() for p in args.gate.split(",") if p.strip())
        if not gate:
            raise UsageError("--gate needs at least one row key or pattern, "
                             "e.g. 'ttft_p95,e2e_p95,error_rate'")
    return CompareSettings(resamples=args.resamples, seed=args.seed, confidence=1 - args.alpha,
                           alpha=args.alpha, min_effects=parse_min_effects(getattr(args, "min_effect", [])),
                           gate=gate)


def parse_slo(text: str | None) -> dict[str, float] | None:
    if not text:
        return None
    slo = {}
    for part in text.replace(";", ",").split(","):
        name, sep, value = part.partition("=")
        try:
            slo[name.strip()] = limit = float(value.strip().removesuffix("ms"))
        except ValueError:
            sep = ""
        if not sep or not 0 < limit < math.inf:
            raise UsageError(f"--goodput-slo {text!r}: expected METRIC=MS pairs with MS > 0, such as "
                             "'ttft_ms=450,e2e_ms=1400'")
    return slo


def check_out_dir(out: str | Path, option: str = "--out") -> Path:
    """``out`` as a directory to write into: a UsageError, before any run is read, when a file is
    where it or one of its parents should be."""
    path = Path(out)
    for place in (path, *path.parents):
        if place.exists():
            if not place.is_dir():
                what = "is a file" if place == path else f"is inside {place}, a file"
                raise UsageError(f"{option} {out} {what}; give a directory "
                                 "(report.md, .html and .csv go into it)")
            break
    return path


def _checked_stall_ms(value: float | None) -> float | None:
    if value is not None and not 0 < value < math.inf:
        raise UsageError(f"--stall-ms must be a number > 0, got {value}")
    return value


def run(args: argparse.Namespace, rest: list[str]) -> int:
    settings, slo_ms, stall_ms = (compare_settings(args), parse_slo(args.goodput_slo),
                                  _checked_stall_ms(args.stall_ms))
    check_out_dir(args.out)
    if args.baseline or args.candidate:
        if args.runs or args.variants:
            raise UsageError("give the runs either as paths (BASELINE CANDIDATE...) or with --baseline / "
                             "--candidate, not both")
        if not args.baseline or not args.candidate:
            raise UsageError("--baseline and --candidate go together: --baseline A1 A2 --candidate B1 B2")
        report = report_from_sides(args.baseline, args.candidate, settings=settings, slo_ms=slo_ms,
                                   stall_ms=stall_ms, cache=not args.no_cache)
    else:
        if not args.runs:
            raise UsageError("give a baseline and a candidate run directory, "
                             "or --baseline A1... --candidate B1...")
        if len(args.runs) == 1 and not args.variants:
            plotted = _one_sweep(args.runs[0], args.out)
            if plotted is not None:
                return plotted
        report = report_from_paths(args.runs, variants=args.variants, settings=settings, slo_ms=slo_ms,
                                   stall_ms=stall_ms, cache=not args.no_cache)
    for warning in report.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    if args.strict and report.workload_differences:
        raise UsageError("--strict: the sides sent different workloads: "
                         + "; ".join(f"{d.field} (baseline {d.baseline}, candidate {d.candidate})"
                                     for d in report.workload_differences))
    try:
        files = write_report(report, args.out, html=not args.no_html, plots=not args.no_plots)
    except OSError as exc:
        raise UsageError(f"--out {args.out}: cannot write the report ({exc.strerror or exc})") from None
    print(render_tables(report))
    for note in report.notes:
        print(f"note: {note}")
    print("✅ better · ❌ worse · 🟰 equivalent · ❔ inconclusive · ➖ no change · † gated; legend and "
          "metric definitions in report.md")
    print("wrote " + ", ".join(str(path) for path in files.values()))
    worse = [f"{r.group} {r.label}" for c in report.comparisons for r in c.rows
             if r.verdict == "worse" and r.gated]
    if args.fail_on_worse:
        if worse:
            raise GateFailed(f"{len(worse)} gated row(s) worse: " + "; ".join(worse))
        decided = any(r.gated and r.p_value is not None for c in report.comparisons for r in c.rows)
        print("gate: passed" if decided else
              "gate: passed without a verdict: no gated row could be decided (one run a side, or too few "
              "requests); run 2 or more a side (fourfold repeat)")
    return 0


def _one_sweep(path: str, out: str) -> int | None:
    """One sweep (a ``--sweep`` run or a ``fourfold sweep`` directory): its latency-vs-offered-rate
    plot as ``<out>/sweep.svg`` and its capacity line; None when ``path`` is not a sweep."""

    block = read_sweep(path)
    if block is None:
        return None
    try:
        Path(out).mkdir(parents=True, exist_ok=True)
        target = sweep_plot(block, Path(out) / "sweep.svg",
                            title=f"{Path(path).name}: {block.get('slo') or ''}")
    except OSError as exc:
        raise UsageError(f"--out {out}: cannot write sweep.svg ({exc.strerror or exc})") from None
    capacity, bracket = block.get("capacity_rps"), block.get("bracket_rps") or []
    found = ("no rate met the SLO" if capacity is None
             else f"capacity {capacity:.2f} requests/s, bracket {bracket}")
    print(f"{path}: one sweep ({block.get('slo') or 'no SLO'}): {found}; rates: {sweep_rates_text(block)}")
    print(f"wrote {target} (compare two sweeps for the capacity row)")
    return 0

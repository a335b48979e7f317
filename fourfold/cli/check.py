"""``fourfold check RUN_DIR [--slo SPEC|FILE] [--junit PATH]``: gate a finished run; exit 3 when an
SLO or a quality floor is missed."""

from __future__ import annotations

import argparse

from fourfold.gates.gate import check_run

__all__ = ["add_arguments", "run"]


def add_arguments(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument("run_dir", help="a finished run directory (runs/<UTC time>-<label>)")
    cmd.add_argument("--slo", default=None,
                     help="inline spec ('ttft_p95<=450ms,similarity_mean>=0.75') or an SLO file "
                          "(ci/slo.toml); default: the spec the run was gated with")
    cmd.add_argument("--junit", default=None, help="write the verdicts as JUnit XML to this path")


def run(args: argparse.Namespace, rest: list[str]) -> int:
    result = check_run(args.run_dir, args.slo, args.junit)
    print(result.text)
    if args.junit:
        print(f"fourfold: SLO verdicts as JUnit XML in {args.junit}")
    return result.exit_code

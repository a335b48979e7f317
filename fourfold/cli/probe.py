"""``fourfold probe feature|inflection|tokens``: argument parsing and printing for gates.probe.

With no ``--host``, each probe runs against two embedded simulators, ``baseline`` and
``candidate``, so the article's effects are visible from a fresh checkout.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import sys
from collections.abc import Iterator

from fourfold.errors import GateFailed, UsageError
from fourfold.gates import probe
from fourfold.levels.options import parse_headers
from fourfold.targets.launch import start_simulator


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="probe", metavar="PROBE", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--host", action="append", default=[],
                        help="target base URL (repeatable); default: simulators baseline + candidate")
    common.add_argument("--dialect", default="openai", help="openai, anthropic or triton")
    common.add_argument("--model", default="fourfold-sim")
    common.add_argument("--json", action="store_true", help="print JSON instead of a table")
    feature = sub.add_parser("feature", parents=[common], help="is a version/beta header accepted?")
    feature.add_argument("--header", required=True,
                         help="'Name: value', e.g. 'anthropic-beta: new-orchestrator'")
    inflection = sub.add_parser("inflection", parents=[common],
                                help="first-token delta of a structured vs a plain prompt")
    inflection.add_argument("-n", type=int, default=100, help="requests per prompt (default 100)")
    inflection.add_argument("--prompt-a", default=None)
    inflection.add_argument("--prompt-b", default=None)
    inflection.add_argument("--pause-ms", type=float, default=20.0)
    inflection.add_argument("--warmup", type=int, default=10, help="unmeasured requests first (default 10)")
    inflection.add_argument("--threshold-ms", type=float, default=3.0)
    inflection.add_argument("--gate", action="store_true",
                            help="exit 3 when a target's delta is not within the threshold")
    tokens = sub.add_parser("tokens", parents=[common], help="input/output token usage per target and prompt")
    tokens.add_argument("--prompt", action="append", default=[],
                        help="prompt (repeatable); default: the article's")


@contextlib.contextmanager
def _targets(hosts: list[str]) -> Iterator[list[str]]:
    if hosts:
        yield hosts
        return

    with start_simulator("baseline") as baseline, start_simulator("candidate") as candidate:
        print(f"no --host: simulators baseline at {baseline.url}, candidate at {candidate.url}",
              file=sys.stderr)
        yield [baseline.url, candidate.url]


def _check_numbers(args: argparse.Namespace) -> None:
    """The inflection probe's numbers, before any simulator starts (UsageError naming the option)."""
    if args.probe != "inflection":
        return
    for option, value, ok in (("-n", args.n, args.n >= 1), ("--warmup", args.warmup, args.warmup >= 0),
                              ("--pause-ms", args.pause_ms, 0 <= args.pause_ms < math.inf),
                              ("--threshold-ms", args.threshold_ms, 0 < args.threshold_ms < math.inf)):
        if not ok:
            rule = {"-n": ">= 1", "--warmup": ">= 0", "--pause-ms": ">= 0"}.get(option, "> 0")
            raise UsageError(f"{option} must be a number {rule}, got {value}")


def run(args: argparse.Namespace, rest: list[str]) -> int:
    _check_numbers(args)
    if args.probe == "feature":
        _header(args.header)
    with _targets(args.host) as urls:
        if args.probe == "feature":
            rows = probe.feature_probe(urls, _header(args.header), args.dialect, args.model)
            _print(args, [r.__dict__ for r in rows], ("target", "status", "verdict", "detail"))
            return 0
        if args.probe == "inflection":
            results = probe.inflection_probe(urls, n=args.n, prompt_a=args.prompt_a or probe.PROMPT_A,
                                             prompt_b=args.prompt_b or probe.PROMPT_B, pause_ms=args.pause_ms,
                                             threshold_ms=args.threshold_ms, dialect=args.dialect,
                                             warmup=args.warmup, model=args.model,
                                             progress=lambda line: print(line, file=sys.stderr))
            table = [{"target": r.target, "n": r.n, "ttft_a_ms": r.ttft_a_ms, "ttft_b_ms": r.ttft_b_ms,
                     "delta_b_minus_a_ms": r.delta.mean, "ci95_ms": f"[{r.delta.low}, {r.delta.high}]",
                     "within": f"±{r.threshold_ms:g} ms: {'yes' if r.within_threshold else 'no'}",
                      "failures": r.failures} for r in results]
            _print(args, table, tuple(table[0]) if table else ())
            if args.gate and not all(r.within_threshold for r in results):
                raise GateFailed("a target's first-token delta is not within the threshold")
            return 0
        rows_t = probe.token_probe(urls, args.prompt or [probe.TOKEN_PROMPT], args.dialect, args.model)
        _print(args, [r.__dict__ for r in rows_t],
               ("target", "prompt", "input_tokens", "output_tokens", "input_delta", "output_delta", "error"))
        return 0


def _header(text: str) -> tuple[str, str]:
    """``'Name: value'`` -> (name, value), by the rules of a run's ``--header`` (OptionError)."""

    return parse_headers([text])[0]


def _print(args: argparse.Namespace, rows: list[dict[str, object]], columns: tuple[str, ...]) -> None:
    if args.json:
        print(json.dumps(rows, indent=1, default=str))
        return
    widths = {c: max(len(c), *(len(str(r.get(c, ""))) for r in rows)) for c in columns}
    print("  ".join(c.ljust(widths[c]) for c in columns))
    for row in rows:
        print("  ".join(str(row.get(c, "")).ljust(widths[c]) for c in columns))

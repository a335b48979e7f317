"""The ``fourfold`` command line: parses arguments and calls the packages. No logic of its own.

    fourfold sim --profile candidate --port 8000     # the embedded LLM simulator, standalone
    fourfold run l1 [locust options...]              # = locust -f locustfiles/l1_throughput.py ...
    fourfold locustfile l3                           # the installed path: locust -f "$(fourfold locustfile l3)"
    fourfold score runs/<run> [--threads 1]          # semantic fingerprint of a finished run
    fourfold check runs/<run> --slo ci/slo.toml      # gate a finished run (exit 3: an SLO missed)
    fourfold compare runs/<baseline> runs/<candidate> --out reports-out   # comparison report
    fourfold repeat 3 --baseline-host A --candidate-host B -- locust -f ...  # 3 runs a side, A B B A A B
    fourfold demo [--quick]                          # baseline vs candidate on the simulator, end to end
    fourfold sweep --slo 'ttft_p95<=500ms'           # the highest request rate that meets the SLO
    fourfold dataset inspect data.json               # what fourfold reads in a dataset file (convert: to JSONL)

Every subcommand returns an exit code: 0 done, 1 an error, 2 a usage error (bad arguments, a
missing or damaged run directory, a malformed SLO spec), 3 a gate missed (an SLO, a quality floor,
a probe's threshold), 130 interrupted. Every :class:`~fourfold.errors.FourfoldError` carries its
own code and prints itself as one ``fourfold: error: ...`` line; the tree is re-exported here.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from fourfold.cli import dataset as dataset_cmd
from fourfold.cli import mirror as mirror_cmd
from fourfold.cli import probe as probe_cmd
from fourfold.cli import repeat as repeat_cmd
from fourfold.cli import report as report_cmd
from fourfold.cli import sweep as sweep_cmd
from fourfold.errors import (
    DatasetError,
    FaultError,
    FourfoldError,
    GateFailed,
    ModelUnavailable,
    OptionError,
    ProfileError,
    RagServiceStartError,
    RecordsFormatError,
    RunDirError,
    SchemaError,
    ScriptError,
    SimulatorStartError,
    SLOSpecError,
    SplitError,
    TargetStartError,
    UnknownDialect,
    UpstreamError,
    UsageError,
)
from fourfold.locustfiles import LOCUSTFILES, locustfile


def _cmd_sim(args: argparse.Namespace, rest: list[str]) -> int:
    from fourfold.targets.sim import main as sim_main

    return int(sim_main(rest) or 0)


def _cmd_run(args: argparse.Namespace, rest: list[str]) -> int:
    return subprocess.call([sys.executable, "-m", "locust", "-f", str(_locustfile(args.level)), *rest],
                           env=dict(os.environ))


def _locustfile(level: str) -> Path:
    path = locustfile(level)
    if path is None or not path.is_file():
        raise UsageError(f"unknown level {level!r}; available: {', '.join(LOCUSTFILES)}")
    return path


def _cmd_locustfile(args: argparse.Namespace, rest: list[str]) -> int:
    print(_locustfile(args.level))
    return 0


def _cmd_score(args: argparse.Namespace, rest: list[str]) -> int:
    from fourfold.fingerprint.runscore import format_quality, make_embedder, score_run

    if args.batch_size < 1 or (args.threads is not None and args.threads < 1):
        raise UsageError("--batch-size and --threads must be at least 1")
    if not 0.0 <= args.unk_threshold <= 1.0:
        raise UsageError(f"--unk-threshold must be a share in [0, 1], got {args.unk_threshold:g}")
    embedder = make_embedder(batch_size=args.batch_size, threads=args.threads, use_cache=not args.no_cache,
                             cache_dir=args.cache_dir, backend=args.embed_backend, model_path=args.embed_model)
    result = score_run(args.run_dir, embedder, dataset=args.dataset, chunk_size=args.batch_size,
                       unk_threshold=args.unk_threshold)
    print(format_quality(result))
    if not args.no_compare_cache:
        _leave_compare_cache(args.run_dir)
    return 0


def _leave_compare_cache(run_dir: str) -> None:
    """Read the scored run once more as ``fourfold compare`` does, which leaves its columnar copy
    (``compare-cache.npz``, see :mod:`fourfold.reports.cache`) next to the records: the first compare of a
    scored run is then as fast as a repeated one. A run that cannot be read or written that way
    only loses the cache; scoring has succeeded either way."""
    from fourfold.reports.cache import CACHE_FILE
    from fourfold.reports.load import load_run

    try:
        load_run(run_dir)
    except (RunDirError, OSError, ValueError) as exc:
        print(f"fourfold: no compare cache for {run_dir}: {exc}", file=sys.stderr)
        return
    if (Path(run_dir) / CACHE_FILE).exists():
        print(f"wrote {Path(run_dir) / CACHE_FILE} (fourfold compare reads it instead of records.jsonl)")


def _add_score_arguments(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument("run_dir", help="a run directory (runs/<UTC time>-<label>)")
    cmd.add_argument("--batch-size", type=int, default=32, help="texts per model batch (default 32)")
    cmd.add_argument("--threads", type=int, default=None,
                     help="torch threads (default: 1 on <=2 cores, else half the cores up to 4; "
                          "env FOURFOLD_EMBED_THREADS)")
    cmd.add_argument("--no-cache", action="store_true", help="do not read or write the embedding cache")
    cmd.add_argument("--cache-dir", default=None,
                     help="cache directory (default: $FOURFOLD_CACHE_DIR, else $XDG_CACHE_HOME/fourfold or "
                          "~/.cache/fourfold)")
    cmd.add_argument("--embed-backend", default=None, metavar="{auto,torch-fp32,torch-bf16}",
                     help="auto (default; env FOURFOLD_EMBED_BACKEND): torch-bf16 autocast where the CPU has "
                          "AMX-bf16, else torch-fp32")
    cmd.add_argument("--embed-model", default=None, metavar="PATH",
                     help="a local sentence-transformers model directory instead of the bundled all-MiniLM-L6-v2 "
                          "(its name and weights sha256 are recorded)")
    cmd.add_argument("--unk-threshold", type=float, default=0.2,
                     help="an answer with more than this share of [UNK] word pieces is low-confidence: its "
                          "similarity is left out of the means (default 0.2)")
    cmd.add_argument("--dataset", default=None, help="the run's dataset, when meta.json's path does not resolve")
    cmd.add_argument("--no-compare-cache", action="store_true",
                     help="do not leave compare-cache.npz (the columnar copy fourfold compare reads)")


def _cmd_probe(args: argparse.Namespace, rest: list[str]) -> int:
    return probe_cmd.run(args, rest)



def _cmd_check(args: argparse.Namespace, rest: list[str]) -> int:
    from fourfold.gates.gate import check_run

    result = check_run(args.run_dir, args.slo, args.junit)
    print(result.text)
    if args.junit:
        print(f"fourfold: SLO verdicts as JUnit XML in {args.junit}")
    return result.exit_code


def _add_check_arguments(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument("run_dir", help="a finished run directory (runs/<UTC time>-<label>)")
    cmd.add_argument("--slo", default=None,
                     help="inline spec ('ttft_p95<=450ms,similarity_mean>=0.75') or an SLO file (ci/slo.toml); "
                          "default: the spec the run was gated with")
    cmd.add_argument("--junit", default=None, help="write the verdicts as JUnit XML to this path")


COMMANDS: dict[str, tuple[str, Callable[[argparse.Namespace, list[str]], int], bool]] = {
    # name: (help, handler, passes unknown arguments through)
    "sim": ("run the embedded LLM simulator (see `fourfold sim --help`)", _cmd_sim, True),
    "run": ("run a level's locustfile: fourfold run l1 --headless -u 32 -t 20s", _cmd_run, True),
    "locustfile": ("print the installed path of a level's locustfile: locust -f \"$(fourfold locustfile l3)\"",
                   _cmd_locustfile, False),
    "score": ("score a finished run's answers: similarity, structure, punctuation", _cmd_score, False),
    "check": ("gate a finished run: SLOs and quality floors, exit 3 when one is missed", _cmd_check, False),
    "probe": ("verification probes: feature flag, first-token inflection, token usage", _cmd_probe, False),
    "mirror": ("paired comparison of a run's mirrored requests (--mirror-host)", mirror_cmd.run, False),
    "compare": ("compare a baseline run with candidates: Markdown, HTML and CSV report", report_cmd.run_compare,
                False),
    "demo": ("baseline vs candidate on the simulator: run, score, compare", report_cmd.run_demo, False),
    "repeat": ("run a locust command N times per side (baseline and candidate interleaved A B B A): runs for compare",
               repeat_cmd.run, True),
    "sweep": ("find the highest request rate that meets an SLO: probe, then a searched open-loop rate per run",
              sweep_cmd.run, True),
    "dataset": ("inspect a dataset file (format, items, lengths) or convert it to fourfold JSONL",
                dataset_cmd.run, False),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fourfold", description="Load tests for LLM services, "
                                     "with every speed gain checked against answer quality.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (help_text, _, _) in COMMANDS.items():
        cmd = sub.add_parser(name, help=help_text, add_help=name not in ("sim",))
        if name in ("run", "locustfile"):
            cmd.add_argument("level", help=", ".join(LOCUSTFILES))
        elif name == "score":
            _add_score_arguments(cmd)
        elif name == "check":
            _add_check_arguments(cmd)
        elif name == "probe":
            probe_cmd.add_arguments(cmd)
        elif name == "mirror":
            mirror_cmd.add_arguments(cmd)
        elif name == "compare":
            report_cmd.add_compare_arguments(cmd)
        elif name == "demo":
            report_cmd.add_demo_arguments(cmd)
        elif name == "dataset":
            dataset_cmd.add_arguments(cmd)
        elif name == "sweep":
            sweep_cmd.add_arguments(cmd)
        elif name == "repeat":
            repeat_cmd.add_arguments(cmd)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args, rest = parser.parse_known_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    _, handler, passthrough = COMMANDS[args.command]
    if rest and not passthrough:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    try:
        return handler(args, rest)
    except FourfoldError as exc:        # every error fourfold raises on purpose: one line, its exit code
        exc.show()
        return exc.exit_code
    except KeyboardInterrupt:
        return 130


__all__ = [
    "COMMANDS",
    "DatasetError",
    "FaultError",
    "FourfoldError",
    "GateFailed",
    "ModelUnavailable",
    "OptionError",
    "ProfileError",
    "RagServiceStartError",
    "RecordsFormatError",
    "RunDirError",
    "SLOSpecError",
    "SchemaError",
    "ScriptError",
    "SimulatorStartError",
    "SplitError",
    "TargetStartError",
    "UnknownDialect",
    "UpstreamError",
    "UsageError",
    "build_parser",
    "main",
]


if __name__ == "__main__":
    sys.exit(main())

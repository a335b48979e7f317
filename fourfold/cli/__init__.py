"""The ``fourfold`` command line: parses arguments and calls the packages. No logic of its own.

    fourfold sim --profile candidate --port 8000     # the embedded LLM simulator, standalone
    fourfold run l1 [locust options...]              # = locust -f locustfiles/l1_throughput.py ...
    fourfold locustfile l3         # the installed path: locust -f "$(fourfold locustfile l3)"
    fourfold score runs/<run> [--threads 1]          # semantic fingerprint of a finished run
    fourfold check runs/<run> --slo ci/slo.toml      # gate a finished run (exit 3: an SLO missed)
    fourfold compare runs/<baseline> runs/<candidate> --out reports-out   # comparison report
    fourfold repeat 3 --baseline-host A --candidate-host B -- locust -f ...  # 3 runs a side, A B B A A B
    fourfold demo [--quick]                          # baseline vs candidate on the simulator, end to end
    fourfold sweep --slo 'ttft_p95<=500ms'           # the highest request rate that meets the SLO
    fourfold dataset inspect data.json     # what fourfold reads in a dataset file (convert: to JSONL)
    fourfold history check runs/<run>      # a run against the last releases kept (add / list / show)

Every subcommand returns an exit code: 0 done, 1 an error, 2 a usage error (bad arguments, a
missing or damaged run directory, a malformed SLO spec), 3 a gate missed (an SLO, a quality floor,
a probe's threshold), 130 interrupted. Every :class:`~fourfold.errors.FourfoldError` carries its
own code and prints itself as one ``fourfold: error: ...`` line; the tree is re-exported here.

Each subcommand is a module of this package with ``add_arguments(cmd)`` and a handler (``run``).
Only the module of the subcommand given is imported (:func:`command_module`, named in
:data:`COMMANDS`), so ``fourfold --help`` or ``fourfold locustfile l3`` do not pay for pandas,
scipy and matplotlib, which ``compare`` needs; ``test_layers`` lists this as the one import made
while running.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from types import ModuleType

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


@dataclass(frozen=True)
class Command:
    """A subcommand: its one-line help, the module of this package that holds ``add_arguments`` and
    the handler, the handler's name, and whether unknown arguments go through to it."""

    help: str
    module: str
    handler: str = "run"
    passthrough: bool = False


COMMANDS: dict[str, Command] = {
    "sim": Command("run the embedded LLM simulator (see `fourfold sim --help`)", "sim", passthrough=True),
    "run": Command("run a level's locustfile: fourfold run l1 --headless -u 32 -t 20s", "locustfile",
                   "run_locust", passthrough=True),
    "locustfile": Command("print the installed path of a level's locustfile: "
                          "locust -f \"$(fourfold locustfile l3)\"", "locustfile"),
    "score": Command("score a finished run's answers: similarity, structure, punctuation", "score"),
    "check": Command("gate a finished run: SLOs and quality floors, exit 3 when one is missed", "check"),
    "probe": Command("verification probes: feature flag, first-token inflection, token usage", "probe"),
    "mirror": Command("paired comparison of a run's mirrored requests (--mirror-host)", "mirror"),
    "compare": Command("compare a baseline run with candidates: Markdown, HTML and CSV report", "compare"),
    "demo": Command("baseline vs candidate on the simulator: run, score, compare", "demo"),
    "repeat": Command("run a locust command N times per side (baseline and candidate interleaved "
                      "A B B A): runs for compare", "repeat", passthrough=True),
    "sweep": Command("find the highest request rate that meets an SLO: probe, then a searched "
                     "open-loop rate per run", "sweep", passthrough=True),
    "dataset": Command("inspect a dataset file (format, items, lengths) or convert it to fourfold JSONL",
                       "dataset"),
    "history": Command("runs kept release by release: add, list, show a metric's trend, check a run against "
                       "the last releases (exit 3 when worse)", "history"),
}


def command_module(name: str) -> ModuleType:
    """The module of subcommand ``name`` (imported now: see the module's docstring)."""
    return importlib.import_module(f"{__name__}.{COMMANDS[name].module}")


def build_parser(commands: Iterable[str] | None = None) -> argparse.ArgumentParser:
    """The ``fourfold`` parser; the arguments of ``commands`` only (default: every subcommand's)."""
    chosen = set(COMMANDS if commands is None else commands)
    parser = argparse.ArgumentParser(prog="fourfold", description="Load tests for LLM services, "
                                     "with every speed gain checked against answer quality.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, command in COMMANDS.items():
        if name not in chosen:
            sub.add_parser(name, help=command.help)
            continue
        module = command_module(name)
        cmd = sub.add_parser(name, help=command.help, add_help=getattr(module, "ADD_HELP", True))
        module.add_arguments(cmd)
    return parser


def _command_given(argv: Sequence[str]) -> str | None:
    """The subcommand ``argv`` names (its first word that is not an option), if it is one."""
    word = next((arg for arg in argv if not arg.startswith("-")), None)
    return word if word in COMMANDS else None


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    given = _command_given(argv)
    parser = build_parser([given] if given else [])
    args, rest = parser.parse_known_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    command = COMMANDS[args.command]
    if rest and not command.passthrough:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    handler: Callable[[argparse.Namespace, list[str]], int] = getattr(command_module(args.command),
                                                                      command.handler)
    try:
        return handler(args, rest)
    except FourfoldError as exc:        # every error fourfold raises on purpose: one line, its exit code
        exc.show()
        return exc.exit_code
    except KeyboardInterrupt:
        return 130


__all__ = [
    "COMMANDS",
    "Command",
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
    "command_module",
    "main",
]


if __name__ == "__main__":
    sys.exit(main())

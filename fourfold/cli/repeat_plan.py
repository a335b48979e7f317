"""``fourfold repeat``'s plan, pure: which run goes when, with which seed and arguments; what is printed.

No processes and no files here (:mod:`fourfold.cli.repeat` launches the runs and writes the manifest).

- **Order.** With two sides the runs are interleaved in ABBA pairs, ``A B  B A  A B  B A ...``
  (:func:`launch_order`). Interleaving at all puts a slow drift of the machine (a neighbour's job, a
  warming or throttling CPU) into both sides alike instead of into the side that ran second. Alternating
  which side opens each pair also cancels a *linear* drift: if a run at position ``t`` is slowed by
  ``d * t``, ``A B`` pairs give the candidate ``+d`` of drift in every pair, while ``A B`` then ``B A``
  give it ``+d`` and ``-d``: zero over every two pairs (an even N), ``d / N`` left over for an odd N.
- **Seeds** (:func:`seed_of`). Repetition ``r`` runs with ``--seed`` and ``--sim-seed`` ``seed_base + r - 1``
  (and ``--shuffle``): the repetitions of one side differ in request order and in the simulator's draws
  like independent runs, while the baseline and candidate of one pair share their seed (a matched pair).
- **Arguments** (:func:`run_arguments`): the command's own, then the side's (``--baseline-args``, so a
  side's option overrides one the command gives), then ``--host``, ``--run-dir``, ``--label``
  ``<label>-<side>-<r>``, the seeds. Options fourfold repeat sets itself may not be in the command.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fourfold.errors import UsageError
from fourfold.measure.console import counted
from fourfold.rundir.runlog import redact, redact_text, sanitize_label
from fourfold.rundir.secrets import REDACTED

MAX_REPEAT = 100
SINGLE, BASELINE, CANDIDATE = "runs", "baseline", "candidate"
USAGE_EXIT = 2                   # locust's and fourfold's exit status for bad arguments: no run after it
SET_BY_REPEAT = ("--run-dir", "--label", "--seed", "--sim-seed")
HOST_OPTIONS = ("--host", "-H")
EXAMPLE = "fourfold repeat 3 -- locust -f locustfiles/l1_throughput.py --headless -u 8 -r 8 -t 30s"
EXIT_MEANINGS = {0: "ok", 1: "failed requests or an error", 2: "usage error", 3: "an SLO missed",
                 130: "interrupted"}


@dataclass(frozen=True)
class RepeatSide:
    """One version under test: its host (``""``: the command's own target) and extra locust arguments."""

    name: str
    host: str = ""
    args: tuple[str, ...] = ()


@dataclass(frozen=True)
class PlannedRun:
    """One launch: its place in the order (1-based), side, repetition (1-based), seed and run label."""

    index: int
    side: str
    repetition: int
    seed: int
    label: str


@dataclass(frozen=True)
class RunOutcome:
    """What one launch left: its locust arguments (redacted when shown), exit status, run directory (None:
    none) and the lines of its records.jsonl."""

    run: PlannedRun
    args: tuple[str, ...]
    exit_code: int
    run_dir: str | None
    records: int | None
    started_at: str
    elapsed_s: float


def parse_count(text: str) -> int:
    """N of ``fourfold repeat N``: a whole number from 1 to :data:`MAX_REPEAT`."""
    try:
        count = int(text)
    except (TypeError, ValueError):
        raise UsageError(f"N must be a whole number of runs per side (1 to {MAX_REPEAT}), got {text!r}; "
                         f"e.g. {EXAMPLE}") from None
    if not 1 <= count <= MAX_REPEAT:
        raise UsageError(f"N must be from 1 to {MAX_REPEAT} runs per side, got {count}")
    return count


def command_after_dashes(rest: Sequence[str]) -> list[str]:
    """The command after ``--`` among the arguments ``fourfold repeat`` did not know; anything before a
    ``--`` is an unknown option of fourfold repeat's own."""
    rest = list(rest)
    if rest[:1] == ["--"]:
        return rest[1:]
    if "--" in rest:
        raise UsageError("unrecognized arguments before '--': "
                         f"{shlex.join(redact_args(rest[:rest.index('--')]))} (see fourfold repeat --help)")
    return rest


def locust_arguments(command: Sequence[str]) -> list[str]:
    """The arguments of the command after ``--`` (``locust ...`` or ``python -m locust ...``), without the
    program; a missing command, or one that is not locust, is a :class:`UsageError`."""
    if not command:
        raise UsageError(f"no command after '--': give the locust command to repeat, e.g. {EXAMPLE}")
    program = os.path.basename(command[0])
    if program in ("locust", "locust.exe"):
        return list(command[1:])
    if program.startswith("python") and list(command[1:3]) == ["-m", "locust"]:
        return list(command[3:])
    raise UsageError(f"the command to repeat must be locust (locust -f LOCUSTFILE ... or "
                     f"python -m locust ...), got {shlex.join(redact_args(command[:3]))}; e.g. {EXAMPLE}")


def split_args(option: str, text: str | None) -> tuple[str, ...]:
    """``--baseline-args "--sim-profile baseline"`` -> its arguments, split as a shell would."""
    try:
        return tuple(shlex.split(text or ""))
    except ValueError as exc:
        raise UsageError(f"{option} {text!r}: {exc} (quote it as one shell argument)") from None


def make_sides(baseline_host: str | None, candidate_host: str | None, baseline_args: str | None,
               candidate_args: str | None) -> tuple[RepeatSide, ...]:
    """No side option: one side (:data:`SINGLE`); else a baseline and a candidate, each given by at least
    one of its host and its arguments."""
    baseline = RepeatSide(BASELINE, baseline_host or "", split_args("--baseline-args", baseline_args))
    candidate = RepeatSide(CANDIDATE, candidate_host or "", split_args("--candidate-args", candidate_args))
    given = [side for side in (baseline, candidate) if side.host or side.args]
    if not given:
        return (RepeatSide(SINGLE),)
    if len(given) == 1:
        other = CANDIDATE if given[0].name == BASELINE else BASELINE
        raise UsageError(f"only the {given[0].name} side was given: give --{other}-host and/or "
                         f"--{other}-args too (or no side option for one side)")
    if bool(baseline.host) != bool(candidate.host):
        raise UsageError("give both --baseline-host and --candidate-host, or neither (then both sides use "
                         "the command's target)")
    return baseline, candidate


def find_option(args: Sequence[str], names: Sequence[str]) -> str | None:
    """The first of ``args`` that is one of the options ``names`` (``--x``, ``--x=v``, ``-Hv``), or None."""
    for arg in args:
        for name in names:
            if arg == name or arg.startswith(name + "=") or (len(name) == 2 and arg.startswith(name)):
                return name
    return None


def check_arguments(args: Sequence[str], sides: Sequence[RepeatSide]) -> None:
    """No option that fourfold repeat sets itself in the command or a side's arguments."""
    for where, given in (("the command", args), *((f"--{side.name}-args", side.args) for side in sides)):
        found = find_option(given, SET_BY_REPEAT)
        if found:
            raise UsageError(f"{found} in {where}: fourfold repeat sets --run-dir, --label, --seed and "
                             "--sim-seed of each run; give its own --out, --label and --seed-base instead")
        if any(side.host for side in sides) and find_option(given, HOST_OPTIONS):
            raise UsageError(f"--host in {where} and --baseline-host/--candidate-host: "
                             "give each side's host once")


def launch_order(count: int, sides: Sequence[str]) -> list[tuple[str, int]]:
    """(side, repetition) in launch order: one side 1..N; two sides in ABBA pairs (module docstring)."""
    if len(sides) == 1:
        return [(sides[0], r) for r in range(1, count + 1)]
    first, second = sides
    order: list[tuple[str, int]] = []
    for r in range(1, count + 1):
        pair = (first, second) if r % 2 else (second, first)
        order += [(pair[0], r), (pair[1], r)]
    return order


def seed_of(repetition: int, seed_base: int) -> int:
    """The ``--seed``/``--sim-seed`` of repetition ``repetition`` (1-based): both sides of a pair share it."""
    return seed_base + repetition - 1


def run_label(label: str, side: str, repetition: int) -> str:
    return sanitize_label(f"{label}-{repetition}" if side == SINGLE else f"{label}-{side}-{repetition}")


def plan_runs(count: int, sides: Sequence[RepeatSide], seed_base: int, label: str) -> list[PlannedRun]:
    return [PlannedRun(index, side, r, seed_of(r, seed_base), run_label(label, side, r))
            for index, (side, r) in enumerate(launch_order(count, [s.name for s in sides]), start=1)]


def run_arguments(args: Sequence[str], side: RepeatSide, run: PlannedRun, run_base: str,
                  shuffle: bool = True) -> list[str]:
    """The locust arguments of one run (module docstring)."""
    extra = ["--host", side.host] if side.host else []
    seeds = ["--seed", str(run.seed), "--sim-seed", str(run.seed)]
    order = ["--shuffle"] if shuffle and "--shuffle" not in (*args, *side.args) else []
    return [*args, *side.args, *extra, "--run-dir", run_base, "--label", run.label, *seeds, *order]


def redact_args(args: Sequence[str]) -> list[str]:
    """An argument list fit to print and keep: :func:`~fourfold.rundir.runlog.redact` (``--api-key X``,
    URL credentials, key-shaped words) and every ``--header`` value, which fourfold treats as a credential."""
    out = [str(arg) for arg in redact(list(args))]
    for i, arg in enumerate(out):
        if arg == "--header" and i + 1 < len(out):
            out[i + 1] = _hide_header_value(out[i + 1])
        elif arg.startswith("--header="):
            out[i] = "--header=" + _hide_header_value(arg.removeprefix("--header="))
    return out


def _hide_header_value(header: str) -> str:
    name, colon, value = header.partition(":")
    return f"{name}: {REDACTED}" if colon and value.strip() else header


def display(args: Sequence[str]) -> str:
    """A run's command line as a user would type it, redacted."""
    return shlex.join(["locust", *redact_args(args)])


def run_dirs(outcomes: Sequence[RunOutcome], side: str) -> list[str]:
    """The run directories one side produced, by repetition."""
    found = [o for o in outcomes if o.run.side == side and o.run_dir is not None]
    return [o.run_dir for o in sorted(found, key=lambda o: o.run.repetition) if o.run_dir is not None]


def compare_command(outcomes: Sequence[RunOutcome], sides: Sequence[str]) -> str | None:
    """``fourfold compare --baseline A1 A2 --candidate B1 B2``; one side: its runs as the baseline, the
    other version's as a placeholder. None when a side has no run directory."""
    dirs = [run_dirs(outcomes, side) for side in sides]
    if not all(dirs):
        return None
    candidate = shlex.join(dirs[1]) if len(dirs) == 2 else "<the other version's run directories>"
    return f"fourfold compare --baseline {shlex.join(dirs[0])} --candidate {candidate}"


def failed(outcomes: Sequence[RunOutcome]) -> list[RunOutcome]:
    """The runs that left no run directory."""
    return [o for o in outcomes if o.run_dir is None]


def format_summary(outcomes: Sequence[RunOutcome], sides: Sequence[str], planned: int, manifest_path: str,
                   stopped: str | None) -> list[str]:
    """The lines printed at the end: a row per run, the run directories per side, what to run next."""
    lines = [f"fourfold repeat: {len(outcomes)} of {counted(planned, 'run')}, "
             f"order {' '.join(o.run.side for o in outcomes)}"]
    lines.append(f"{'#':>3}  {'side':<9} {'rep':>3} {'seed':>5} {'exit':>4} {'records':>8}  run directory")
    for o in outcomes:
        records = "-" if o.records is None else str(o.records)
        lines.append(f"{o.run.index:>3}  {o.run.side:<9} {o.run.repetition:>3} {o.run.seed:>5} "
                     f"{o.exit_code:>4} {records:>8}  {o.run_dir or '(none)'}")
    codes = sorted({o.exit_code for o in outcomes} - {0})
    if codes:
        lines.append("exit: " + ", ".join(
            f"{c} {EXIT_MEANINGS.get(c, 'killed by a signal' if c < 0 else 'error')}" for c in codes))
    for side in sides:
        lines.append(f"{side}: {' '.join(run_dirs(outcomes, side)) or '(no run directory)'}")
    if stopped:
        lines.append(f"stopped: {stopped}")
    missing = failed(outcomes)
    if missing:
        lines.append(f"{counted(len(missing), 'run')} left no run directory: "
                     + ", ".join(f"#{o.run.index}" for o in missing))
    lines.append(f"manifest: {manifest_path}")
    command = compare_command(outcomes, sides)
    lines.append(f"next: {command}" if command else "next: no compare command (a side has no run directory)")
    return lines


def manifest(*, count: int, sides: Sequence[RepeatSide], command_args: Sequence[str], seed_base: int,
             shuffle: bool, out: str, outcomes: Sequence[RunOutcome], started_at: str, finished_at: str,
             elapsed_s: float, stopped: str | None, versions: dict[str, str]) -> dict[str, Any]:
    """repeat.json: what was asked, what ran and what each run left (commands redacted)."""
    names = [side.name for side in sides]
    return {
        "kind": "repeat",
        "repetitions": count,
        "order": [o.run.side for o in outcomes],
        "order_rule": ("one side" if len(sides) == 1
                       else "ABBA: baseline first in odd pairs, candidate first in even"),
        "seed_base": seed_base,
        "shuffle": shuffle,
        "out": out,
        "command": display(command_args),
        "sides": {side.name: {"host": redact_text(side.host), "args": redact_args(side.args),
                              "run_dirs": run_dirs(outcomes, side.name),
                              "seeds": [o.run.seed for o in outcomes if o.run.side == side.name]}
                  for side in sides},
        "runs": [{"index": o.run.index, "side": o.run.side, "repetition": o.run.repetition,
                  "seed": o.run.seed, "label": o.run.label, "command": display(o.args),
                  "exit_code": o.exit_code, "run_dir": o.run_dir, "records": o.records,
                  "started_at": o.started_at, "elapsed_s": o.elapsed_s} for o in outcomes],
        "failed": [o.run.index for o in failed(outcomes)],
        "stopped": stopped,
        "compare_command": compare_command(outcomes, names),
        "started_at": started_at,
        "finished_at": finished_at,
        "elapsed_s": elapsed_s,
        "versions": versions,
    }


__all__ = ["MAX_REPEAT", "PlannedRun", "RunOutcome", "RepeatSide", "check_arguments", "command_after_dashes",
           "compare_command", "display", "failed", "find_option", "format_summary", "launch_order",
           "locust_arguments", "make_sides", "manifest", "parse_count", "plan_runs", "redact_args",
           "run_arguments", "run_dirs", "seed_of", "split_args"]

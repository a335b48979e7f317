"""``fourfold repeat``: N runs of one locust command per side, for ``fourfold compare`` (docs/running.md).

    fourfold repeat 3 -- locust -f locustfiles/l1_throughput.py --headless -u 8 -r 8 -t 30s [--host URL]
    fourfold repeat 3 --baseline-host URL_A --candidate-host URL_B -- locust -f ... --headless ...
    fourfold repeat 3 --baseline-args "--sim-profile baseline" \
        --candidate-args "--sim-profile candidate" -- locust ...

Each run is a fresh ``python -m locust`` process writing its own run directory into ``--out``
(``runs/repeat-<UTC time>/`` by default); with two sides the runs go in ABBA pairs, each repetition with
its own seed (the plan, pure: :mod:`fourfold.cli.repeat_plan`). A run that ends with exit status 2 (bad
arguments) stops the repetition; any other status (1 failed requests, 3 an SLO missed) is recorded and
the next run goes on. At the end: ``repeat.json`` (the manifest), the run directories per side and the
``fourfold compare`` command to run next. Exit status: 0 when every run left a run directory, 1 when
one did not, 2 after a usage error, 130 when interrupted.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from fourfold.cli import repeat_plan as plan
from fourfold.errors import UsageError
from fourfold.rundir.runlog import RECORDS_FILE, check_run_base, write_json_atomic
from fourfold.rundir.runread import find_runs
from fourfold.targets import IMPORT_ROOT

MANIFEST = "repeat.json"
STOP_WAIT_S = 60.0          # after Ctrl-C: how long the run that got it may take to write its run directory


def add_arguments(cmd: argparse.ArgumentParser) -> None:
    cmd.usage = "fourfold repeat N [options] -- locust -f LOCUSTFILE --headless -t TIME [locust options]"
    cmd.description = ("Run a locust command N times in fresh processes, each into its own run directory "
                       "with its own --seed; with a baseline and a candidate, 2N runs in ABBA pairs "
                       "(A B B A ...), so a drift of the machine hits both sides alike. Prints the fourfold "
                       "compare command to run next.")
    cmd.add_argument("count", metavar="N", help=f"runs per side (1 to {plan.MAX_REPEAT})")
    cmd.add_argument("--baseline-host", default=None, metavar="URL",
                     help="the baseline's --host (then give --candidate-host)")
    cmd.add_argument("--candidate-host", default=None, metavar="URL", help="the candidate's --host")
    cmd.add_argument("--baseline-args", default=None, metavar="ARGS",
                     help="locust arguments of the baseline's runs, one quoted string: "
                          "--baseline-args \"--sim-profile baseline\" "
                          "(a lone option: --baseline-args=--http2)")
    cmd.add_argument("--candidate-args", default=None, metavar="ARGS",
                     help="the candidate's locust arguments")
    cmd.add_argument("--out", default=None, metavar="DIR",
                     help="directory of the run directories and repeat.json (default runs/repeat-<UTC time>)")
    cmd.add_argument("--label", default="repeat",
                     help="runs are labelled <label>-<side>-<n> (default repeat)")
    cmd.add_argument("--seed-base", type=int, default=1, metavar="SEED",
                     help="repetition n runs with --seed and --sim-seed <seed-base>+n-1 (default 1)")
    cmd.add_argument("--no-shuffle", action="store_true",
                     help="do not add --shuffle (each user's item order is then the same in every run)")


def _out_dir(given: str | None) -> Path:
    if given:
        out = Path(given)
        if (out / MANIFEST).exists():
            raise UsageError(f"--out {out} already holds a {MANIFEST}: give another directory")
        return out
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    out, n = Path("runs") / f"repeat-{stamp}", 1
    while out.exists():
        n += 1
        out = Path("runs") / f"repeat-{stamp}-{n}"
    return out


def _child_env() -> dict[str, str]:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(IMPORT_ROOT), env.get("PYTHONPATH", "")) if p)
    return env


def _launch(args: list[str], env: dict[str, str]) -> tuple[int, bool]:
    """Run one locust to its end; (exit status, interrupted). Ctrl-C reaches the child too (one process
    group): it stops its users and writes its run directory, which is waited for."""
    sys.stdout.flush()
    sys.stderr.flush()
    proc = subprocess.Popen([sys.executable, "-m", "locust", *args], env=env)
    try:
        return proc.wait(), False
    except KeyboardInterrupt:
        try:
            return proc.wait(timeout=STOP_WAIT_S), True
        except (KeyboardInterrupt, subprocess.TimeoutExpired):
            proc.kill()
            return proc.wait(), True


def _count_lines(path: Path) -> int | None:
    try:
        with open(path, "rb") as fh:
            return sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 20), b""))
    except OSError:
        return None


def _versions() -> dict[str, str]:
    found = {"python": sys.version.split()[0]}
    for name in ("fourfold", "locust"):
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            pass
    return found


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def repeat(args: argparse.Namespace, rest: list[str], say: Callable[[str], None]) -> int:
    count = plan.parse_count(args.count)
    locust_args = plan.locust_arguments(plan.command_after_dashes(rest))
    sides = plan.make_sides(args.baseline_host, args.candidate_host, args.baseline_args, args.candidate_args)
    plan.check_arguments(locust_args, sides)
    out = _out_dir(args.out)
    check_run_base(out)
    if "--headless" not in locust_args and not os.environ.get("LOCUST_HEADLESS"):
        say("fourfold repeat: the command has no --headless: unless locust.conf sets it, each run waits for "
            "the web UI's Start")
    out.mkdir(parents=True, exist_ok=True)
    runs = plan.plan_runs(count, sides, args.seed_base, args.label)
    by_name = {side.name: side for side in sides}
    env, started, started_at = _child_env(), time.monotonic(), _now()
    outcomes: list[plan.RunOutcome] = []
    stopped, stop_exit = None, 0
    for run in runs:
        run_args = plan.run_arguments(locust_args, by_name[run.side], run, str(out),
                                      shuffle=not args.no_shuffle)
        say(f"fourfold repeat: run {run.index}/{len(runs)} ({run.side} {run.repetition}/{count}, "
            f"seed {run.seed}): {plan.display(run_args)}")
        before = set(find_runs(out))
        run_started, run_started_at = time.monotonic(), _now()
        exit_code, interrupted = _launch(run_args, env)
        new = sorted(set(find_runs(out)) - before)
        if len(new) > 1:
            say(f"fourfold repeat: run {run.index} wrote {len(new)} run directories; "
                f"keeping the last, {new[-1]}")
        outcomes.append(plan.RunOutcome(run, tuple(run_args), exit_code, str(new[-1]) if new else None,
                                        _count_lines(new[-1] / RECORDS_FILE) if new else None, run_started_at,
                                        round(time.monotonic() - run_started, 1)))
        if interrupted:
            stopped, stop_exit = f"interrupted during run {run.index}", 130
            break
        if exit_code == plan.USAGE_EXIT:
            stopped = (f"run {run.index} ended with a usage error (exit 2): fix the command; "
                       "no further run started")
            stop_exit = plan.USAGE_EXIT
            break
    sides_order = [side.name for side in sides]
    write_json_atomic(out / MANIFEST, plan.manifest(
        count=count, sides=sides, command_args=locust_args, seed_base=args.seed_base,
        shuffle=not args.no_shuffle, out=str(out), outcomes=outcomes, started_at=started_at,
        finished_at=_now(), elapsed_s=round(time.monotonic() - started, 1), stopped=stopped,
        versions=_versions()))
    print("\n".join(plan.format_summary(outcomes, sides_order, len(runs), str(out / MANIFEST), stopped)),
          flush=True)
    return stop_exit or (1 if plan.failed(outcomes) else 0)


def run(args: argparse.Namespace, rest: list[str]) -> int:
    return repeat(args, rest, lambda line: print(line, file=sys.stderr, flush=True))

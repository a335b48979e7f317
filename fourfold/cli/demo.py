"""``fourfold demo``: baseline vs candidate from a fresh checkout, in a few minutes.

Each simulator profile, ``baseline`` and ``candidate``, runs ``repeats`` times (default 2), in
ABBA order (baseline, candidate, candidate, baseline, ...: a slow drift of the machine hits both
alike; :func:`fourfold.cli.repeat_plan.launch_order`), each repetition with its own seed and
shuffled request order, so the comparison has runs as its replicates and its verdicts rest on the
variance between runs (docs/statistics.md). In each, every level whose locustfile exists (checked
at run time) runs as a bounded headless ``locust`` subprocess:

- L1 and L2 send to a simulator this module starts (``--host``), so L1 does *not* imply
  ``--ignore-eos``: answers end where the reference ends and their similarity means something;
- L3 and L4 start their own embedded targets with ``--sim-profile`` (L3 needs its RAG service, L4
  its session scripts), L4 with a short think time.

Then the fingerprint scores every run (``fourfold.fingerprint.runscore.score_run``, one MiniLM embedder for
all runs; skipped with a note when the model cannot load), the comparison report is written
(``report.md``, ``report.html``, ``report.csv``) and the table is printed with an *article
check*: the article's direction of effects next to what this demo measured.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from fourfold.cli.compare import DEFAULT_OUT, check_out_dir, compare_settings, settings_arguments
from fourfold.cli.repeat_plan import launch_order
from fourfold.errors import FourfoldError, UsageError
from fourfold.fingerprint.runscore import make_embedder, score_run
from fourfold.locustfiles import LOCUSTFILE_DIR
from fourfold.measure.console import counted
from fourfold.reports.article import (
    TERMINAL_WIDTH,
    Finding,
    check_rows,
    render_html,
    render_markdown,
    render_terminal,
)
from fourfold.reports.compare import DEFAULT_SETTINGS, CompareSettings
from fourfold.reports.load import load_run
from fourfold.reports.markdown import render_tables
from fourfold.reports.report import Report, Section, Side, build_report, write_report
from fourfold.rundir.runread import latest_run
from fourfold.targets import IMPORT_ROOT
from fourfold.targets.launch import start_simulator

__all__ = ["DEMO_LEVELS", "DemoOptions", "DemoResult", "add_arguments", "article_check", "available_levels",
           "render_check", "run", "run_demo"]

DEMO_DURATION_S = 30        # L1 seconds per run: two runs a profile, ~250 requests each at 24 users
                            # (docs/demo.md)
DEMO_USERS = 24
DEMO_REPEATS = 2            # runs of each profile: the replicates the verdicts rest on (docs/statistics.md)

ROLES = ("baseline", "candidate")        # the sides; each runs a simulator profile (DemoOptions.profiles)


@dataclass(frozen=True)
class LevelPlan:
    locustfile: str
    via_host: bool                   # True: our simulator via --host; False: the level's embedded targets
    extra: tuple[str, ...] = ()


DEMO_LEVELS: dict[str, LevelPlan] = {
    "l1": LevelPlan("l1_throughput.py", True),
    "l2": LevelPlan("l2_gateway.py", True, ("--ladder", "off")),
    "l3": LevelPlan("l3_rag.py", False),
    "l4": LevelPlan("l4_session.py", False, ("--think-scale", "0.05")),
}


@dataclass(frozen=True)
class DemoOptions:
    out_dir: Path = Path("reports-out/demo")
    duration_s: int = DEMO_DURATION_S
    users: int = DEMO_USERS
    levels: tuple[str, ...] | None = None       # None: every level whose locustfile exists
    seed: int = 0                               # the simulators' seed (the bootstrap's is in settings)
    score: bool = True
    max_tokens: int | None = None               # None: each item's own (the whole reference answer)
    settings: CompareSettings = DEFAULT_SETTINGS
    min_level_s: int = 10                       # the shortest run of a level other than L1
    repeats: int = DEMO_REPEATS                 # runs of each profile and level (the comparison's replicates)
    profiles: tuple[str, str] = ROLES           # the baseline's and the candidate's simulator profile

    @classmethod
    def quick(cls, out_dir: Path, score: bool = True) -> DemoOptions:
        """The shortened demo the integration test runs: every level, L1 8 s and the others 5 s per
        profile, 4 users, answers cut at 64 tokens (so each user gets several requests in, and
        candidate answers still pulse; cut answers are left out of structure compliance)."""
        return cls(out_dir=out_dir, duration_s=8, users=4, levels=None, score=score, max_tokens=64,
                   settings=CompareSettings(resamples=500), min_level_s=5, repeats=2)


@dataclass
class DemoResult:
    report: Report
    files: dict[str, Path]
    runs: dict[str, list[Path]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    check: list[Finding] = field(default_factory=list)


def available_levels(root: Path = LOCUSTFILE_DIR) -> list[str]:
    return [level for level, plan in DEMO_LEVELS.items() if (root / plan.locustfile).is_file()]


def level_duration(level: str, duration_s: int, min_level_s: int = 10) -> int:
    """L1 runs ``duration_s``; the other levels half of it, at least ``min_level_s``."""
    return duration_s if level == "l1" else max(min_level_s, duration_s // 2)


def run_label(role: str, level: str, repetition: int) -> str:
    return f"demo-{role}-{level}-{repetition}"


def _locust_command(level: str, plan: LevelPlan, role: str, options: DemoOptions, host: str | None,
                    run_base: Path, repetition: int = 1) -> list[str]:
    users = str(options.users)
    seconds = level_duration(level, options.duration_s, options.min_level_s)
    seed = str(options.seed + repetition - 1)       # both profiles of a repetition share it (matched pairs)
    command = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE_DIR / plan.locustfile), "--headless",
               "-u", users, "-r", users, "-t", f"{seconds}s", "--only-summary",
               "--run-dir", str(run_base), "--label", run_label(role, level, repetition), "--sim-seed", seed,
               "--seed", seed, "--shuffle"]
    command += ["--host", host] if host else ["--sim-profile", options.profiles[ROLES.index(role)]]
    if options.max_tokens:
        command += ["--max-tokens", str(options.max_tokens)]
    return [*command, *plan.extra]


def _run_level(level: str, plan: LevelPlan, role: str, options: DemoOptions, host: str | None,
               say: Callable[[str], None], repetition: int = 1) -> tuple[Path | None, str]:
    run_base = options.out_dir.resolve() / "runs"      # the caller's directory, whatever the child's
    logs = options.out_dir.resolve() / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    label = run_label(role, level, repetition)
    command = _locust_command(level, plan, role, options, host, run_base, repetition)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(IMPORT_ROOT), env.get("PYTHONPATH", "")) if p)
    env.pop("LOCUST_HOST", None)
    seconds = level_duration(level, options.duration_s, options.min_level_s)
    say(f"fourfold demo: {role} {level} #{repetition}: {options.users} users for {seconds} s ...")
    started = time.monotonic()
    with open(logs / f"{label}.log", "w", encoding="utf-8") as log:
        try:
            proc = subprocess.run(command, env=env, stdout=log, stderr=subprocess.STDOUT,
                                  timeout=options.duration_s + 180, check=False)
            status = proc.returncode
        except subprocess.TimeoutExpired:
            status = -1
    run_dir = latest_run(run_base, label)
    if run_dir is None or not (run_dir / "records.jsonl").is_file():
        return None, (f"{role} {level}: no run directory (locust exit status {status}); "
                      f"see {logs / (label + '.log')}")
    note = ("" if status in (0, 3)
            else f"{role} {level}: locust exited {status} (see {logs / (label + '.log')})")
    say(f"fourfold demo: {role} {level} #{repetition}: {run_dir} ({time.monotonic() - started:.0f} s)")
    return run_dir, note


def _score(run_dirs: list[Path], say: Callable[[str], None]) -> str:
    """Score every run with one embedder; returns a problem note, or ''."""
    try:
        embedder = make_embedder()
        for run_dir in run_dirs:
            started = time.monotonic()
            result = score_run(run_dir, embedder, progress=False)
            about, total = result.quality.get("embedder") or {}, result.quality["total"]
            say(f"fourfold demo: scored {counted(len(result.rows), 'answer')} of {run_dir.name} "
                f"({time.monotonic() - started:.0f} s; backend {about.get('backend') or '-'}, "
                f"{total.get('low_confidence_n', 0)} low-confidence)")
    except (ImportError, OSError, RuntimeError, FourfoldError) as exc:
        return (f"the fingerprint could not score the runs ({type(exc).__name__}: {exc}); "
                "quality rows are missing")
    return ""


def run_demo(options: DemoOptions, say: Callable[[str], None] = print) -> DemoResult:
    """Run the levels against both profiles, score, compare and write the report."""
    present = available_levels()
    levels = list(options.levels) if options.levels else present
    unknown = [lv for lv in levels if lv not in present]
    if unknown:
        raise UsageError(f"level(s) {', '.join(unknown)} not available; "
                         f"this checkout has {', '.join(present)}")
    runs: dict[str, list[Path]] = {role: [] for role in ROLES}
    problems: list[str] = []
    simulators = {}
    try:
        if any(DEMO_LEVELS[lv].via_host for lv in levels):
            simulators = {role: start_simulator(profile, seed=options.seed)
                          for role, profile in zip(ROLES, options.profiles, strict=True)}
        for role, repetition in launch_order(options.repeats, ROLES):
            for level in levels:
                plan = DEMO_LEVELS[level]
                host = simulators[role].url if plan.via_host and simulators else None
                run_dir, note = _run_level(level, plan, role, options, host, say, repetition)
                if run_dir is not None:
                    runs[role].append(run_dir)
                if note:
                    problems.append(note)
    finally:
        for simulator in simulators.values():
            simulator.stop()
    if not runs["baseline"] or not runs["candidate"]:
        raise FourfoldError("the demo produced no runs to compare: " + "; ".join(problems))
    if options.score:
        note = _score(runs["baseline"] + runs["candidate"], say)
        if note:
            problems.append(note)
    sides = [Side(role if role == profile else f"{role} ({profile})", [load_run(path) for path in runs[role]])
             for role, profile in zip(ROLES, options.profiles, strict=True)]
    report = build_report(sides[0], sides[1:], options.settings)
    check = article_check(report)
    report.sections.append(Section(render_markdown(check), render_html(check)))
    report.notes.extend(problems)
    files = write_report(report, options.out_dir)
    return DemoResult(report, files, runs, problems, check)


def article_check(report: Report) -> list[Finding]:
    """The article's table against the demo's comparison (:mod:`fourfold.reports.article`)."""
    return check_rows(report.comparisons[0].rows)


def render_check(check: list[Finding], width: int = TERMINAL_WIDTH) -> str:
    """The article check as the demo prints it last: the compact table, at most ``width`` columns wide
    (the whole table is in report.md and report.html)."""
    return render_terminal(check, width)


def add_arguments(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument("--out", default=f"{DEFAULT_OUT}/demo",
                     help=f"output directory (default {DEFAULT_OUT}/demo)")
    cmd.add_argument("--duration", type=int, default=DEMO_DURATION_S,
                     help=f"seconds of L1 per run (default {DEMO_DURATION_S}); the other levels run half "
                          "as long, >= 10 s")
    cmd.add_argument("--profiles", default="baseline,candidate", metavar="BASELINE,CANDIDATE",
                     help="the two sides' simulator profiles (default baseline,candidate; "
                          "baseline,baseline: an A/A demo, one version against itself)")
    cmd.add_argument("--repeats", type=int, default=DEMO_REPEATS,
                     help=f"runs of each profile, interleaved ABBA (default {DEMO_REPEATS}; 1: one run "
                          "a side, no verdict on the rows of runs)")
    cmd.add_argument("--users", type=int, default=DEMO_USERS,
                     help=f"locust users per run (default {DEMO_USERS})")
    cmd.add_argument("--levels", default=None, help="comma-separated levels (default: every level present)")
    cmd.add_argument("--quick", action="store_true",
                     help="a smoke test: every level (L1 8 s, the others 5 s per profile), 4 users, "
                          "64-token answers")
    cmd.add_argument("--no-score", action="store_true", help="skip the fingerprint (no quality rows)")
    settings_arguments(cmd, seed_help="seed of the simulators and of the bootstrap (default 0)")


def run(args: argparse.Namespace, rest: list[str]) -> int:
    """``fourfold demo``: the options checked, the demo run, its tables printed."""

    settings = compare_settings(args)
    check_out_dir(args.out)
    if args.quick:
        options = dataclasses.replace(DemoOptions.quick(Path(args.out), score=not args.no_score),
                                      seed=args.seed)
    else:
        if not 5 <= args.duration <= 86_400 or not 1 <= args.users <= 100_000 or not 1 <= args.repeats <= 20:
            raise UsageError("--duration must be within [5, 86400] s, --users within [1, 100000] and "
                             "--repeats within [1, 20]")
        levels = tuple(v.strip() for v in args.levels.split(",") if v.strip()) if args.levels else None
        profiles = tuple(p.strip() for p in args.profiles.split(","))
        if len(profiles) != 2 or not all(profiles):
            raise UsageError(f"--profiles {args.profiles!r}: give two simulator profiles, baseline first, "
                             "e.g. baseline,candidate")
        options = DemoOptions(out_dir=Path(args.out), duration_s=args.duration, users=args.users,
                              levels=levels, seed=args.seed, score=not args.no_score, settings=settings,
                              repeats=args.repeats, profiles=(profiles[0], profiles[1]))
    result = run_demo(options, say=lambda line: print(line, file=sys.stderr, flush=True))
    print(render_tables(result.report))
    # the compact table fits the terminal (160 columns at most, 100 at least; 160 when not a terminal)
    print(render_check(result.check, width=max(100, min(160, shutil.get_terminal_size((160, 24)).columns))))
    for note in result.report.notes:
        print(f"note: {note}")
    print()
    print(f"HTML report: {result.files.get('html', '-')}")
    print("also: " + ", ".join(str(p) for key, p in result.files.items() if key != "html"))
    return 0

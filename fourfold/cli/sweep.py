"""``fourfold sweep``: find the highest request rate whose SLO still holds (docs/sweep.md).

    fourfold sweep --slo 'ttft_p95<=500ms' [--host URL] [--tolerance 0.1] [locust options...]

1. A throughput probe: a closed loop (``l2_gateway.py --ladder off``) at ``--probe-users`` for
   ``--probe-s`` seconds; its completed requests per second are the rate the target reaches.
2. Open-loop runs (``l2_open_loop.py``), each ``--duration-s`` long, at rates the search in
   :mod:`fourfold.gates.sweep` picks (3/4 of the probe's rate first, then up or down, then
   bisection), until a passing and a missing rate are within ``--tolerance`` of each other.

Each run is a bounded headless ``locust`` subprocess with the same extra options (anything
``fourfold sweep`` does not know goes to every run: ``--max-tokens 32``, ``--dialect``...).
Without ``--host`` the sweep starts a simulator (``--sim-profile``, ``--sim-max-batch``,
``--sim-max-concurrency``, ``--sim-set``). The sweep directory ``<--out>/<UTC time>-<label>/``
holds ``summary.json`` (the ``sweep`` block), ``sweep.txt`` (the table), ``sweep.svg``
(latency vs offered rate), the runs under ``runs/`` and their logs under ``logs/``.
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fourfold.errors import FourfoldError, UsageError
from fourfold.gates.gate import load_slo
from fourfold.gates.slo import to_spec
from fourfold.gates.sweep import SearchPlan, format_table, knee_metric, rate_point, search
from fourfold.locustfiles import LOCUSTFILE_DIR
from fourfold.reports.capacity import sweep_plot
from fourfold.rundir.runlog import RunWriter
from fourfold.rundir.runread import latest_run, read_summary
from fourfold.targets import IMPORT_ROOT
from fourfold.targets.launch import start_simulator

DEFAULT_SLO = "ttft_p95<=1000ms"
ARRIVALS = ("constant", "poisson", "gamma")


def add_arguments(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument("--host", default=None,
                     help="target base URL (default: a simulator this command starts)")
    cmd.add_argument("--slo", default=None,
                     help="the SLO the capacity must meet: inline spec or SLO file "
                          f"(default {DEFAULT_SLO!r})")
    cmd.add_argument("--tolerance", type=float, default=0.10,
                     help="stop when (first miss - last pass) / last pass <= this (default 0.10)")
    cmd.add_argument("--duration-s", type=float, default=10.0, help="seconds per open-loop rate (default 10)")
    cmd.add_argument("--probe-users", type=int, default=32,
                     help="closed-loop users of the throughput probe (default 32)")
    cmd.add_argument("--probe-s", type=float, default=5.0, help="seconds of the throughput probe (default 5)")
    cmd.add_argument("--max-runs", type=int, default=10, help="open-loop runs at most (default 10)")
    cmd.add_argument("--max-error-rate", type=float, default=0.05,
                     help="a rate with more failed requests than this share misses (default 0.05)")
    cmd.add_argument("--arrival-process", choices=ARRIVALS, default="constant",
                     help="arrivals of the open-loop runs (default constant; poisson finds the burst-aware "
                          "capacity)")
    cmd.add_argument("--out", default="runs", help="where the sweep directory goes (default runs)")
    cmd.add_argument("--label", default="sweep", help="the sweep directory's label (default sweep)")
    cmd.add_argument("--sim-profile", default="baseline", help="without --host: the simulator's profile")
    cmd.add_argument("--sim-seed", type=int, default=0, help="without --host: the simulator's seed")
    cmd.add_argument("--sim-max-batch", type=int, default=None, help="without --host: override max_batch")
    cmd.add_argument("--sim-max-concurrency", type=int, default=0,
                     help="without --host: generations in flight at most, the rest queue (0: no limit)")
    cmd.add_argument("--sim-set", action="append", default=[], metavar="KEY=VALUE",
                     help="without --host: override a profile field (repeatable), as `fourfold sim --set`")


def _check(args: argparse.Namespace) -> None:
    """Bad numbers: one UsageError naming the option, before anything starts."""
    for option, value, ok, rule in (
            ("--tolerance", args.tolerance, 0 < args.tolerance < 1, "within (0, 1)"),
            ("--duration-s", args.duration_s, 2 <= args.duration_s <= 86400, "within [2, 86400]"),
            ("--probe-users", args.probe_users, 1 <= args.probe_users <= 10000, "within [1, 10000]"),
            ("--probe-s", args.probe_s, 1 <= args.probe_s <= 3600, "within [1, 3600]"),
            ("--max-runs", args.max_runs, 2 <= args.max_runs <= 100, "within [2, 100]"),
            ("--max-error-rate", args.max_error_rate, 0 <= args.max_error_rate < 1, "within [0, 1)"),
            ("--sim-max-concurrency", args.sim_max_concurrency, 0 <= args.sim_max_concurrency <= 10**6,
             "within [0, 1000000]"),
            ("--sim-max-batch", args.sim_max_batch,
             args.sim_max_batch is None or 1 <= args.sim_max_batch <= 10**6, "within [1, 1000000]")):
        if not ok:
            raise UsageError(f"{option} must be {rule}, got {value}")
    for text in args.sim_set:
        if "=" not in text:
            raise UsageError(f"--sim-set {text!r}: expected KEY=VALUE, e.g. max_batch=8")


def _sim_args(args: argparse.Namespace) -> list[str]:
    extra = ["--max-batch", str(args.sim_max_batch)] if args.sim_max_batch else []
    if args.sim_max_concurrency:
        extra += ["--max-concurrency", str(args.sim_max_concurrency)]
    for text in args.sim_set:
        extra += ["--set", text]
    return extra


class Runner:
    """Runs one bounded headless locust per step into the sweep directory."""

    def __init__(self, sweep_dir: Path, host: str, passthrough: list[str],
                 say: Callable[[str], None]) -> None:
        self.sweep_dir, self.host, self.passthrough, self.say = sweep_dir, host, passthrough, say
        (sweep_dir / "logs").mkdir(parents=True, exist_ok=True)

    def run(self, label: str, locustfile: str, options: list[str],
            seconds: float) -> tuple[Path, dict[str, Any]]:
        base = self.sweep_dir / "runs"
        command = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE_DIR / locustfile), "--headless",
                   "-t", f"{seconds:g}s", "--only-summary", "--run-dir", str(base), "--label", label,
                   "--host", self.host, *options, *self.passthrough]
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(IMPORT_ROOT), env.get("PYTHONPATH", "")) if p)
        log_path = self.sweep_dir / "logs" / f"{label}.log"
        with open(log_path, "w", encoding="utf-8") as log:
            try:
                status = subprocess.run(command, env=env, stdout=log, stderr=subprocess.STDOUT,
                                        timeout=seconds + 120, check=False).returncode
            except subprocess.TimeoutExpired:
                status = -1
        run_dir = latest_run(base, label)
        summary = read_summary(run_dir) if run_dir is not None else None
        if run_dir is None or summary is None:
            tail = "".join(log_path.read_text(encoding="utf-8", errors="replace")
                           .splitlines(True)[-5:]).strip()
            raise FourfoldError(f"the sweep's run {label!r} wrote no summary (locust exit status {status}); "
                                f"see {log_path}: {tail}")
        return run_dir, summary


def _probe(runner: Runner, args: argparse.Namespace) -> dict[str, Any]:
    users = str(args.probe_users)
    runner.say(f"fourfold sweep: throughput probe, {users} users (closed loop) for {args.probe_s:g} s ...")
    run_dir, summary = runner.run("probe", "l2_gateway.py",
                                  ["--ladder", "off", "-u", users, "-r", users, "--warmup-requests", "0"],
                                  args.probe_s)
    total = summary.get("total") or {}
    rps = total.get("request_rps")
    if not isinstance(rps, (int, float)) or not rps > 0 or not total.get("ok"):
        raise FourfoldError(f"the throughput probe completed no request ({run_dir}); is the target up? "
                            f"errors: {total.get('errors') or {}}")
    runner.say(f"fourfold sweep: the probe reached {rps:.2f} requests/s ({total.get('ok')} ok)")
    e2e_s = ((total.get("e2e_ms") or {}).get("p50") or 0) / 1000
    if args.duration_s < 2 * e2e_s:
        raise UsageError(f"--duration-s {args.duration_s:g} is shorter than two of this target's answers "
                         f"(the probe's E2E p50 is {e2e_s:.1f} s): its runs would complete too few requests "
                         f"to judge a rate; give --duration-s {math.ceil(4 * e2e_s)} or more")
    return {"users": args.probe_users, "duration_s": args.probe_s, "throughput_rps": float(rps),
            "error_rate": total.get("error_rate"), "run_dir": str(run_dir.relative_to(runner.sweep_dir))}


def sweep(args: argparse.Namespace, rest: list[str],
          say: Callable[[str], None]) -> tuple[Path, dict[str, Any], list[str]]:
    """Probe, search, write the sweep directory; returns (directory, sweep block, table lines)."""

    _check(args)
    slos = load_slo(args.slo or DEFAULT_SLO)
    slo_text = to_spec(slos)
    plan = SearchPlan(tolerance=args.tolerance, max_runs=args.max_runs)
    started = time.monotonic()
    simulator = None
    try:
        if args.host:
            host = args.host
        else:
            simulator = start_simulator(args.sim_profile, seed=args.sim_seed, extra_args=_sim_args(args))
            host = simulator.url
            say(f"fourfold sweep: simulator {args.sim_profile} {' '.join(_sim_args(args))} at {host}")
        writer = RunWriter(args.label, args.out)
        runner = Runner(writer.run_dir, host, list(rest), say)
        probe = _probe(runner, args)

        def measure(rate: float) -> Any:
            label = f"rate-{rate:.3f}"
            run_dir, summary = runner.run(label, "l2_open_loop.py", [         # (the probe checked the target)
                "--arrival-rate", f"{rate:.6g}", "--arrival-process", args.arrival_process, "--no-preflight"],
                args.duration_s)
            point = rate_point(rate, summary, slos, max_error_rate=args.max_error_rate,
                               run_dir=str(run_dir.relative_to(writer.run_dir)))
            say(f"fourfold sweep: {rate:.2f}/s offered, {point.achieved_rps or 0:.2f}/s achieved: "
                + ("meets the SLO" if point.passed else f"MISSES ({point.reason})"))
            return point

        result = search(measure, 0.75 * probe["throughput_rps"], plan, upper_hint_rps=probe["throughput_rps"],
                        knee_on=knee_metric(slos))
    finally:
        if simulator is not None:
            simulator.stop()
    block = {"slo": slo_text, "slo_default": not args.slo, "tolerance": args.tolerance,
             "arrival_process": args.arrival_process, "duration_s": args.duration_s, "probe": probe,
             "target": host if args.host else {"simulator": args.sim_profile, "args": _sim_args(args)},
             "passthrough": list(rest), **result.to_dict(), "elapsed_s": round(time.monotonic() - started, 1)}
    lines = format_table(result, slo_text)
    writer.write_summary({"kind": "sweep", "label": writer.label, "sweep": block})
    (writer.run_dir / "sweep.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    try:
        sweep_plot(block, writer.run_dir / "sweep.svg", title=f"{writer.label}: {slo_text}")
    except (ImportError, ValueError) as exc:          # no matplotlib: the numbers are all there
        say(f"fourfold sweep: no plot ({exc})")
    return writer.run_dir, block, lines


def run(args: argparse.Namespace, rest: list[str]) -> int:
    say = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    _check(args)
    if not args.slo:
        say(f"fourfold sweep: no --slo given: using {DEFAULT_SLO}")
    sweep_dir, block, lines = sweep(args, rest, say)
    print("\n".join(lines))
    print(f"sweep directory: {sweep_dir} (summary.json, sweep.txt, sweep.svg, runs/); "
          f"{block['elapsed_s']:.0f} s")
    return exit_code(block)


def exit_code(block: dict[str, Any]) -> int:
    """0: a capacity was found; 3: every rate judged missed the SLO; 1: no rate could be judged (the
    search stopped at an inconclusive run). docs/sweep.md."""
    if block.get("capacity_rps") is not None:
        return 0
    judged = [r for r in block.get("rates") or () if not r.get("inconclusive")]
    return 3 if judged else 1

"""The SLO gate inside a Locust run (``--slo``, ``--junit``); the pure part is :mod:`fourfold.gates.slo`.

- ``configure(environment, runtime)`` (``test_start``, every role): reads ``--slo`` into a
  :class:`Gate`; on the local runner or the master it rewrites ``parsed_options.slo`` to the
  inline spec, so workers (which get the master's options with the spawn message) need no
  copy of an SLO file. The per-request goodput thresholds and ``--stall-ms`` are applied to
  the runtime's LLMStats before any record is counted; the master also ships the thresholds
  it counts with (``parsed_options.fourfold_stats_config``) and workers use those, since a
  worker's own command line may differ and the master refuses to merge stats counted with
  other thresholds.
- ``finish(environment, runtime, summary)`` (each test's end, ``hooks.finish_test``: a web-UI Stop or,
  headless, ``quitting``; local runner or master): verdicts on the final merged summary (its
  ``server_metrics`` block is in: ``hooks._on_test_stop`` stops the sampler before the summary is
  written, so telemetry clauses judge the whole run), the table printed, the ``slo`` block added
  to ``summary.json``, ``--junit`` written, and ``environment.process_exit_code = 3`` when any SLO
  failed (the last test's verdict: a web-UI test that meets its SLO clears an earlier test's 3).
  Quality clauses are skipped here: ``fourfold check`` judges them after ``fourfold score``. A run
  with ``l2.sweep`` (``--sweep``) mixes every offered rate, and its search already judged the SLO
  rate by rate: :func:`sweep_decision` replaces the whole run's verdict (one line; exit 3 only
  when no rate met the SLO), the whole run's verdicts are still recorded in the ``slo`` block.
- ``live_verdicts(environment)``: the same verdicts on the stats so far (the web UI's SLO tab).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from fourfold.gates.gate import load_slo, write_junit
from fourfold.gates.slo import MISS_EXIT_CODE, SLO, SLOSpecError, Verdict, goodput_thresholds, to_spec
from fourfold.gates.slo_report import format_verdicts
from fourfold.gates.slo_verdict import evaluate, exit_code, summary_block
from fourfold.levels.options import Settings
from fourfold.levels.runtime import Runtime, find_runtime
from fourfold.levels.state import state_of
from fourfold.measure.stats import LLMStats

log = logging.getLogger("fourfold")
# parsed_options attribute the master sets at test_start; Locust forwards it to the workers with the
# spawn message, so every process counts stalls and goodput with the master's thresholds
STATS_CONFIG_OPTION = "fourfold_stats_config"


@dataclass
class Gate:
    source: str = ""                       # what --slo said (spec or file path)
    slos: list[SLO] = field(default_factory=list)
    error: str = ""                        # a malformed spec that reached test_start (web UI form)


def get_gate(environment: Any) -> Gate:
    return state_of(environment).get(Gate) or Gate()


def configure(environment: Any, runtime: Runtime) -> Gate:
    settings: Settings = runtime.settings
    gate = Gate(source=settings.slo)
    if settings.slo.strip():
        try:
            gate.slos = load_slo(settings.slo)
        except SLOSpecError as exc:
            gate.error = str(exc)
            log.error("fourfold: %s; the SLO gate is off for this run", exc)
    state_of(environment).put(gate)
    options = environment.parsed_options
    if runtime.is_worker:
        shipped = getattr(options, STATS_CONFIG_OPTION, None)   # the master's, with the spawn message
        if isinstance(shipped, dict):
            _apply_thresholds(runtime, float(shipped["stall_ms"]), dict(shipped["slo_ms"]))
        else:
            _apply_thresholds(runtime, settings.stall_ms, goodput_thresholds(gate.slos))
        return gate
    _apply_thresholds(runtime, settings.stall_ms, goodput_thresholds(gate.slos))
    if options is not None:
        if gate.slos:
            options.slo = to_spec(gate.slos)
        setattr(options, STATS_CONFIG_OPTION, {"stall_ms": runtime.stats.stall_threshold_ms,
                                               "slo_ms": dict(runtime.stats.slo_ms)})
    return gate


def _apply_thresholds(runtime: Runtime, stall_ms: float, slo_ms: dict[str, float]) -> None:
    stats = runtime.stats
    if stats.stall_threshold_ms == stall_ms and stats.slo_ms == slo_ms:
        return
    if stats.groups:
        log.warning("fourfold: stall threshold / goodput SLO changed to %s ms / %s after records were "
                    "counted; keeping %s ms / %s", stall_ms, slo_ms, stats.stall_threshold_ms, stats.slo_ms)
        return
    runtime.stats = LLMStats(stall_threshold_ms=stall_ms, slo_ms=slo_ms, alpha=stats.alpha)


def live_verdicts(environment: Any) -> list[Verdict]:
    gate = get_gate(environment)
    runtime = find_runtime(environment)
    if not gate.slos or runtime is None:
        return []
    summary = runtime.stats.summary()
    sampler = getattr(runtime, "sampler", None)       # telemetry clauses: the samples so far
    if sampler is not None:
        summary["server_metrics"] = sampler.summary()
    return evaluate(gate.slos, summary, quality="skip")


def sweep_decision(summary: dict[str, Any]) -> tuple[int, str] | None:
    """For a run whose summary holds ``l2.sweep``: (exit code, the line printed instead of the whole
    run's verdicts); None for any other run. The sweep judged the SLO on each rate's own records, so
    the run meets it when some rate did (exit 0, the capacity named) and misses it (3) when no rate
    did, including when the test stopped before any rate was judged."""
    sweep = (summary.get("l2") or {}).get("sweep")
    if not isinstance(sweep, dict):
        return None
    rates = sweep.get("rates") or []
    head = ("fourfold: --sweep: the SLO was judged per rate (l2.sweep), not on the whole run, "
            "which mixes every rate")
    capacity = sweep.get("capacity_rps")
    if capacity is None:
        judged = [r for r in rates if not (isinstance(r, dict) and r.get("inconclusive"))]
        why = (f"no rate of {len(judged)} met it" if judged
               else f"no rate could be judged ({sweep.get('stopped') or 'inconclusive'})" if rates
               else "the test stopped before any rate was judged")
        return MISS_EXIT_CODE, f"{head}: {why} (exit {MISS_EXIT_CODE})"
    low, high = (list(sweep.get("bracket_rps") or []) + [None, None])[:2]
    upper = "no miss" if high is None else f"{high:.2f}"
    state = "converged" if sweep.get("converged") else f"not converged: {sweep.get('stopped') or 'stopped'}"
    return 0, f"{head}: capacity {capacity:.2f} requests/s, bracket [{(low or 0.0):.2f}, {upper}] ({state})"


def finish(environment: Any, runtime: Runtime, summary: dict[str, Any] | None) -> list[Verdict]:
    """Judge the final summary; print, record, write JUnit and set the exit code (not on workers).

    The exit code is the last test's verdict: a web-UI session's earlier miss is cleared by a later
    test that meets its SLO (or has none), as Locust's own ``--exit-code-on-error`` counts only the
    last test's errors (its statistics restart with each test). Each test's verdict stays in its
    run directory's ``summary.json``."""
    gate = get_gate(environment)
    if runtime.is_worker:
        return []
    state = state_of(environment)
    earlier = state.exit_code
    if earlier is not None and environment.process_exit_code == earlier:
        environment.process_exit_code = None          # an earlier test's miss: this test decides now
    state.exit_code = None
    if summary is None or not gate.slos:
        return []
    verdicts = evaluate(gate.slos, summary, quality="skip")
    block = summary_block(gate.slos, verdicts)
    block["source"] = gate.source
    per_rate = sweep_decision(summary)
    if per_rate is not None:
        block["whole_run_exit_code"], block["exit_code"] = block["exit_code"], per_rate[0]
        block["judged"] = "per rate (l2.sweep)"
        print(per_rate[1], flush=True)
    else:
        print(format_verdicts(verdicts), flush=True)
    if runtime.writer is not None:
        runtime.writer.write_summary({**summary, "slo": block})
    junit = runtime.settings.junit
    if junit:
        run_dir = str(runtime.writer.run_dir) if runtime.writer is not None else ""
        path = write_junit(junit, verdicts, run_dir=run_dir, spec=to_spec(gate.slos))
        print(f"fourfold: SLO verdicts as JUnit XML in {path}", flush=True)
    code = exit_code(verdicts) if per_rate is None else per_rate[0]
    if code:
        environment.process_exit_code = state.exit_code = code
    return verdicts


__all__ = ["Gate", "configure", "finish", "get_gate", "live_verdicts", "sweep_decision"]

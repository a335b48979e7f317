"""The concurrency ladder: step the user count up, hold each step, find the knee.

Pure parts (module functions, no Locust): parsing ``--ladder "8,16,32,64"``, which step a moment
of the run falls in, the scenario name each step's records carry (``ladder@32``: LLMStats then
keeps every step apart for free), and the knee. The Locust part is :class:`LadderShape`, a
``LoadTestShape``: Locust uses it when it is in the locustfile's namespace, for every run of that
locustfile. With ``--ladder off`` it behaves like no shape at all: ``-u``/``-r``/``-t`` decide.

**Knee**: the highest step whose TTFT p95 meets the SLO *with every lower step meeting it too*
(the last step before the first miss). When latency grows with load, as it does, that is simply
"the highest step that meets the SLO"; the stricter rule keeps one lucky step above a miss from
being reported as capacity. A step without a single ok request misses the SLO.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, ClassVar

from locust import LoadTestShape

from fourfold.levels.l2_options import GatewaySettings
from fourfold.levels.l2_saturation import check_ladder

STEP_ATTR = "fourfold_ladder_step"       # parsed_options attribute: the current step (None: no ladder)
_SCENARIO_RE = re.compile(r"^(?P<base>.+)@(?P<users>\d+)$")


@dataclass(frozen=True)
class Ladder:
    steps: tuple[int, ...]
    hold_s: float

    def __post_init__(self) -> None:
        if not self.steps:
            raise ValueError("a ladder needs at least one step")
        if not self.hold_s > 0:
            raise ValueError(f"--ladder-hold-s must be > 0, got {self.hold_s}")

    @property
    def duration_s(self) -> float:
        return len(self.steps) * self.hold_s

    def step_at(self, elapsed_s: float) -> int | None:
        """The user count of the step ``elapsed_s`` into the ladder (None once it is over)."""
        index = int(max(elapsed_s, 0.0) // self.hold_s)
        return self.steps[index] if index < len(self.steps) else None

    def tick(self, elapsed_s: float) -> tuple[int, float] | None:
        """Locust's shape tick: (users, spawn rate), every step reached within about one second."""
        users = self.step_at(elapsed_s)
        if users is None:
            return None
        return users, float(max(users, 1))


def step_scenario(base: str, users: int) -> str:
    return f"{base}@{users}"


def parse_step_scenario(scenario: str) -> tuple[str, int] | None:
    """``"ladder@32"`` -> ("ladder", 32); anything else -> None."""
    match = _SCENARIO_RE.match(scenario)
    return (match["base"], int(match["users"])) if match else None


def find_knee(steps: Iterable[tuple[int, float | None]], slo_ms: float) -> int | None:
    """The knee (see module docstring) from (users, TTFT p95 in ms or None) per step."""
    knee = None
    for users, p95 in sorted(steps):
        if p95 is None or p95 > slo_ms:
            break
        knee = users
    return knee


def ladder_report(groups: Iterable[dict[str, Any]], slo_ms: float) -> dict[str, dict[str, Any]]:
    """Per ladder base (``ladder``, ``h1``...): step rows and the knee, from LLMStats group summaries."""
    bases: dict[str, list[dict[str, Any]]] = {}
    for group in groups:
        parsed = parse_step_scenario(group.get("scenario", ""))
        if parsed is None:
            continue
        base, users = parsed
        ttft, e2e = group["ttft_ms"], group["e2e_ms"]
        p95 = ttft["p95"] if ttft["count"] else None
        bases.setdefault(base, []).append({
            "users": users, "requests": group["requests"], "failures": group["failures"],
            "ttft_p50_ms": ttft["p50"], "ttft_p95_ms": p95, "ttft_p99_ms": ttft["p99"],
            "e2e_p50_ms": e2e["p50"], "e2e_p95_ms": e2e["p95"], "e2e_p99_ms": e2e["p99"],
            "request_rps": group["request_rps"], "output_tps": group["output_tps"],
            "conn_reuse": group.get("conn_reuse"),
            "meets_slo": p95 is not None and p95 <= slo_ms,
        })
    report = {}
    for base, rows in bases.items():
        rows.sort(key=lambda row: row["users"])
        report[base] = {"slo_ttft_p95_ms": slo_ms, "steps": rows,
                        "knee_users": find_knee(((r["users"], r["ttft_p95_ms"]) for r in rows), slo_ms)}
    return report


def format_ladder(base: str, report: dict[str, Any], hold_s: float | None = None) -> list[str]:
    """The ladder as console lines (one per step) and the knee."""
    slo = report["slo_ttft_p95_ms"]
    hold = f", {hold_s:g} s per step" if hold_s else ""
    lines = [f"L2 concurrency ladder '{base}' (TTFT SLO: p95 <= {slo:g} ms{hold})",
             f"{'users':>6} {'reqs':>6} {'TTFT p50':>9} {'p95':>8} {'p99':>8} {'E2E p50':>9} {'p95':>8} "
             f"{'req/s':>7} {'out tok/s':>10}  SLO"]
    for row in report["steps"]:
        lines.append(f"{row['users']:>6} {row['requests']:>6} {_ms(row['ttft_p50_ms']):>9} "
                     f"{_ms(row['ttft_p95_ms']):>8} "
                     f"{_ms(row['ttft_p99_ms']):>8} {_ms(row['e2e_p50_ms']):>9} {_ms(row['e2e_p95_ms']):>8} "
                     f"{_ms(row['request_rps']):>7} {_ms(row['output_tps']):>10}  "
                     f"{'meets' if row['meets_slo'] else 'MISSES'}")
    knee = report["knee_users"]
    if knee is None:
        lines.append(f"knee: none - the first step ({report['steps'][0]['users']} users) already misses "
                     f"TTFT p95 <= {slo:g} ms")
    else:
        top = report["steps"][-1]["users"]
        stopped = report.get("stopped")
        tail = (f" (the ladder stopped at {stopped['step']} users: past saturation)" if stopped
                else " (the top step: the knee may lie higher)" if knee == top else "")
        lines.append(f"knee: {knee} users - the highest step whose TTFT p95 meets {slo:g} ms, "
                     f"every lower step meeting it too{tail}")
    return lines


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


class LadderShape(LoadTestShape):
    """``--ladder`` steps (``--ladder-hold-s`` each), or ``-u``/``-r``/``-t`` with ``--ladder off``.

    Each tick also stores the current step in ``parsed_options.fourfold_ladder_step``: users read
    it to tag their records (``ladder@32``), and Locust forwards it to workers with every spawn
    message, which is sent exactly when the step changes. With ``--stop-on-saturation`` each tick
    asks :func:`fourfold.levels.l2_saturation.check_ladder` whether the step has saturated; the
    first step that has ends the run (None: Locust stops, headless it quits).
    """

    use_common_options: ClassVar[bool] = True

    def tick(self) -> tuple[int, float] | None:
        assert self.runner is not None
        options = self.runner.environment.parsed_options
        try:
            settings = GatewaySettings.from_options(options)
        except ValueError as exc:      # e.g. a bad --ladder typed into the web UI form: stop, say why
            logging.getLogger("fourfold").error("fourfold: %s", exc)
            return None
        elapsed = self.get_run_time()
        run_time = getattr(options, "run_time", None)
        if run_time and elapsed >= run_time:     # -t still ends the run early (Locust leaves it to us)
            return None
        if not settings.ladder:
            setattr(options, STEP_ATTR, None)
            return (int(getattr(options, "num_users", None) or 1),
                    float(getattr(options, "spawn_rate", None) or 1))
        ladder = Ladder(settings.ladder, settings.ladder_hold_s)
        tick = ladder.tick(elapsed)
        if (tick is not None and settings.stop_on_saturation
                and check_ladder(self.runner.environment, ladder.steps, ladder.hold_s, elapsed)):
            tick = None              # a step past saturation: the run ends here (l2.ladder.<base>.stopped)
        if tick is not None:     # at the end the last step stays: a user whose wait ends while the
            setattr(options, STEP_ATTR, tick[0])     # run stops sends one more request of that step
        return tick


__all__ = ["Ladder", "LadderShape", "find_knee", "format_ladder", "ladder_report", "parse_step_scenario",
           "step_scenario"]

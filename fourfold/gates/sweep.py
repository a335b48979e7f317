"""The capacity sweep's search (pure: no Locust, no processes, no files).

``fourfold sweep`` measures one open-loop run per offered rate; this module decides which rate
comes next and what the runs say, from plain numbers:

- :func:`rate_point` turns one run's ``summary.json`` (its ``total`` and ``l2.open_loop``
  blocks) into a :class:`RatePoint`: offered, sent and achieved rates, TTFT / ITL / E2E
  percentiles, goodput, error rate, and whether the SLO held. A run *misses* when a clause
  misses, when errors climb past ``max_error_rate``, when the target saturates (requests in
  flight kept growing: achieved fell behind offered) or when the load generator fell behind. A
  run that completed no request and did not saturate is *inconclusive*: neither a pass nor a miss
  (a run shorter than one answer says nothing about the rate), and the search stops there.
- :func:`next_rate` chooses the next offered rate from the points so far: the start rate; then
  up by ``growth`` (at first straight to just above the probe's throughput) while every rate
  passes, down by ``growth ** 2`` while every rate misses; once a pass and a miss bracket the
  capacity, the geometric midpoint, until ``(first miss - last pass) / last pass <= tolerance``.
  Nothing is run above a miss, so a saturated or failing target ends the climb at once. When the
  bracket closes, its first miss is run once more unless it saturated: a rate passes when either
  run passed. Other work on the load generator's machine only adds latency, so a lone miss can
  be noise and a pass cannot (with constant arrivals; a Poisson run can pass by luck).
- :func:`search` drives ``next_rate`` with a measure function and returns a :class:`SweepResult`:
  the capacity (the highest rate that passed, below every miss), its bracket ``[last pass, first
  miss]``, the knee and why the search stopped.

The *knee* is where latency starts to climb: the highest measured rate whose latency is at most
``KNEE_FACTOR`` times that of the lowest measured rate, every lower rate within it too. The
latency is the SLO's first TTFT / ITL / E2E percentile clause (:func:`knee_metric`; TTFT p95 when
it has none): a server that slows every stream instead of queueing moves E2E, not TTFT.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from fourfold.gates.slo import SLO
from fourfold.gates.slo_verdict import evaluate

__all__ = ["KNEE_FACTOR", "RatePoint", "SearchPlan", "SweepResult", "bracket", "find_knee", "format_table",
           "knee_metric", "next_rate", "rate_point", "result_of", "search"]

KNEE_FACTOR = 2.0
LATENCIES = ("ttft_ms", "itl_ms", "e2e_ms")
QUANTILES = ("p50", "p95", "p99")


@dataclass(frozen=True)
class RatePoint:
    """One open-loop run at one offered rate."""

    offered_rps: float
    passed: bool
    reason: str = ""                         # why it missed ("" when it passed)
    sent_rps: float | None = None
    achieved_rps: float | None = None        # completed requests per second of the arrival window
    requests: int = 0
    error_rate: float | None = None
    goodput_rps: float | None = None
    saturated: bool = False                  # requests in flight kept growing
    latency_ms: dict[str, dict[str, float | None]] = field(default_factory=dict)   # ttft_ms -> p50/p95/p99
    run_dir: str = ""
    scenario: str = ""                       # --sweep: the step's scenario name in the run's records
    inconclusive: bool = False               # no request completed (and no saturation): not judged

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RatePoint:
        names = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in data.items() if k in names})


@dataclass(frozen=True)
class SearchPlan:
    tolerance: float = 0.10          # stop when (first miss - last pass) / last pass <= tolerance
    max_runs: int = 10               # open-loop runs at most
    growth: float = 1.5              # factor up while every rate passes (down: growth ** 2)
    min_rps: float = 0.05            # below this rate the search gives up going down
    max_rps: float = 10_000.0        # above this rate the search gives up going up
    confirm_miss: bool = True        # run the closing bracket's first miss again (unless it saturated)

    def __post_init__(self) -> None:
        if not 0 < self.tolerance < 1:
            raise ValueError(f"tolerance must be within (0, 1), got {self.tolerance}")
        if self.max_runs < 2 or self.growth <= 1 or not 0 < self.min_rps < self.max_rps:
            raise ValueError("max_runs >= 2, growth > 1 and 0 < min_rps < max_rps are required")


@dataclass(frozen=True)
class SweepResult:
    points: list[RatePoint]
    capacity_rps: float | None       # the highest rate that passed below every miss; None: none passed
    bracket_rps: tuple[float, float | None]   # [last pass (0: none), first miss (None: none)]
    converged: bool                  # the bracket is within the tolerance
    stopped: str                     # why the search stopped
    knee_rps: float | None
    knee_metric: tuple[str, str] = ("ttft_ms", "p95")

    def to_dict(self) -> dict[str, Any]:
        return {"capacity_rps": self.capacity_rps, "bracket_rps": list(self.bracket_rps),
                "converged": self.converged, "stopped": self.stopped, "knee_rps": self.knee_rps,
                "knee_metric": _metric_name(self.knee_metric),
                "rates": [p.to_dict() for p in sorted(self.points, key=lambda p: p.offered_rps)]}


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def rate_point(offered_rps: float, summary: dict[str, Any], slos: Sequence[SLO], *,
               max_error_rate: float = 0.05, run_dir: str = "") -> RatePoint:
    """One run's summary.json -> a :class:`RatePoint` (see module docstring for when it misses)."""
    total = summary.get("total") or {}
    loop = (summary.get("l2") or {}).get("open_loop") or {}
    latency = {name: {q: _num((total.get(name) or {}).get(q)) for q in QUANTILES} for name in LATENCIES}
    error_rate = _num(total.get("error_rate"))
    saturated = loop.get("target_kept_up") is False
    reasons = [v.message for v in evaluate(slos, summary, quality="skip") if v.failed]
    inconclusive = False
    if not total.get("requests"):
        inconclusive = not saturated
        reasons.append("no request completed" + (" (inconclusive: the run was shorter than an answer, or "
                                                 "nothing was sent)" if inconclusive else ""))
    if error_rate is not None and error_rate > max_error_rate:
        reasons.append(f"errors climbed: {100 * error_rate:.1f} % > {100 * max_error_rate:g} %")
    if saturated:
        reasons.append("the target saturated: requests in flight kept growing")
    if loop.get("generator_kept_up") is False:
        reasons.append("the load generator could not keep up with the offered rate")
    return RatePoint(offered_rps=offered_rps, passed=not reasons, reason="; ".join(reasons),
                     sent_rps=_num(loop.get("sent_rps")), achieved_rps=_num(loop.get("completed_rps")),
                     requests=int(total.get("requests") or 0), error_rate=error_rate,
                     goodput_rps=_num(total.get("goodput_rps")), saturated=saturated, latency_ms=latency,
                     run_dir=run_dir, inconclusive=inconclusive)


def _passed_rates(points: Sequence[RatePoint]) -> set[float]:
    return {p.offered_rps for p in points if p.passed}


def bracket(points: Sequence[RatePoint]) -> tuple[float | None, float | None]:
    """(highest pass below every miss, lowest miss); None where there is none. A rate run twice
    passes when either run passed (see :func:`next_rate`'s confirmation)."""
    passed = _passed_rates(points)
    misses = [p.offered_rps for p in points
              if not p.passed and not p.inconclusive and p.offered_rps not in passed]
    high = min(misses) if misses else None
    passes = [rate for rate in passed if high is None or rate < high]
    return (max(passes) if passes else None), high


def _unconfirmed(points: Sequence[RatePoint], rate: float) -> bool:
    """A miss at ``rate`` that was run once and did not saturate: it may be noise."""
    runs = [p for p in points if p.offered_rps == rate]
    return len(runs) == 1 and not runs[0].saturated


def next_rate(points: Sequence[RatePoint], start_rps: float, plan: SearchPlan = SearchPlan(),
              upper_hint_rps: float | None = None) -> tuple[float | None, str]:
    """The next rate to run, or (None, why the search is done). ``upper_hint_rps``: the probe's
    throughput, above which the target is not expected to keep up (the first climb goes to just
    above it)."""
    if points and points[-1].inconclusive:
        return None, f"inconclusive at {points[-1].offered_rps:.3g}/s: no request completed"
    low, high = bracket(points)
    if low is not None and high is not None and (high - low) / low <= plan.tolerance:
        if plan.confirm_miss and _unconfirmed(points, high) and len(points) < plan.max_runs:
            return high, "confirming the first miss"
        return None, f"bracketed within {100 * plan.tolerance:g} %"
    if len(points) >= plan.max_runs:
        return None, f"{plan.max_runs} runs done before the bracket closed to {100 * plan.tolerance:g} %"
    if not points:
        return start_rps, ""
    if low is None:
        assert high is not None
        rate = high / plan.growth ** 2
        if rate < plan.min_rps:
            return None, f"every rate missed, down to {high:.3g}/s"
        return rate, ""
    if high is None:
        rate = low * plan.growth
        if upper_hint_rps and low < upper_hint_rps:
            rate = min(rate, upper_hint_rps * (1 + plan.tolerance))
        if rate > plan.max_rps:
            return None, f"every rate passed, up to {low:.3g}/s"
        return rate, ""
    return math.sqrt(low * high), ""


def knee_metric(slos: Sequence[SLO]) -> tuple[str, str]:
    """The latency the knee follows: the first SLO clause on a TTFT / ITL / E2E p50/p95/p99, else TTFT p95."""
    for slo in slos:
        base, _, stat = slo.metric.rpartition("_")
        if f"{base}_ms" in LATENCIES and stat in QUANTILES:
            return f"{base}_ms", stat
    return "ttft_ms", "p95"


def _metric_name(metric: tuple[str, str]) -> str:
    return f"{metric[0].removesuffix('_ms')}_{metric[1]}"


def find_knee(points: Sequence[RatePoint], factor: float = KNEE_FACTOR,
              metric: tuple[str, str] = ("ttft_ms", "p95")) -> float | None:
    """The highest rate whose ``metric`` is within ``factor`` x the lowest rate's, every lower one too."""
    name, stat = metric
    ordered = sorted(points, key=lambda p: p.offered_rps)
    if not ordered:
        return None
    base = ordered[0].latency_ms.get(name, {}).get(stat)
    if base is None:
        return None
    knee = None
    for point in ordered:
        value = point.latency_ms.get(name, {}).get(stat)
        if value is None or value > factor * base:
            break
        knee = point.offered_rps
    return knee


def search(measure: Callable[[float], RatePoint], start_rps: float, plan: SearchPlan = SearchPlan(),
           upper_hint_rps: float | None = None, knee_on: tuple[str, str] = ("ttft_ms", "p95")) -> SweepResult:
    """Run ``measure(rate)`` at the rates :func:`next_rate` picks until it says stop."""
    if not start_rps > 0:
        raise ValueError(f"the start rate must be > 0, got {start_rps}")
    points: list[RatePoint] = []
    while True:
        rate, stopped = next_rate(points, start_rps, plan, upper_hint_rps)
        if rate is None:
            break
        points.append(measure(rate))
    return result_of(points, plan, stopped, knee_on)


def result_of(points: Sequence[RatePoint], plan: SearchPlan, stopped: str,
              knee_on: tuple[str, str] = ("ttft_ms", "p95")) -> SweepResult:
    """The :class:`SweepResult` of the points so far (a finished search, or one still running)."""
    low, high = bracket(points)
    converged = low is not None and high is not None and (high - low) / low <= plan.tolerance
    return SweepResult(list(points), low, (low or 0.0, high), converged, stopped,
                       find_knee(points, metric=knee_on), knee_on)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def _rps(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _verdict(point: RatePoint) -> str:
    return "meets" if point.passed else "n/a" if point.inconclusive else "MISSES"


def format_table(result: SweepResult, slo_text: str) -> list[str]:
    """The console table: one line per rate (ascending), then capacity, bracket and knee."""
    lines = [f"capacity sweep (SLO: {slo_text}; rates in requests/s, latencies in ms)",
             " offered achieved  reqs  TTFT p50   p95   p99  ITL p50   p95   p99  E2E p50   p95   p99"
             "  goodput  err%  SLO"]
    for p in sorted(result.points, key=lambda p: p.offered_rps):
        cells = [f"{_ms(p.latency_ms.get(name, {}).get(q)):>5}" for name in LATENCIES for q in QUANTILES]
        err = "-" if p.error_rate is None else f"{100 * p.error_rate:.1f}"
        lines.append(f"{p.offered_rps:8.2f} {_rps(p.achieved_rps):>8} {p.requests:5d}    "
                     + " ".join(cells[0:3]) + "    " + " ".join(cells[3:6]) + "    " + " ".join(cells[6:9])
                     + f" {_rps(p.goodput_rps):>8} {err:>5}  {_verdict(p)}")
    low, high = result.bracket_rps
    if result.capacity_rps is None and high is None:
        lines.append(f"capacity: not measured - no rate was judged ({result.stopped})")
    elif result.capacity_rps is None:
        lines.append(f"capacity: below {_rps(high)}/s - no rate met the SLO ({result.stopped})")
    else:
        upper = f"{high:.2f}" if high is not None else "not found"
        lines.append(f"capacity: {result.capacity_rps:.2f} requests/s, bracket [{low:.2f}, {upper}] "
                     f"({'converged' if result.converged else 'NOT converged'}: {result.stopped})")
    lines.append(f"knee: {_rps(result.knee_rps)}/s ({_metric_name(result.knee_metric)} within "
                 f"{KNEE_FACTOR:g}x the lowest rate's)")
    for p in sorted(result.points, key=lambda p: p.offered_rps):
        if p.reason:
            lines.append(f"  {p.offered_rps:.2f}/s: {p.reason}")
    return lines

"""L2 aggregates beyond LLMStats: HTTP versions, connect times, Retry-After waits, open-loop facts.

LLMStats (measure/stats.py) already counts, per level:scenario, reused / new connections and
reconnects after an idle close. :class:`GatewayStats` adds what only L2 asks for, per scenario:
the HTTP version of each request, the connect time of each new connection, the waits honoured
after ``Retry-After``, and for the open loop the latency *from the intended arrival*
(``queue_ms + ttft_ms``, ``queue_ms + e2e_ms``) next to the usual TTFT/E2E from the send. Every
open-loop dispatcher also files one :class:`DispatcherReport` when it stops.

Distributed runs ship deltas like LLMStats: ``take_wire()`` on workers in ``report_to_master``,
``merge_wire()`` on the master; histograms and counts merge exactly, dispatcher reports are
collected. The report builders at the bottom are pure functions of these aggregates and of
LLMStats' group summaries.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from fourfold.levels.arrivals import GapStats
from fourfold.levels.ladder import parse_step_scenario
from fourfold.measure.histogram import LogHistogram
from fourfold.measure.metrics import PHASES
from fourfold.measure.record import RequestRecord

SWEEP_BASE = "sweep"             # --sweep: each step's records are "sweep@<rate>/s" (levels.sweep_live)

QUEUE_P99_WARN_MS = 100.0        # open loop: client queueing above this means the generator fell behind
KEPT_UP_RATIO = 0.95             # sent / scheduled arrivals below this: the generator could not keep up
# The target fell behind when the requests in flight keep growing: their mean over the last quarter
# of the window above this factor x the second quarter's, plus slack (a stable system levels off
# once its first requests complete; a saturated one's backlog grows all run long).
BACKLOG_GROWTH, BACKLOG_SLACK = 1.5, 3.0


@dataclass
class ScenarioFacts:
    http_versions: dict[str, int] = field(default_factory=dict)
    connect_ms: LogHistogram = field(default_factory=LogHistogram)
    ttft_from_arrival_ms: LogHistogram = field(default_factory=LogHistogram)
    e2e_from_arrival_ms: LogHistogram = field(default_factory=LogHistogram)
    retry_after_waits: int = 0
    retry_after_wait_s: float = 0.0
    # "new.dns_ms", "reused.wait_ms", ...: the request phases (measure.metrics.PHASES) by connection kind
    phases: dict[str, LogHistogram] = field(default_factory=dict)

    def add_phases(self, record: RequestRecord) -> None:
        kind = "reused" if record.conn_reused else "new"
        for name in PHASES:
            value = record.extra.get(name)
            if isinstance(value, (int, float)):
                key = f"{kind}.{name}"
                hist = self.phases.get(key)
                if hist is None:
                    hist = self.phases[key] = LogHistogram()
                hist.add(float(value))

    def merge(self, other: ScenarioFacts) -> None:
        for version, n in other.http_versions.items():
            self.http_versions[version] = self.http_versions.get(version, 0) + n
        self.connect_ms.merge(other.connect_ms)
        self.ttft_from_arrival_ms.merge(other.ttft_from_arrival_ms)
        self.e2e_from_arrival_ms.merge(other.e2e_from_arrival_ms)
        self.retry_after_waits += other.retry_after_waits
        self.retry_after_wait_s += other.retry_after_wait_s
        for key, hist in other.phases.items():
            self.phases.setdefault(key, LogHistogram()).merge(hist)

    def to_wire(self) -> dict[str, Any]:
        return {"v": dict(self.http_versions), "c": self.connect_ms.to_wire(),
                "ta": self.ttft_from_arrival_ms.to_wire(), "ea": self.e2e_from_arrival_ms.to_wire(),
                "ra": [self.retry_after_waits, self.retry_after_wait_s],
                "p": {key: hist.to_wire() for key, hist in self.phases.items()}}

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> ScenarioFacts:
        waits, wait_s = data.get("ra", [0, 0.0])
        return cls({str(k): int(v) for k, v in data.get("v", {}).items()},
                   LogHistogram.from_wire(data["c"]), LogHistogram.from_wire(data["ta"]),
                   LogHistogram.from_wire(data["ea"]), int(waits), float(wait_s),
                   {str(k): LogHistogram.from_wire(v) for k, v in (data.get("p") or {}).items()})


@dataclass
class DispatcherReport:
    """What one open-loop dispatcher did, filed when it stops (counts over its whole window)."""

    rate_rps: float = 0.0            # this dispatcher's share of --arrival-rate
    window_s: float = 0.0            # first intended arrival's origin -> stop
    arrivals: int = 0                # intended arrivals in the window (including those never sent)
    sent: int = 0                    # requests started (a record each once on the wire; cancelled if cut)
    completed: int = 0               # responses that ended before the stop
    dropped: int = 0                 # --max-in-flight-policy drop: arrivals discarded at the cap
    waited: int = 0                  # --max-in-flight-policy wait: arrivals that found the cap reached
    in_flight_max: int = 0           # arrivals dispatched and not finished, at most
    in_flight_at_stop: int = 0       # sent - completed: recorded as cancelled
    in_flight_q2: float = 0.0        # mean requests in flight (sampled at each arrival), 2nd quarter
    in_flight_q4: float = 0.0        # ... and last quarter of the window
    # Dispatched, but the stop came before their greenlet ran (Locust's stop sequence blocks the
    # event loop for a moment, so the last arrivals can fall due while nothing runs): never sent.
    unstarted_at_stop: int = 0
    send_gaps: GapStats = field(default_factory=GapStats)
    scheduled_gaps: GapStats = field(default_factory=GapStats)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["send_gaps"] = self.send_gaps.to_wire()
        data["scheduled_gaps"] = self.scheduled_gaps.to_wire()
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DispatcherReport:
        values = dict(data)
        values["send_gaps"] = GapStats.from_wire(values.get("send_gaps") or [0, 0.0, 0.0])
        values["scheduled_gaps"] = GapStats.from_wire(values.get("scheduled_gaps") or [0, 0.0, 0.0])
        return cls(**{k: v for k, v in values.items() if k in _REPORT_FIELDS})


_REPORT_FIELDS = frozenset(DispatcherReport.__dataclass_fields__)


def quarter_means(samples: list[tuple[float, int]], window_s: float) -> tuple[float, float]:
    """Mean of the values sampled in the 2nd and in the 4th quarter of ``[0, window_s]`` (pure)."""
    def mean(lo: float, hi: float) -> float:
        values = [n for t, n in samples if lo <= t < hi]
        return sum(values) / len(values) if values else 0.0

    quarter = window_s / 4
    return mean(quarter, 2 * quarter), mean(3 * quarter, window_s + 1e-9)


class GatewayStats:
    def __init__(self) -> None:
        self.scenarios: dict[str, ScenarioFacts] = {}
        self.dispatchers: list[DispatcherReport] = []

    def facts(self, scenario: str) -> ScenarioFacts:
        found = self.scenarios.get(scenario)
        if found is None:
            found = self.scenarios[scenario] = ScenarioFacts()
        return found

    def add(self, record: RequestRecord, from_arrival: bool = False) -> None:
        """One measured (not warm-up, not cancelled) record."""
        facts = self.facts(record.scenario)
        version = record.http_version or "unknown"
        facts.http_versions[version] = facts.http_versions.get(version, 0) + 1
        if record.connect_ms is not None:
            facts.connect_ms.add(record.connect_ms)
        facts.add_phases(record)
        if from_arrival and record.ok:
            if record.ttft_ms is not None:
                facts.ttft_from_arrival_ms.add(record.queue_ms + record.ttft_ms)
            if record.e2e_ms is not None:
                facts.e2e_from_arrival_ms.add(record.queue_ms + record.e2e_ms)

    def add_retry_after_wait(self, scenario: str, wait_s: float) -> None:
        facts = self.facts(scenario)
        facts.retry_after_waits += 1
        facts.retry_after_wait_s += wait_s

    # ---- worker -> master ----
    def take_wire(self) -> dict[str, Any]:
        wire = {"s": {name: facts.to_wire() for name, facts in self.scenarios.items()},
                "d": [report.to_dict() for report in self.dispatchers]}
        self.scenarios, self.dispatchers = {}, []
        return wire

    def merge_wire(self, data: dict[str, Any]) -> None:
        for name, facts in (data.get("s") or {}).items():
            self.facts(name).merge(ScenarioFacts.from_wire(facts))
        self.dispatchers.extend(DispatcherReport.from_dict(d) for d in data.get("d") or ())


# ---- reports (pure) ----
def _hist_summary(hist: LogHistogram) -> dict[str, Any]:
    p50, p95, p99 = hist.quantiles((0.5, 0.95, 0.99))
    return {"count": hist.count, "mean": hist.mean, "p50": p50, "p95": p95, "p99": p99, "max": hist.max}


def base_of(scenario: str) -> str:
    """``ladder@32`` -> ``ladder``, ``sweep@12.5/s`` -> ``sweep``: connection facts are reported per
    ladder or sweep, not per step."""
    parsed = parse_step_scenario(scenario)
    if parsed:
        return parsed[0]
    return SWEEP_BASE if scenario.startswith(f"{SWEEP_BASE}@") else scenario


def connections_report(groups: list[dict[str, Any]], stats: GatewayStats) -> dict[str, dict[str, Any]]:
    """Per scenario base: requests, HTTP versions, reuse, new connections, reconnects, connect time."""
    out: dict[str, dict[str, Any]] = {}
    merged: dict[str, ScenarioFacts] = {}
    for scenario, facts in stats.scenarios.items():
        merged.setdefault(base_of(scenario), ScenarioFacts()).merge(facts)
    for group in groups:
        base = base_of(group["scenario"])
        row = out.setdefault(base, {"requests": 0, "conn_reused": 0, "conn_new": 0, "conn_reconnects": 0})
        for key in row:
            row[key] += group.get(key, 0) or 0
    for base, row in out.items():
        facts = merged.get(base, ScenarioFacts())
        known = row["conn_reused"] + row["conn_new"]
        row["conn_reuse"] = row["conn_reused"] / known if known else None
        row["http_versions"] = dict(sorted(facts.http_versions.items()))
        row["connect_ms"] = _hist_summary(facts.connect_ms)
        row["phases_ms"] = phases_report(facts)
        if facts.retry_after_waits:
            row["retry_after_waits"] = facts.retry_after_waits
            row["retry_after_wait_s"] = round(facts.retry_after_wait_s, 3)
    return dict(sorted(out.items()))


def phases_report(facts: ScenarioFacts) -> dict[str, dict[str, Any]]:
    """``{"new": {"dns_ms": {...}, ...}, "reused": {"send_ms": {...}, ...}}``: each phase seen, by
    connection kind (count, mean, p50, p95, p99, max)."""
    out: dict[str, dict[str, Any]] = {}
    for kind in ("new", "reused"):
        found = {name: _hist_summary(facts.phases[f"{kind}.{name}"]) for name in PHASES
                 if f"{kind}.{name}" in facts.phases and facts.phases[f"{kind}.{name}"].count}
        if found:
            out[kind] = found
    return out


def format_phases(base: str, phases: dict[str, dict[str, Any]]) -> str | None:
    """One console line: each connection kind's phase p50s."""
    parts = []
    for kind, found in phases.items():
        text = ", ".join(f"{name.removesuffix('_ms')} {row['p50']:.2f}" for name, row in found.items())
        parts.append(f"{kind} connections ({next(iter(found.values()))['count']}): {text}")
    return f"L2 request phases {base}, p50 ms: " + "; ".join(parts) if parts else None


def format_connections(report: dict[str, dict[str, Any]]) -> list[str]:
    lines = []
    for base, row in report.items():
        total = sum(row["http_versions"].values()) or 1
        versions = ", ".join(f"{v} {100 * n / total:.0f}%" for v, n in row["http_versions"].items()) or "-"
        reuse = "-" if row["conn_reuse"] is None else f"{100 * row['conn_reuse']:.1f}%"
        connect = row["connect_ms"]
        connect_text = (f"connect p50 {connect['p50']:.2f} ms, max {connect['max']:.2f} ms"
                        if connect["count"] else "no new connections")
        line = (f"L2 connections {base}: {versions}; reuse {reuse} ({row['conn_new']} new, "
                f"{row['conn_reconnects']} reconnects after an idle close); {connect_text}")
        if row.get("retry_after_waits"):
            line += f"; Retry-After honoured {row['retry_after_waits']}x, {row['retry_after_wait_s']:g} s"
        lines.append(line)
        phases = format_phases(base, row.get("phases_ms") or {})
        if phases:
            lines.append(phases)
    return lines


def open_loop_report(reports: list[DispatcherReport], group: dict[str, Any] | None, facts: ScenarioFacts,
                     configured: dict[str, Any]) -> dict[str, Any]:
    """Offered vs achieved, client queueing, and whether the generator (and the target) kept up.

    ``configured``: process, offered_rps (the whole run's --arrival-rate), burstiness,
    max_in_flight, max_in_flight_policy. ``group``: LLMStats' summary of the dispatcher scenario.
    """
    window = max((r.window_s for r in reports), default=0.0)

    def per_second(attr: str) -> float | None:
        rates = [getattr(r, attr) / r.window_s for r in reports if r.window_s > 0]
        return sum(rates) if rates else None

    send_gaps, scheduled_gaps = GapStats(), GapStats()
    for r in reports:
        send_gaps.merge(r.send_gaps)
        scheduled_gaps.merge(r.scheduled_gaps)
    totals = {k: sum(getattr(r, k) for r in reports)
              for k in ("arrivals", "sent", "completed", "dropped", "waited", "in_flight_at_stop",
                        "unstarted_at_stop")}
    queue = (group or {}).get("queue_ms") or {}
    out: dict[str, Any] = {
        **configured, "dispatchers": len(reports), "window_s": window, **totals,
        "in_flight_max": max((r.in_flight_max for r in reports), default=0),
        "scheduled_rps": per_second("arrivals"), "sent_rps": per_second("sent"),
        "completed_rps": per_second("completed"),
        "send_gap_cv": send_gaps.cv, "scheduled_gap_cv": scheduled_gaps.cv,
        "queue_ms": {k: queue.get(k) for k in ("p50", "p95", "p99", "max")},
        "ttft_from_arrival_ms": _hist_summary(facts.ttft_from_arrival_ms),
        "e2e_from_arrival_ms": _hist_summary(facts.e2e_from_arrival_ms),
    }
    warnings = []
    arrivals, sent = totals["arrivals"], totals["sent"]
    queue_p99 = queue.get("p99")
    behind = []
    # arrivals dispatched but cut by the stop before their greenlet ran are Locust's stop, not a lag
    if arrivals and sent + totals["unstarted_at_stop"] < KEPT_UP_RATIO * arrivals:
        behind.append(f"sent {sent} of {arrivals} scheduled arrivals ({100 * sent / arrivals:.0f}%)")
    if totals["dropped"]:
        behind.append(f"dropped {totals['dropped']} arrivals at --max-in-flight "
                      f"{configured.get('max_in_flight')}")
    if totals["waited"]:
        behind.append(f"{totals['waited']} arrivals waited for a free slot (--max-in-flight "
                      f"{configured.get('max_in_flight')} reached)")
    if queue_p99 is not None and queue_p99 > QUEUE_P99_WARN_MS:
        behind.append(f"client queue p99 {queue_p99:.0f} ms > {QUEUE_P99_WARN_MS:g} ms")
    out["generator_kept_up"] = not behind and bool(reports)
    if behind:
        warnings.append("the load generator could NOT keep up with the offered rate: " + "; ".join(behind)
                        + ". Latency is still counted from each intended arrival (queue_ms).")
    q2 = sum(r.in_flight_q2 for r in reports)
    q4 = sum(r.in_flight_q4 for r in reports)
    out["in_flight_mean_q2"], out["in_flight_mean_q4"] = q2, q4
    out["target_kept_up"] = q4 <= BACKLOG_GROWTH * q2 + BACKLOG_SLACK
    if not out["target_kept_up"]:
        warnings.append(f"the target fell behind: requests in flight kept growing (mean {q2:.1f} in the "
                        f"second quarter of the run, {q4:.1f} in the last); completed {totals['completed']} "
                        f"of {sent} sent")
    out["warnings"] = warnings
    return out


def format_open_loop(report: dict[str, Any]) -> list[str]:
    def rate(value: float | None) -> str:
        return "-" if value is None else f"{value:.2f}/s"

    def ms(value: float | None) -> str:
        return "-" if value is None else f"{value:.1f}"

    def cv(value: float | None) -> str:
        return "-" if value is None else f"{value:.2f}"

    burst = f", burstiness {report['burstiness']:g}" if report.get("process") == "gamma" else ""
    queue, ttft_a = report["queue_ms"], report["ttft_from_arrival_ms"]
    lines = [
        f"L2 open loop: {report.get('process')} arrivals{burst}, offered {rate(report.get('offered_rps'))} "
        f"over {report['dispatchers']} dispatcher(s), max in flight {report.get('max_in_flight')} "
        f"({report.get('max_in_flight_policy')})",
        f"  {report['arrivals']} arrivals in {report['window_s']:.1f} s: scheduled "
        f"{rate(report['scheduled_rps'])}, sent {rate(report['sent_rps'])}, completed "
        f"{rate(report['completed_rps'])}; gap CV scheduled {cv(report['scheduled_gap_cv'])}, "
        f"sent {cv(report['send_gap_cv'])}"
        + (f"; {report['unstarted_at_stop']} cut by the stop before sending"
           if report['unstarted_at_stop'] else ""),
        f"  client queue (intended arrival -> send) ms p50 {ms(queue['p50'])} p99 {ms(queue['p99'])} "
        f"max {ms(queue['max'])}; in flight max {report['in_flight_max']}; dropped {report['dropped']}, "
        f"waited {report['waited']}; TTFT from arrival p50 {ms(ttft_a['p50'])} p99 {ms(ttft_a['p99'])}",
    ]
    if report["warnings"]:
        lines.extend(f"  WARNING: {w}" for w in report["warnings"])
    else:
        lines.append("  ok: the load generator kept up with the offered rate")
    return lines


__all__ = ["DispatcherReport", "GatewayStats", "ScenarioFacts", "connections_report", "format_connections",
           "format_open_loop", "open_loop_report", "quarter_means"]

"""Session aggregates per A/B variant (pure, mergeable across Locust workers).

Definitions (one per name; ``summary.json`` → ``sessions``; each number is a metric of
:mod:`fourfold.measure.metric_names` shown in ``sessions``, and the report's L4 rows use the same
names, ``completion_rate`` and ``rounds_mean``):

- a session *ends* ``completed`` (every goal fact covered), ``max_turns`` or ``abandoned``
  (by ``ttft``, ``e2e`` or ``error``); a session still going when the run stopped is ``cut``
  and in no rate or mean (long sessions are the likeliest to be cut: prefer
  ``--sessions-per-user`` or a run long enough that ``cut`` is small).
- ``rounds``: user turns (requests) of an ended session; ``rounds_mean`` over ended sessions,
  ``rounds_to_completion_mean`` over completed ones (the article's "mean interaction rounds").
- ``completion_rate`` = completed / ended; ``abandonment_rate`` = abandoned / ended;
  ``max_turns_rate`` = max_turns / ended.
- ``duration_ms``: first request sent → last response ended, think times included.
- ``tool_calls_per_session``: the tool calls of the ended agentic sessions (:mod:`fourfold.levels.l4_agent`)
  per such session; None without one.

Rounds are exact counts per value (exact means after any merge); durations are log-bucketed
histograms (≤ 1 % relative error). Workers ``take_wire()`` in ``report_to_master``; the master
``merge_wire``s.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fourfold.measure.histogram import LogHistogram
from fourfold.measure.metrics import ratio

COUNTERS = ("started", "ended", "completed", "max_turns", "abandoned", "abandoned_ttft", "abandoned_e2e",
            "abandoned_error", "cut", "agent_ended", "tool_calls")
TOTAL = "total"


@dataclass
class VariantSessions:
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNTERS, 0))
    rounds: dict[int, int] = field(default_factory=dict)
    rounds_completed: dict[int, int] = field(default_factory=dict)
    duration_ms: LogHistogram = field(default_factory=LogHistogram)

    def started(self) -> None:
        self.counts["started"] += 1

    def cut(self) -> None:
        self.counts["cut"] += 1

    def ended(self, outcome: str, rounds: int, duration_ms: float, abandon_reason: str = "",
              tool_calls: int | None = None) -> None:
        c = self.counts
        c["ended"] += 1
        if tool_calls is not None:           # an agentic session (levels.l4_agent): the calls it made
            c["agent_ended"] += 1
            c["tool_calls"] += tool_calls
        c[outcome] += 1
        if outcome == "abandoned":
            c[f"abandoned_{abandon_reason or 'error'}"] += 1
        self.rounds[rounds] = self.rounds.get(rounds, 0) + 1
        if outcome == "completed":
            self.rounds_completed[rounds] = self.rounds_completed.get(rounds, 0) + 1
        self.duration_ms.add(max(duration_ms, 0.0))

    def merge(self, other: VariantSessions) -> None:
        for key, n in other.counts.items():
            self.counts[key] = self.counts.get(key, 0) + n
        for mine, theirs in ((self.rounds, other.rounds), (self.rounds_completed, other.rounds_completed)):
            for rounds, n in theirs.items():
                mine[rounds] = mine.get(rounds, 0) + n
        self.duration_ms.merge(other.duration_ms)

    def to_wire(self) -> dict[str, Any]:
        return {"c": {k: v for k, v in self.counts.items() if v},
                "r": [[k, v] for k, v in self.rounds.items()],
                "rc": [[k, v] for k, v in self.rounds_completed.items()],
                "d": self.duration_ms.to_wire()}

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> VariantSessions:
        out = cls()
        out.counts.update({k: int(v) for k, v in data.get("c", {}).items()})
        out.rounds = {int(k): int(v) for k, v in data.get("r", [])}
        out.rounds_completed = {int(k): int(v) for k, v in data.get("rc", [])}
        if data.get("d"):
            out.duration_ms = LogHistogram.from_wire(data["d"])
        return out

    def summary(self) -> dict[str, Any]:
        c = dict(self.counts)
        ended = c["ended"]
        hist = self.duration_ms
        p50, p95 = hist.quantiles((0.5, 0.95))
        return {
            "started": c["started"], "ended": ended, "completed": c["completed"], "max_turns": c["max_turns"],
            "abandoned": c["abandoned"],
            "abandoned_by": {reason: c[f"abandoned_{reason}"] for reason in ("ttft", "e2e", "error")},
            "cut": c["cut"],
            "completion_rate": ratio(c["completed"], ended),
            "abandonment_rate": ratio(c["abandoned"], ended),
            "max_turns_rate": ratio(c["max_turns"], ended),
            "rounds_mean": mean_of_counts(self.rounds),
            "rounds_to_completion_mean": mean_of_counts(self.rounds_completed),
            "tool_calls_per_session": ratio(c["tool_calls"], c["agent_ended"]),
            "rounds": {str(k): v for k, v in sorted(self.rounds.items())},
            "rounds_to_completion": {str(k): v for k, v in sorted(self.rounds_completed.items())},
            "duration_ms": {"count": hist.count, "mean": hist.mean, "p50": p50, "p95": p95, "max": hist.max},
        }


def mean_of_counts(counts: dict[int, int]) -> float | None:
    """Mean of values given as {value: how many}; None when empty."""
    n = sum(counts.values())
    return sum(k * v for k, v in counts.items()) / n if n else None


class SessionStats:
    """VariantSessions per variant ("" when no A/B split), with worker -> master shipping."""

    def __init__(self) -> None:
        self.variants: dict[str, VariantSessions] = {}

    def variant(self, name: str) -> VariantSessions:
        found = self.variants.get(name)
        if found is None:
            found = self.variants[name] = VariantSessions()
        return found

    def total(self) -> VariantSessions:
        total = VariantSessions()
        for one in self.variants.values():
            total.merge(one)
        return total

    def take_wire(self) -> dict[str, Any]:
        wire = {name: one.to_wire() for name, one in self.variants.items()}
        self.variants = {}
        return wire

    def merge_wire(self, data: dict[str, Any]) -> None:
        for name, one in (data or {}).items():
            self.variant(name).merge(VariantSessions.from_wire(one))

    def summary(self) -> dict[str, Any]:
        """``{"by_variant": {"A": ..., "B": ...}, "total": ...}`` (by_variant empty without a split)."""
        return {"by_variant": {name: one.summary() for name, one in sorted(self.variants.items()) if name},
                TOTAL: self.total().summary()}


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}"


def _num(value: float | None, scale: float = 1.0) -> str:
    return "-" if value is None else f"{value / scale:.{1 if scale != 1.0 else 2}f}"


def format_sessions(summary: dict[str, Any]) -> str:
    """The end-of-run session table: one line per variant and the total."""
    rows = [(name, block) for name, block in summary.get("by_variant", {}).items()]
    rows.append((TOTAL, summary[TOTAL]))
    header = (f"{'variant':<8} {'sessions':>8} {'complete%':>9} {'abandon%':>8} {'maxturn%':>8} "
              f"{'rounds':>6} {'to-done':>7} {'dur p50 s':>9} {'p95 s':>6} {'cut':>4}")
    lines = ["fourfold sessions (rounds = user turns; complete = every goal fact covered; "
             "to-done = mean rounds of completed sessions)", header]
    for name, b in rows:
        dur = b["duration_ms"]
        lines.append(
            f"{name:<8} {b['ended']:>8} {_pct(b['completion_rate']):>9} {_pct(b['abandonment_rate']):>8} "
            f"{_pct(b['max_turns_rate']):>8} {_num(b['rounds_mean']):>6} "
            f"{_num(b['rounds_to_completion_mean']):>7} "
            f"{_num(dur['p50'], 1000.0):>9} {_num(dur['p95'], 1000.0):>6} {b['cut']:>4}")
    return "\n".join(lines)


__all__ = ["COUNTERS", "SessionStats", "VariantSessions", "format_sessions", "mean_of_counts"]

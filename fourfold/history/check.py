"""A run against the recent past, and a metric across releases: ``history check`` and ``history show``.

**check.** For each group of the run, the baseline is every run of the last ``N`` releases that ran
the same group (releases ordered by when their latest run ran; the run itself left out). Each
side is built from the runs' kept figures (:mod:`fourfold.history.entry`) by the comparison's own
code: :func:`fourfold.reports.compare.row_of_spreads` (runs as replicates: a lone new run borrows
the releases' between-run variance), the rows shown by the same rules, corrected by
:func:`fourfold.reports.compare.adjust` (Holm over the gated rows). The releases' variance between
each other is part of that between-run variance: "worse" means worse than the recent past varies,
not merely different from the last release. With one earlier run there is no between-run variance
and no verdict, as in ``fourfold compare``.

**show.** A metric's value per release: the mean over the release's runs, with the interval
:func:`fourfold.reports.replication.combine` gives it (runs as replicates; one run: its within-run
block-bootstrap interval, a lower bound on the uncertainty). A quantile no row keeps
(``ttft_p90``) comes from the kept histograms (within 0.5 %), without an interval.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from fourfold.errors import UsageError
from fourfold.history.entry import HISTOGRAMS, Entry
from fourfold.history.store import RunRow, Store
from fourfold.measure.histogram import LogHistogram
from fourfold.reports.comparability import differences, render_lines
from fourfold.reports.compare import (
    WORSE,
    CompareSettings,
    GroupSample,
    Metric,
    Row,
    adjust,
    hidden,
    row_of_spreads,
)
from fourfold.reports.replication import Spread, combine
from fourfold.reports.verdict import t_quantile

__all__ = ["DEFAULT_LAST", "Check", "Point", "check_entry", "trend", "worse_rows"]

DEFAULT_LAST = 5
_QUANTILE = re.compile(r"^(?P<name>[a-z]+)_p(?P<pct>\d+(?:\.\d+)?)$")


@dataclass
class Check:
    rows: list[Row] = field(default_factory=list)
    baselines: dict[str, list[str]] = field(default_factory=dict)     # group -> its baseline releases
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Point:
    """A release's value of one metric in one group."""

    release: str
    runs: int
    value: float
    low: float | None
    high: float | None
    why: str = ""                 # what the interval is, or why there is none
    version: str | None = None    # fourfold's version of the release's latest run
    added_at: str = ""


def _no_side(g: GroupSample, *_: Any) -> None:
    raise AssertionError("a history row is built from kept figures, never from records")


def metric_of(figure: dict[str, Any]) -> Metric:
    return Metric(figure["metric"], figure["label"], figure["unit"], figure["better"], _no_side,
                  descriptive=bool(figure["descriptive"]))


def spread_of(figure: dict[str, Any]) -> Spread:
    value = figure["value"]
    return Spread(None if value is None else float(value), int(figure["n"]), too_few=figure["too_few"],
                  blocks=int(figure["blocks"]), no_interval=figure["no_interval"],
                  kept_var=None if figure["within_var"] is None else float(figure["within_var"]))


def recent_runs(store: Store, group: str, last: int, leave_out: str = "") -> tuple[list[RunRow], list[str]]:
    """The runs of ``group`` in its ``last`` most recent releases (``leave_out``: a run id), and those
    releases, the most recent first."""
    runs = [r for r in store.runs(group=group) if r.run_id != leave_out]
    releases = list(dict.fromkeys(r.release for r in reversed(runs)))[:last]
    return [r for r in runs if r.release in releases], releases


def check_entry(store: Store, entry: Entry, settings: CompareSettings, last: int = DEFAULT_LAST) -> Check:
    """The run of ``entry`` against the last ``last`` releases, group by group (module docstring)."""
    out = Check()
    rows: list[Row] = []
    stored_groups = store.groups()
    for group, info in entry.groups.items():
        runs, releases = recent_runs(store, group, last, leave_out=entry.run["run_id"])
        if not runs:
            out.notes.append(f"{group}: no earlier release in the history ran it; nothing to check against")
            continue
        out.baselines[group] = releases
        flags = frozenset(info["flags"]).union(*(stored_groups.get((r.id, group), (frozenset(), 0))[0]
                                                 for r in runs))
        kept: dict[str, list[dict[str, Any]]] = {}
        for figure in store.figures(group, [r.id for r in runs]):
            kept.setdefault(figure["metric"], []).append(figure)
        mine = {f["metric"]: f for f in entry.figures if f["grp"] == group}
        for key in dict.fromkeys([*mine, *kept]):
            if hidden(key, flags):
                continue
            spreads_b = [spread_of(f) for f in kept.get(key, [])]
            spreads_c = [spread_of(mine[key])] if key in mine else []
            metric = metric_of(mine.get(key) or kept[key][0])
            row = row_of_spreads(group, metric, spreads_b, spreads_c, settings)
            if row is not None:
                rows.append(row)
        metas = [store.blobs(r.id)[0] for r in runs]
        out.notes += [f"{group}: {line}" for line in render_lines(differences(metas, [entry.run["meta"]]))]
    out.rows = adjust(rows, settings.alpha)
    return out


def worse_rows(rows: Sequence[Row]) -> list[Row]:
    """The gated rows whose verdict is worse (after Holm): what fails ``history check``."""
    return [r for r in rows if r.gated and r.verdict == WORSE]


def _interval(spreads: list[Spread], alpha: float) -> tuple[float, float | None, float | None, str]:
    side = combine(spreads)
    if side is None:
        return math.nan, None, None, "no value"
    if side.var is None:
        why = next((s.too_few or s.no_interval for s in spreads if s.too_few or s.no_interval), "")
        return side.value, None, None, why or "no interval (too few blocks of requests)"
    half = t_quantile(1 - alpha / 2, side.df) * math.sqrt(side.var) if side.df > 0 else math.inf
    why = (f"{side.runs} runs" if side.runs > 1 else "1 run: within-run interval (a lower bound)")
    return side.value, side.value - half, side.value + half, why


def _quantile_of(wire: dict[str, Any], q: float) -> float | None:
    return LogHistogram.from_wire(wire).quantile(q)


def trend(store: Store, metric: str, *, level: str | None = None, scenario: str | None = None,
          last: int | None = None, alpha: float = 0.05) -> dict[str, list[Point]]:
    """group -> the metric's points, release by release in the order they ran (module docstring)."""
    runs = store.runs()
    groups = sorted({g for (_, g) in store.groups()})
    groups = [g for g in groups if (level is None or g.split(":", 1)[0] == level)
              and (scenario is None or g.split(":", 1)[-1].split("@", 1)[0] == scenario)]
    quantile = _QUANTILE.match(metric)
    from_histograms = quantile is not None and quantile["name"] in HISTOGRAMS
    out: dict[str, list[Point]] = {}
    stored_groups = store.groups()
    for group in groups:
        members = [r for r in runs if (r.id, group) in stored_groups]
        releases = list(dict.fromkeys(r.release for r in members))
        if last:
            releases = releases[-last:]
        figures = {f["run"]: f for f in store.figures(group, [r.id for r in members], metric)}
        if figures and hidden(metric, frozenset().union(*(stored_groups[(r.id, group)][0] for r in members))):
            continue
        hists = (store.histograms(group, quantile["name"], [r.id for r in members])
                 if not figures and from_histograms and quantile else {})
        points = []
        for release in releases:
            mine = [r for r in members if r.release == release]
            newest = mine[-1]
            if figures:
                spreads = [spread_of(figures[r.id]) for r in mine if r.id in figures]
                if not spreads:
                    continue
                value, low, high, why = _interval(spreads, alpha)
            elif quantile and hists:
                values = [v for v in (_quantile_of(hists[r.id], float(quantile["pct"]) / 100)
                                      for r in mine if r.id in hists) if v is not None]
                if not values:
                    continue
                value, low, high = sum(values) / len(values), None, None
                why = "from the kept histograms (within 0.5 %): no interval"
            else:
                continue
            if math.isfinite(value):
                points.append(Point(release, len(mine), value, low, high, why, newest.fourfold_version,
                                    newest.added_at))
        if points:
            out[group] = points
    if not out:
        known = sorted({f["metric"] for g in groups for f in store.figures(g, [r.id for r in runs])})
        raise UsageError(f"no run in the history has {metric!r}" + (f" in level {level}" if level else "")
                         + (f"; the kept rows: {', '.join(known)}" if known else "; the history is empty")
                         + "; quantiles of " + ", ".join(HISTOGRAMS) + " come from the kept histograms "
                         "(e.g. ttft_p90)")
    return out


def unit_of(store: Store, metric: str) -> str:
    for run in store.runs():
        for group in {g for (r, g) in store.groups([run.id])}:
            found = store.figures(group, [run.id], metric)
            if found:
                return str(found[0]["unit"])
    return "ms" if _QUANTILE.match(metric) else ""

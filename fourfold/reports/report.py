"""A comparison report: a baseline side, one or more candidate sides, their rows; and writing it.

A *side* is one run directory, several (the demo puts each level's run of one profile on one
side), or one variant of a run (L4 sticky A/B: ``--variants A B``). :func:`build_report`
compares every candidate side with the baseline; :func:`report_from_paths` is what
``fourfold compare`` calls; :func:`write_report` writes ``report.md``, ``report.html`` and
``report.csv`` into a directory.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from fourfold.errors import UsageError
from fourfold.reports.capacity import CAPACITY_GROUP, capacity_row, is_live_sweep, read_sweep
from fourfold.reports.compare import DEFAULT_SETTINGS, GroupSample, Row, Settings, compare_groups
from fourfold.reports.load import RunData, group_names, group_samples, load_runs, run_variants

__all__ = ["Comparison", "Report", "Section", "Side", "build_report", "report_from_paths", "write_report"]

BASELINE_NAMES = ("baseline", "control", "a", "old", "base")


@dataclass
class Side:
    """One side of a comparison: runs (and optionally one variant of them)."""

    label: str
    runs: list[RunData]
    variant: str | None = None
    groups: dict[str, GroupSample] = field(default_factory=dict)
    shown_as: dict[str, str] | None = None    # only these groups, renamed (a sweep's step at capacity)

    def source_group(self, group: str) -> str:
        """The records' own ``level:scenario`` of a group shown under ``group``."""
        return next((name for name, shown in (self.shown_as or {}).items() if shown == group), group)

    @property
    def requests(self) -> int:
        return sum(g.requests for g in self.groups.values())

    def describe(self) -> str:
        where = ", ".join(str(r.path) for r in self.runs)
        return f"{where} (variant {self.variant})" if self.variant else where


@dataclass
class Comparison:
    baseline: Side
    candidate: Side
    rows: list[Row]
    group_notes: dict[str, str] = field(default_factory=dict)    # a line under a group's table

    def groups(self) -> list[str]:
        return list(dict.fromkeys(row.group for row in self.rows))


@dataclass(frozen=True)
class Section:
    """A section a caller appends to the report: its Markdown and its HTML (already escaped; empty:
    the Markdown is shown preformatted)."""

    markdown: str
    html: str = ""


@dataclass
class Report:
    comparisons: list[Comparison]
    settings: Settings
    created_at: str = ""
    notes: list[str] = field(default_factory=list)
    sections: list[Section] = field(default_factory=list)   # sections appended by callers (the demo's article check)
    sweeps: list[tuple[str, dict]] = field(default_factory=list)   # (side label, sweep block): latency vs rate

    @property
    def baseline(self) -> Side:
        return self.comparisons[0].baseline

    @property
    def sides(self) -> list[Side]:
        return [self.baseline, *(c.candidate for c in self.comparisons)]


def build_report(baseline: Side, candidates: list[Side], settings: Settings = DEFAULT_SETTINGS,
                 slo_ms: dict[str, float] | None = None) -> Report:
    """Compare each candidate side with the baseline, group by group."""
    if not candidates:
        raise UsageError("nothing to compare: give a baseline and at least one candidate")
    slo = slo_ms if slo_ms is not None else _common_slo([baseline, *candidates])
    for side in (baseline, *candidates):
        side.groups = group_samples(side.runs, variant=side.variant, slo_ms=slo)
        if side.shown_as is not None:
            side.groups = {side.shown_as[name]: g for name, g in side.groups.items() if name in side.shown_as}
    _distinct_labels([baseline, *candidates])
    comparisons = []
    for candidate in candidates:
        rows: list[Row] = []
        for name in sorted(baseline.groups.keys() | candidate.groups.keys()):
            rows.extend(compare_groups(name, baseline.groups.get(name, GroupSample()),
                                       candidate.groups.get(name, GroupSample()), settings))
        comparisons.append(Comparison(baseline, candidate, rows))
    notes = []
    if slo:
        notes.append("goodput counts ok requests meeting every per-request SLO: "
                     + ", ".join(f"{k} <= {v:g}" for k, v in sorted(slo.items())))
    notes += skipped_lines_notes([run for side in (baseline, *candidates) for run in side.runs])
    return Report(comparisons, settings, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), notes)


def skipped_lines_notes(runs: list[RunData]) -> list[str]:
    """One note per run whose records.jsonl had lines left out (not JSON, a value of the wrong kind,
    an impossible value): how many, and the first."""
    notes, seen = [], set()
    for run in runs:
        table = run.table
        if table.unreadable and run.path not in seen:
            seen.add(run.path)
            notes.append(f"{run.label}: {table.unreadable} line(s) of records.jsonl skipped and left out of every "
                         f"number (first: {table.first_unreadable})")
    return notes


def _common_slo(sides: list[Side]) -> dict[str, float]:
    """The per-request SLO of the first run that states one (summary.json ``slo_ms``)."""
    for side in sides:
        for run in side.runs:
            if run.slo_ms:
                return run.slo_ms
    return {}


def _distinct_labels(sides: list[Side]) -> None:
    seen: dict[str, int] = {}
    for side in sides:
        seen[side.label] = seen.get(side.label, 0) + 1
    for side in sides:
        if seen[side.label] > 1 and len(side.runs) == 1 and not side.variant:
            side.label = f"{side.label} ({side.runs[0].path.name})"


def _pick_baseline(variants: list[str]) -> list[str]:
    for name in BASELINE_NAMES:
        for variant in variants:
            if variant.lower() == name:
                return [variant, *(v for v in variants if v != variant)]
    return variants


def report_from_paths(paths: list[str | os.PathLike[str]], *, variants: list[str] | None = None,
                      settings: Settings = DEFAULT_SETTINGS, slo_ms: dict[str, float] | None = None,
                      stall_ms: float | None = None, cache: bool = True) -> Report:
    """``fourfold compare``: the first path is the baseline, the others candidates; with one path,
    its two variants (``variants`` names them, baseline first, or the run has exactly two).
    ``cache``: read and write the runs' columnar cache (:mod:`fourfold.reports.cache`)."""
    if not paths:
        raise UsageError("give a baseline run directory and at least one candidate")
    sweeps = [read_sweep(path) for path in paths]
    if len(paths) > 1 and not variants and all(sweeps):
        return _sweep_report(paths, [s for s in sweeps if s], settings, slo_ms, stall_ms, cache)
    for path, sweep in zip(paths, sweeps, strict=True):
        if sweep and is_live_sweep(sweep):
            raise UsageError(f"{path} is a --sweep run (summary.json l2.sweep, each rate a step sweep@RATE/s of the "
                             "run): compare it with another sweep (a --sweep run or a fourfold sweep directory), "
                             "or compare plain runs at one offered rate")
        if sweep:
            raise UsageError(f"{path} is a sweep directory (fourfold sweep): compare it with another sweep, "
                             f"or give one of its runs ({Path(path) / 'runs'}/...)")
    runs = load_runs(paths, stall_ms=stall_ms, cache=cache)
    if variants or len(runs) == 1:
        if len(runs) != 1:
            raise UsageError("--variants compares two variants of ONE run; give a single run directory")
        run = runs[0]
        present = run_variants(run)
        if variants:
            missing = [v for v in variants if v not in present]
            if missing:
                raise UsageError(f"{run.path}: no records of variant(s) {', '.join(missing)}; "
                                 f"variants in this run: {', '.join(present) or 'none'}")
            chosen = list(variants)
        elif len(present) == 2:
            chosen = _pick_baseline(present)
        else:
            raise UsageError(f"{run.path}: one run compares its two variants, but it has "
                             f"{len(present)} ({', '.join(present) or 'no variant field set'}); give a "
                             "baseline and a candidate run, or --variants A B")
        if len(chosen) < 2:
            raise UsageError("--variants needs two variant names: baseline first")
        sides = [Side(f"{run.label} variant {v}", [run], variant=v) for v in chosen]
        return build_report(sides[0], sides[1:], settings, slo_ms)
    sides = [Side(run.label, [run]) for run in runs]
    return build_report(sides[0], sides[1:], settings, slo_ms)


def _sweep_report(paths: list[str | os.PathLike[str]], sweeps: list[dict], settings: Settings,
                  slo_ms: dict[str, float] | None, stall_ms: float | None, cache: bool) -> Report:
    """Sweeps (``fourfold sweep`` directories or ``--sweep`` runs): the capacity row
    (:mod:`fourfold.reports.capacity`), then the rows of each side at its own capacity (the highest
    rate that passed; else its lowest): a sweep directory's run of that rate, a ``--sweep`` run's
    records of that step (scenario ``sweep@RATE/s``). Both show as the group ``LEVEL:at capacity``."""
    chosen_rows: list[dict] = []
    at_capacity: list[str | os.PathLike[str]] = []
    for path, block in zip(paths, sweeps, strict=True):
        rates = sorted(block.get("rates") or [], key=lambda r: r["offered_rps"])
        chosen = [r for r in rates if r["offered_rps"] == block.get("capacity_rps")] or rates[:1]
        if not chosen:
            raise UsageError(f"{path}: a sweep without any rate run; nothing to compare")
        chosen_rows.append(chosen[0])
        at_capacity.append(Path(path) / (chosen[0].get("run_dir") or ""))
    runs = load_runs(at_capacity, stall_ms=stall_ms, cache=cache)
    sides = []
    for path, run, block, row in zip(paths, runs, sweeps, chosen_rows, strict=True):
        names = sorted(set(group_names(run.records)))
        if is_live_sweep(block):
            names = [n for n in names if n.partition(":")[2] == row.get("scenario")]
        shown = {n: f"{n.partition(':')[0]}:at capacity" for n in names}
        sides.append(Side(Path(path).name, [run], shown_as=shown if len(set(shown.values())) == len(shown) else None))
    report = build_report(sides[0], sides[1:], settings, slo_ms)
    rate_of = {side.label: row["offered_rps"] for side, row in zip(report.sides, chosen_rows, strict=True)}
    for comparison, block in zip(report.comparisons, sweeps[1:], strict=True):
        comparison.rows.insert(0, capacity_row(sweeps[0], block))
        comparison.group_notes[CAPACITY_GROUP] = (
            f"The other rows compare each side at its own capacity, so at different offered rates: "
            f"{comparison.baseline.label} at {rate_of[comparison.baseline.label]:g}/s, "
            f"{comparison.candidate.label} at {rate_of[comparison.candidate.label]:g}/s (a --sweep run: the records "
            "of that step only; a sweep directory: its run at that rate).")
    report.notes.insert(0, "capacity: the highest offered rate that met the sweep's SLO, bracket [last pass, first "
                        "miss]; overlapping brackets are no significant change. The other rows compare each "
                        "side at its own capacity (different offered rates).")
    report.sweeps = [(side.label, block) for side, block in zip(report.sides, sweeps, strict=True)]
    return report


def write_report(report: Report, out_dir: str | os.PathLike[str], *, html: bool = True) -> dict[str, Path]:
    """Write report.md, report.csv and (unless ``html`` is False) report.html; returns their paths."""
    from fourfold.reports.csvout import write_csv
    from fourfold.reports.markdown import render_markdown

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = {"markdown": out / "report.md", "csv": out / "report.csv"}
    written["markdown"].write_text(render_markdown(report), encoding="utf-8")
    write_csv(report, written["csv"])
    if html:
        from fourfold.reports.html import render_html

        written["html"] = out / "report.html"
        written["html"].write_text(render_html(report), encoding="utf-8")
    return written

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
from pathlib import Path

from fourfold.errors import UsageError
from fourfold.reports.capacity import CAPACITY_GROUP, capacity_row, is_live_sweep, read_sweep
from fourfold.reports.comparability import SENT, differences, render_lines, too_few_requests
from fourfold.reports.compare import (
    DEFAULT_SETTINGS,
    DETECT_BANDS,
    INCONCLUSIVE,
    ONE_RUN,
    CompareSettings,
    GroupSample,
    Row,
    adjust,
    compare_groups,
)
from fourfold.reports.csvout import write_csv
from fourfold.reports.document import Comparison, Report, Section, Side
from fourfold.reports.health import health_notes, stopped_notes
from fourfold.reports.html import render_html
from fourfold.reports.load import RunData, group_names, group_samples, load_runs, run_variants
from fourfold.reports.markdown import render_markdown
from fourfold.reports.mixsection import mix_section
from fourfold.reports.overhead import overhead_section

__all__ = ["Comparison", "Report", "Section", "Side", "build_report", "report_from_paths",
           "report_from_sides", "verdict_notes", "write_report"]

BASELINE_NAMES = ("baseline", "control", "a", "old", "base", "direct")   # direct: L2 --direct-host


def build_report(baseline: Side, candidates: list[Side], settings: CompareSettings = DEFAULT_SETTINGS,
                 slo_ms: dict[str, float] | None = None) -> Report:
    """Compare each candidate side with the baseline, group by group."""
    if not candidates:
        raise UsageError("nothing to compare: give a baseline and at least one candidate")
    slo = slo_ms if slo_ms is not None else _common_slo([baseline, *candidates])
    for side in (baseline, *candidates):
        side.groups = _shown(side, group_samples(side.runs, variant=side.variant, slo_ms=slo))
        side.run_groups = ([_shown(side, group_samples([run], variant=side.variant, slo_ms=slo))
                            for run in side.runs] if len(side.runs) > 1 else [side.groups])
    _distinct_labels([baseline, *candidates])
    comparisons = []
    for candidate in candidates:
        rows: list[Row] = []
        pairs = matched_runs(baseline, candidate)
        for name in sorted(baseline.groups.keys() | candidate.groups.keys()):
            in_pairs = [(baseline.run_groups[b][name], candidate.run_groups[c][name]) for b, c in pairs or ()
                        if name in baseline.run_groups[b] and name in candidate.run_groups[c]]
            if len(in_pairs) >= 2:
                rows.extend(compare_groups(name, [b for b, _ in in_pairs], [c for _, c in in_pairs], settings,
                                           matched=True))
            else:
                rows.extend(compare_groups(name, baseline.runs_of(name), candidate.runs_of(name), settings))
        comparisons.append(Comparison(baseline, candidate, adjust(rows, settings.alpha)))
    notes = verdict_notes(comparisons, settings)
    if slo:
        notes.append("goodput counts ok requests meeting every per-request SLO: "
                     + ", ".join(f"{k} <= {v:g}" for k, v in sorted(slo.items())))
    notes += skipped_lines_notes([run for side in (baseline, *candidates) for run in side.runs])
    report = Report(comparisons, settings, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), notes)
    _check_comparable(report)
    if (mix := mix_section([baseline, *candidates])) is not None:     # --mix: tenants vs weights, fairness
        report.sections.append(mix)
    return report


def _check_comparable(report: Report) -> None:
    """What differed between the sides' meta.json (:mod:`fourfold.reports.comparability`), sides with too
    few requests in a group, and load generators that were starved (:mod:`fourfold.reports.health`)."""
    several = len(report.comparisons) > 1
    for comparison in report.comparisons:
        base, cand = comparison.baseline, comparison.candidate
        if base.variant or cand.variant:
            continue                # two arms of one run: one meta
        levels = sorted({str(r.meta.get("level") or "") for r in (*base.runs, *cand.runs)})
        # a side may hold runs of several levels (the demo): compare like with like
        for level in levels:
            found = differences([r.meta for r in base.runs if str(r.meta.get("level") or "") == level],
                                [r.meta for r in cand.runs if str(r.meta.get("level") or "") == level])
            report.workload_differences += [d for d in found if d.kind == SENT]
            for line in render_lines(found):
                kind, _, text = line.partition(": ")
                where = " ".join(part for part in (f"{base.label} → {cand.label}" if several else "",
                                                   level if len(levels) > 1 else "") if part)
                text = f"{where}: {text}" if where else text
                (report.warnings if kind == "warning" else report.notes).append(text)
    for side in report.sides:
        for group, sample in side.groups.items():
            few = too_few_requests(f"{side.label} {group}", sample.requests)
            if few:
                report.warnings.append(few.partition(": ")[2])
    seen: set[Path] = set()
    for side in report.sides:
        for run in side.runs:
            if run.path not in seen:
                seen.add(run.path)
                report.warnings += health_notes(f"{side.label} ({run.path.name})", run.summary)
                report.notes += stopped_notes(f"{side.label} ({run.path.name})", run.summary)


def matched_runs(baseline: Side, candidate: Side) -> list[tuple[int, int]] | None:
    """(baseline run, candidate run) index pairs when the two sides' runs match one to one by level and
    seed (``fourfold repeat`` and the demo give both runs of a repetition one seed: the same requests in
    the same order, run back to back); None when they do not (another count, a seed twice on a side, an
    A/B arm, a run without a seed)."""
    if (baseline.variant or candidate.variant or len(baseline.runs) != len(candidate.runs)
            or len(baseline.runs) < 2):
        return None

    def keys(side: Side) -> list[tuple[str, int]] | None:
        out = []
        for run in side.runs:
            settings = run.meta.get("settings")
            seed = settings.get("seed") if isinstance(settings, dict) else None
            if not isinstance(seed, int) or isinstance(seed, bool):
                return None
            out.append((str(run.meta.get("level") or ""), seed))
        return out if len(set(out)) == len(out) else None

    kb, kc = keys(baseline), keys(candidate)
    if kb is None or kc is None or set(kb) != set(kc):
        return None
    return [(i, kc.index(key)) for i, key in enumerate(kb)]


def _shown(side: Side, groups: dict[str, GroupSample]) -> dict[str, GroupSample]:
    if side.shown_as is None:
        return groups
    return {side.shown_as[name]: g for name, g in groups.items() if name in side.shown_as}


def verdict_notes(comparisons: list[Comparison], settings: CompareSettings) -> list[str]:
    """What the verdicts rest on: the gate's family and its correction, and the sides whose
    between-run variance is unknown (one run), with what to do about it."""
    notes = []
    gated = sorted({r.metric for c in comparisons for r in c.rows if r.gated and r.p_value is not None})
    if gated:
        notes.append("verdicts: interval against each row's minimum effect (band); Holm over the "
                     f"{len(gated)} gated metric(s) per comparison ({', '.join(gated)}), Benjamini-Hochberg "
                     f"over the other rows; alpha {settings.alpha:g} (docs/statistics.md)")
    for comparison in comparisons:
        undecided = [r for r in comparison.rows if r.gated and r.runs_needed and r.verdict == INCONCLUSIVE]
        if undecided:
            lone_side = any(r.why == ONE_RUN for r in undecided)
            notes.append(f"runs a side that would decide a change of {DETECT_BANDS}x the band of the gated "
                         "rows left inconclusive, with 80 % power, from this data's variance"
                         f"{' (within-run only, so at least)' if lone_side else ''}: "
                         + ", ".join(f"{r.group} {r.metric} {r.runs_needed}" for r in undecided))
    lone = sorted({(c.baseline.label, c.candidate.label) for c in comparisons
                   for r in c.rows if r.why == ONE_RUN})
    for base, cand in lone:
        notes.append(f"{base} → {cand}: one run a side, so the variance between runs of one version is "
                     "unknown and no row of runs gets a verdict (paired quality rows do); run the comparison "
                     "with 2 or more runs a side: fourfold repeat N -- locust ..., then fourfold compare "
                     "--baseline A1 A2 A3 --candidate B1 B2 B3 (docs/statistics.md: how many runs an effect "
                     "needs)")
    return notes


def skipped_lines_notes(runs: list[RunData]) -> list[str]:
    """One note per run whose records.jsonl had lines left out (not JSON, a value of the wrong kind,
    an impossible value): how many, and the first."""
    notes, seen = [], set()
    for run in runs:
        table = run.table
        if table.unreadable and run.path not in seen:
            seen.add(run.path)
            notes.append(f"{run.label}: {table.unreadable} line(s) of records.jsonl skipped and left out of "
                         f"every number (first: {table.first_unreadable})")
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
                      settings: CompareSettings = DEFAULT_SETTINGS, slo_ms: dict[str, float] | None = None,
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
            raise UsageError(f"{path} is a --sweep run (summary.json l2.sweep, each rate a step sweep@RATE/s "
                             "of the run): compare it with another sweep (a --sweep run or a fourfold sweep "
                             "directory), or compare plain runs at one offered rate")
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
        report = build_report(sides[0], sides[1:], settings, slo_ms)
        section = overhead_section(report)      # direct vs gateway (--direct-host): per ladder step
        if section is not None:
            report.sections.append(section)
        return report
    sides = [Side(run.label, [run]) for run in runs]
    return build_report(sides[0], sides[1:], settings, slo_ms)


def report_from_sides(baseline: list[str | os.PathLike[str]],
                      candidates: list[list[str | os.PathLike[str]]], *,
                      settings: CompareSettings = DEFAULT_SETTINGS, slo_ms: dict[str, float] | None = None,
                      stall_ms: float | None = None, cache: bool = True) -> Report:
    """``fourfold compare --baseline A1 A2 --candidate B1 B2``: each side is several runs of one version,
    the replicates of its rows (:mod:`fourfold.reports.replication`)."""
    if not baseline or not candidates or not all(candidates):
        raise UsageError("give --baseline RUN_DIR... and --candidate RUN_DIR... (one or more runs each)")
    paths = [*baseline, *(p for side in candidates for p in side)]
    if any(read_sweep(path) for path in paths):
        raise UsageError("a sweep is compared with another sweep as two paths (fourfold compare SWEEP_A "
                         "SWEEP_B), not with --baseline / --candidate")
    runs = load_runs(paths, stall_ms=stall_ms, cache=cache)
    sides, start = [], 0
    for role, group in (("baseline", baseline), *(("candidate", side) for side in candidates)):
        chosen = runs[start:start + len(group)]
        start += len(group)
        labels = list(dict.fromkeys(run.label for run in chosen))
        label = labels[0] if len(labels) == 1 else role
        sides.append(Side(f"{label} ({len(chosen)} runs)" if len(chosen) > 1 else label, chosen))
    return build_report(sides[0], sides[1:], settings, slo_ms)


def _sweep_report(paths: list[str | os.PathLike[str]], sweeps: list[dict], settings: CompareSettings,
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
        sides.append(Side(Path(path).name, [run],
                          shown_as=shown if len(set(shown.values())) == len(shown) else None))
    report = build_report(sides[0], sides[1:], settings, slo_ms)
    rate_of = {side.label: row["offered_rps"] for side, row in zip(report.sides, chosen_rows, strict=True)}
    for comparison, block in zip(report.comparisons, sweeps[1:], strict=True):
        comparison.rows.insert(0, capacity_row(sweeps[0], block))
        comparison.group_notes[CAPACITY_GROUP] = (
            f"The other rows compare each side at its own capacity, so at different offered rates: "
            f"{comparison.baseline.label} at {rate_of[comparison.baseline.label]:g}/s, "
            f"{comparison.candidate.label} at {rate_of[comparison.candidate.label]:g}/s (a --sweep run: the "
            "records of that step only; a sweep directory: its run at that rate).")
    report.notes.insert(0, "capacity: the highest offered rate that met the sweep's SLO, bracket [last pass, "
                        "first miss]; overlapping brackets are inconclusive. The other rows compare each "
                        "side at its own capacity (different offered rates).")
    report.sweeps = [(side.label, block) for side, block in zip(report.sides, sweeps, strict=True)]
    return report


def write_report(report: Report, out_dir: str | os.PathLike[str], *, html: bool = True,
                 plots: bool = True) -> dict[str, Path]:
    """Write report.md, report.csv and (unless ``html`` is False) report.html, with its plots unless
    ``plots`` is False; returns their paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = {"markdown": out / "report.md", "csv": out / "report.csv"}
    written["markdown"].write_text(render_markdown(report), encoding="utf-8")
    write_csv(report, written["csv"])
    if html:
        written["html"] = out / "report.html"
        written["html"].write_text(render_html(report, plots=plots), encoding="utf-8")
    return written

"""The comparison as Markdown: fit for a pull-request comment and for the terminal.

``render_markdown(report)`` is ``report.md``: the sides, one table per candidate and group, the
structured-prompt first-token table when the runs' datasets tell structured prompts from plain
ones, notes, a legend and (collapsed) the metric definitions. ``render_tables(report)`` is the
part ``fourfold compare`` prints. Strings that come from runs (labels, group names) are escaped
(``|``, ``<``, ``&``, newlines) so they cannot break the table or inject markup.
"""

from __future__ import annotations

import html

from fourfold.reports.compare import Row
from fourfold.reports.document import Comparison, Report, Side
from fourfold.reports.glossary import (
    DEFINITIONS,
    GATED_MARK,
    METRICS_DOC,
    fmt_band,
    fmt_ci,
    fmt_delta,
    fmt_p,
    fmt_pct,
    fmt_value,
    legend_lines,
    shown_p,
    verdict_text,
)
from fourfold.reports.scores import scoring_notes

__all__ = ["cell", "render_markdown", "render_tables", "structured_cells", "structured_rows"]

HEADER = ("metric", "baseline", "candidate", "Δ", "Δ%", "95% CI of Δ", "band", "p (adj.)", "verdict")
ALIGN = ("---", "---:", "---:", "---:", "---:", "---:", "---:", "---:", "---")


def cell(text: object) -> str:
    """A string from a run, safe inside a Markdown table cell."""
    return html.escape(str(text), quote=False).replace("|", "\\|").replace("\n", " ").replace("`", "'")


def _table(header: tuple[str, ...], align: tuple[str, ...], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(align) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def metric_label(row: Row) -> str:
    label = f"{row.label} ({row.unit})"
    label = f"{label}, paired" if row.paired else label
    return f"{label} {GATED_MARK}" if row.gated else label


def row_cells(row: Row) -> list[str]:
    return [metric_label(row), fmt_value(row.baseline, row.unit), fmt_value(row.candidate, row.unit),
            fmt_delta(row.delta, row.unit), fmt_pct(row.delta_pct), fmt_ci(row.ci_low, row.ci_high, row.unit),
            fmt_band(row), fmt_p(shown_p(row)), verdict_text(row)]


def _side_line(name: str, side: Side) -> str:
    ok = sum(g.ok for g in side.groups.values())
    runs = ", ".join(f"`{cell(r.path.name)}`" for r in side.runs)
    variant = f" variant `{cell(side.variant)}`" if side.variant else ""
    return f"| {name} | {cell(side.label)} | {runs}{variant} | {side.requests} | {side.requests - ok} |"


def _comparison(comparison: Comparison, level: int) -> list[str]:
    base, cand = comparison.baseline, comparison.candidate
    lines = [f"{'#' * level} {cell(base.label)} → {cell(cand.label)}", ""]
    for group in comparison.groups():
        gb, gc = base.groups.get(group), cand.groups.get(group)
        counts = (f"baseline {gb.requests if gb else 0} requests ({gb.failures if gb else 0} failed), "
                  f"candidate {gc.requests if gc else 0} ({gc.failures if gc else 0} failed)") if gb or gc \
            else "from the sweeps' brackets (summary.json `sweep`), not from requests"
        rows = [row_cells(r) for r in comparison.rows if r.group == group]
        lines += [f"{'#' * (level + 1)} {cell(group)}", "", counts, "", *_table(HEADER, ALIGN, rows), ""]
        if group in comparison.group_notes:
            lines += [f"*{cell(comparison.group_notes[group])}*", ""]
    return lines


def structured_rows(report: Report) -> list[tuple[str, str, float, float, int, int]]:
    """(group, "role: label", plain TTFT mean, structured TTFT mean, n plain, n structured) for every
    group and side whose requests include both kinds of prompt (raw values; renderers format)."""
    rows = []
    for name in dict.fromkeys(r.group for c in report.comparisons for r in c.rows):
        for role, side in zip(("baseline", *["candidate"] * len(report.comparisons)), report.sides):
            sample = side.groups.get(name)
            if sample is None or sample.ttft_plain_ms is None or sample.ttft_structured_ms is None:
                continue
            plain, structured = sample.ttft_plain_ms, sample.ttft_structured_ms
            if plain.size and structured.size:
                rows.append((name, f"{role}: {side.label}", float(plain.mean()), float(structured.mean()),
                             int(plain.size), int(structured.size)))
    return rows


def structured_cells(row: tuple[str, str, float, float, int, int]) -> list[str]:
    group, side, plain, structured, n_plain, n_structured = row
    return [group, side, fmt_value(plain, "ms"), fmt_value(structured, "ms"),
            fmt_delta(structured - plain, "ms"), f"{n_plain} / {n_structured}"]


def render_tables(report: Report) -> str:
    """The comparison tables only (what ``fourfold compare`` prints)."""
    lines: list[str] = []
    for comparison in report.comparisons:
        lines += _comparison(comparison, 2)
    return "\n".join(lines).rstrip() + "\n"


def render_markdown(report: Report) -> str:
    s = report.settings
    lines = ["# fourfold comparison", "", "| side | label | run directories | requests | failed |",
             "|---|---|---|---:|---:|", _side_line("baseline", report.baseline)]
    lines += [_side_line("candidate", c.candidate) for c in report.comparisons]
    lines.append("")
    lines += [f"> **Warning:** {cell(w)}  " for w in report.warnings]
    if report.warnings:
        lines.append("")
    for comparison in report.comparisons:
        lines += _comparison(comparison, 2)
    structured = [[cell(c) for c in structured_cells(row)] for row in structured_rows(report)]
    if structured:
        lines += ["## First-token cost of structured prompts", "",
                  "Mean TTFT of plain prompts (A) and of structured ones (B: \"in three points\", \"compare "
                  "X and Y\", \"in a table\"); the article measured B - A = 58 ± 12 ms before the "
                  "orchestrator was removed and ≤ 3 ms after.", "",
                  *_table(("group", "side", "plain TTFT mean (ms)", "structured TTFT mean (ms)", "B - A (ms)",
                           "n plain / structured"), ("---", "---", "---:", "---:", "---:", "---:"),
                          structured), ""]
    notes = [*report.notes, *scoring_notes(list({id(r): r for s in report.sides for r in s.runs}.values()))]
    if notes:
        lines += ["Notes:", "", *(f"- {note}" for note in notes), ""]
    for section in report.sections:
        lines += [section.markdown.rstrip(), ""]
    lines += ["---", "", *(f"{line}  " for line in legend_lines(s.resamples, s.seed, s.confidence, s.alpha)),
              "", "<details><summary>Metric definitions</summary>", "",
              f"Every metric has one definition in [{METRICS_DOC}]({METRICS_DOC}); the names other tools use "
              "for the same quantity (they disagree: vLLM's ITL is AIPerf's inter-chunk latency, AIPerf's "
              "ITL is vLLM's TPOT):", "",
              *_table(("fourfold", "definition", "vLLM bench serve", "AIPerf"), ("---", "---", "---", "---"),
                      [[f"`{name}`", cell(text), vllm, aiperf] for name, text, vllm, aiperf in DEFINITIONS]),
              "", "</details>", ""]
    return "\n".join(lines)

"""The report as data: the sides, each candidate's comparison with the baseline, the sections a
caller appends, the notes and warnings. :mod:`fourfold.reports.report` builds it; the renderers
(:mod:`~fourfold.reports.markdown`, :mod:`~fourfold.reports.html`, :mod:`~fourfold.reports.csvout`)
read it and nothing else of the report's making."""

from __future__ import annotations

import html as _html
from dataclasses import dataclass, field

from fourfold.reports.comparability import MetaDifference
from fourfold.reports.load import RunData
from fourfold.reports.rows import CompareSettings, GroupSample, Row

__all__ = ["Comparison", "Report", "Section", "Side", "table_section"]


@dataclass
class Side:
    """One side of a comparison: runs (and optionally one variant of them)."""

    label: str
    runs: list[RunData]
    variant: str | None = None
    groups: dict[str, GroupSample] = field(default_factory=dict)          # each group, the side's runs pooled
    run_groups: list[dict[str, GroupSample]] = field(default_factory=list)   # each group, run by run
    shown_as: dict[str, str] | None = None    # only these groups, renamed (a sweep's step at capacity)

    def source_group(self, group: str) -> str:
        """The records' own ``level:scenario`` of a group shown under ``group``."""
        return next((name for name, shown in (self.shown_as or {}).items() if shown == group), group)

    @property
    def requests(self) -> int:
        return sum(g.requests for g in self.groups.values())

    def runs_of(self, group: str) -> list[GroupSample]:
        """The group's sample in each run that has it (a side's replicates)."""
        return [groups[group] for groups in self.run_groups if group in groups]

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


def table_section(title: str, head: list[str], cells: list[list[str]], footer: str = "",
                  align: str = "---") -> Section:
    """A section of one table under a ``##`` title (``align``: each column's Markdown rule), an
    optional paragraph after it in the Markdown; the HTML escapes every cell."""
    markdown = [f"## {title}", "", "| " + " | ".join(head) + " |", "|" + f"{align}|" * len(head)]
    markdown += ["| " + " | ".join(row) + " |" for row in cells] + (["", footer] if footer else [])
    body = "".join("<tr>" + "".join(f"<td>{_html.escape(c)}</td>" for c in row) + "</tr>" for row in cells)
    table = ("<table><thead><tr>" + "".join(f"<th>{_html.escape(h)}</th>" for h in head)
             + f"</tr></thead><tbody>{body}</tbody></table>")
    return Section("\n".join(markdown) + "\n", f"<h2>{_html.escape(title)}</h2>{table}")


@dataclass
class Report:
    comparisons: list[Comparison]
    settings: CompareSettings
    created_at: str = ""
    notes: list[str] = field(default_factory=list)
    # sections appended by callers (the demo's article check)
    sections: list[Section] = field(default_factory=list)
    # (side label, sweep block): latency vs rate
    sweeps: list[tuple[str, dict]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)     # loud: the sides sent different workloads, too few
    # what differed in what was sent
    workload_differences: list[MetaDifference] = field(default_factory=list)

    @property
    def baseline(self) -> Side:
        return self.comparisons[0].baseline

    @property
    def sides(self) -> list[Side]:
        return [self.baseline, *(c.candidate for c in self.comparisons)]

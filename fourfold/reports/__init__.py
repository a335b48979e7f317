"""Comparison reports: is the candidate faster, and are its answers as good?

Load run directories (:mod:`fourfold.reports.load`, with the fast records reader
:mod:`fourfold.reports.records`), compare a baseline with candidates metric by metric, runs as the replicates
(:mod:`fourfold.reports.replication`), with intervals, a minimum effect per row and direction-aware verdicts
corrected for the number of rows (:mod:`fourfold.reports.compare`, :mod:`fourfold.reports.verdict`: pure), and
render the result as Markdown, self-contained HTML with plots, and CSV (:mod:`fourfold.reports.markdown`,
:mod:`fourfold.reports.html`, :mod:`fourfold.reports.csvout`). ``fourfold demo`` lives in
:mod:`fourfold.cli.demo`.

Reports read run directories only: nothing here imports Locust or :mod:`fourfold.levels`. Importing the
package is cheap; matplotlib loads when the HTML report is rendered.
"""

from __future__ import annotations

from fourfold.reports.compare import CompareSettings, GroupSample, Row, compare_groups
from fourfold.reports.load import RunData, RunDirError, group_samples, load_run
from fourfold.reports.report import Comparison, Report, Side, build_report, report_from_paths, write_report

__all__ = [
    "Comparison",
    "GroupSample",
    "Report",
    "Row",
    "RunData",
    "RunDirError",
    "CompareSettings",
    "Side",
    "build_report",
    "compare_groups",
    "group_samples",
    "load_run",
    "report_from_paths",
    "write_report",
]

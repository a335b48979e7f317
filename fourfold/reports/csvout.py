"""The comparison rows as CSV (``report.csv``): one line per candidate, group and metric, numbers
unrounded, rates in % (their deltas in percentage points), as in the Markdown table."""

from __future__ import annotations

import csv
import os

from fourfold.reports.document import Report

__all__ = ["COLUMNS", "write_csv"]

COLUMNS = ("baseline", "candidate", "group", "metric", "label", "unit", "better", "baseline_value",
           "candidate_value", "delta", "delta_pct", "ci_low", "ci_high", "p_value", "verdict", "test",
           "paired", "n_baseline", "n_candidate", "band", "p_adjusted", "gated", "runs_baseline",
           "runs_candidate", "why")


def _num(value: float | None) -> str:
    return "" if value is None else repr(float(value))


def write_csv(report: Report, path: str | os.PathLike[str]) -> None:
    with open(path, "w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(COLUMNS)
        for comparison in report.comparisons:
            for row in comparison.rows:
                writer.writerow([comparison.baseline.label, comparison.candidate.label, row.group, row.metric,
                                 row.label, row.unit, row.better, _num(row.baseline), _num(row.candidate),
                                 _num(row.delta), _num(row.delta_pct), _num(row.ci_low), _num(row.ci_high),
                                 _num(row.p_value), row.verdict, row.test, str(row.paired).lower(),
                                 row.n_baseline, row.n_candidate, _num(row.band), _num(row.p_adjusted),
                                 str(row.gated).lower(), row.runs_baseline, row.runs_candidate, row.why])

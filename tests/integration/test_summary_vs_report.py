"""One real run, two outputs: summary.json (aggregated live by measure.stats) and the comparison
report of the same run directory (built by fourfold compare's own API, reports.load.load_run and
reports.report.build_report) agree on every metric both show.

The metrics come from the registry (measure.metric_names): every metric shown in summary.json's
groups and in the report is compared, counts, rates and times exactly (the report's percentages
are the summary's fractions times 100), percentiles within the histogram's alpha (summary.json
buckets them, the report takes them exactly). A report row or count that the registry does not
know, or that summary.json shows and this test did not compare, fails the test.
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from fourfold.measure.metric_names import METRICS, resolve, summary_value
from fourfold.reports.compare import GroupSample
from fourfold.reports.load import load_run
from fourfold.reports.report import Side, build_report
from tests.conftest import only_run_dir, run_locust

pytestmark = pytest.mark.integration

# the candidate profile pulses (about half of the answers pause ~200 ms every 20 tokens: stalls);
# the goodput SLO splits the requests (TTFT ~70 ms)
SLO = "ttft_p50<=72ms,e2e_p99<=30s"


def _sample_numbers() -> set[str]:
    return {f.name for f in dataclasses.fields(GroupSample)
            if f.type in ("int", "float", "int | None", "float | None")}


def _agree(kind: str, unit: str, summary: float, report: float, alpha: float) -> bool:
    if kind == "distribution":
        return abs(summary - report) <= alpha * abs(report) + 1e-9
    if kind == "ratio":                                  # a fraction in summary.json, % in the report rows
        return report == pytest.approx(100 * summary, rel=1e-12, abs=1e-12)
    return summary == report                             # counts, rates and times: exactly


def test_every_metric_in_summary_and_report_agrees(tmp_path, locustfile):
    proc = run_locust(["-f", locustfile("l1_throughput.py"), "--headless", "-u", "6", "-r", "6", "-t", "10s",
                       "--sim-profile", "candidate", "--max-tokens", "80", "--slo", SLO], tmp_path)
    out = proc.stdout + proc.stderr
    run = only_run_dir(tmp_path)
    summary = json.loads((run / "summary.json").read_text())
    assert proc.returncode == summary["slo"]["exit_code"], out[-3000:]
    data = load_run(run)
    report = build_report(Side("baseline", [data]), [Side("candidate", [data])])
    alpha = summary["histogram_alpha"]
    rows = report.comparisons[0].rows
    sample_numbers = _sample_numbers()
    groups = summary["groups"]
    assert [f"{g['level']}:{g['scenario']}" for g in groups] == sorted(report.baseline.groups) == ["l1:saturation"]
    compared: dict[str, tuple[float, float]] = {}
    for group in groups:
        name = f"{group['level']}:{group['scenario']}"
        sample = report.baseline.groups[name]
        row_values = {row.metric: row.baseline for row in rows if row.group == name}
        for metric in METRICS:
            if "summary" not in metric.where or "report" not in metric.where:
                continue
            for shown in metric.report:
                theirs = row_values[shown] if shown in row_values else getattr(sample, shown)
                ours = summary_value(group, shown)
                assert ours is not None and theirs is not None, (
                    f"{shown}: summary {ours!r}, report {theirs!r}: the run should exercise every shared metric")
                assert _agree(metric.kind, metric.unit, ours, theirs, alpha), (
                    f"{name} {shown} ({metric.kind}): summary.json {ours!r} vs report {theirs!r}")
                compared[shown] = (ours, theirs)
        # anything the report shows that summary.json also has must have been compared above
        shown_by_report = set(row_values) | {n for n in sample_numbers if getattr(sample, n) is not None}
        for key in shown_by_report:
            assert resolve(key) is not None, f"the report shows {key!r}, which measure.metric_names does not define"
            if summary_value(group, key) is not None:
                assert key in compared, f"{key} is in summary.json and the report but was not compared"
    # the run exercised what it is meant to: stalls, a goodput split, percentiles, every shared count
    assert 0 < compared["requests_with_stall"][0] < compared["requests"][0]
    assert 0 < compared["good"][0] < compared["ok"][0]
    assert compared["ttft_p50"][0] > 0 and compared["itl_p99"][0] > 150      # the pauses are in the ITL tail
    shared = {n for m in METRICS if "summary" in m.where and "report" in m.where for n in m.report}
    assert set(compared) == shared and len(shared) >= 20

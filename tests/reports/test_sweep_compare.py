"""`fourfold compare` of `--sweep` runs (summary.json `l2.sweep`, each rate a step `sweep@RATE/s` of
one run): the rows compare each side's step at its capacity, a note says so, the HTML holds each
side's latency-vs-offered-rate plot; one sweep alone gets its sweep.svg; a `--sweep` run among plain
runs is a usage error that says what it is."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

from fourfold.cli import main
from fourfold.measure.record import RequestRecord
from fourfold.reports.html import render_html
from fourfold.reports.markdown import render_markdown
from fourfold.reports.report import report_from_paths
from fourfold.rundir.runlog import RunWriter

T0 = 1_700_000_000.0


def write_sweep_run(base: Path, label: str, steps: list[tuple[float, float, bool]],
                    capacity: float | None) -> Path:
    """A --sweep run: per step (offered rate, TTFT ms of its 12 requests, passed)."""
    writer = RunWriter(label, base, now_s=T0)
    writer.write_meta({"label": label, "level": "l2", "settings": {"stall_ms": 150.0}})
    rows, i = [], 0
    for rate, ttft, passed in steps:
        scenario = f"sweep@{rate:g}/s"
        for k in range(12):
            offsets = [ttft + k] + [ttft + k + 10.0 * j for j in range(1, 8)]
            writer.append(RequestRecord(
                level="l2", scenario=scenario, item_id=f"item-{k}", request_id=f"{label}-{i}",
                started_at=T0 + i * 0.1, status=200, error_class="ok", ttfb_ms=2.0, ttft_ms=offsets[0],
                e2e_ms=offsets[-1], chunk_offsets_ms=offsets, output_tokens=8, output_tokens_source="usage",
                terminal=True, text="ok"))
            i += 1
        latency = {"ttft_ms": {"p50": ttft + 6, "p95": ttft + 11},
                   "e2e_ms": {"p50": ttft + 76, "p95": ttft + 81}}
        rows.append({"offered_rps": rate, "passed": passed, "scenario": scenario, "run_dir": "",
                     "latency_ms": latency})
    writer.close()
    high = min((r for r, _, p in steps if not p), default=None)
    writer.write_summary({"records": i, "slo_ms": {}, "l2": {"sweep": {
        "slo": "ttft_p95<=300ms", "step_s": 2.5, "rates": rows, "capacity_rps": capacity,
        "bracket_rps": [capacity or 0.0, high], "converged": True, "stopped": ""}}})
    return writer.run_dir


def _two(tmp_path: Path) -> tuple[Path, Path]:
    base = write_sweep_run(tmp_path / "a", "base", [(6.0, 100.0, True), (9.0, 900.0, False)], 6.0)
    cand = write_sweep_run(tmp_path / "b", "cand",
                           [(6.0, 100.0, True), (9.0, 120.0, True), (13.5, 1000.0, False)], 9.0)
    return base, cand


def test_two_sweep_runs_compare_each_at_its_capacity_step(tmp_path):
    report = report_from_paths(_two(tmp_path), cache=False)
    rows = {(r.group, r.metric): r for r in report.comparisons[0].rows}
    assert rows[("sweep", "capacity_rps")].verdict == "better"
    ttft = rows[("l2:at capacity", "ttft_p50")]  # the step at 6/s against the step at 9/s, not the whole runs
    assert (ttft.n_baseline, ttft.n_candidate) == (12, 12)
    assert abs(ttft.baseline - 105.5) < 1 and abs(ttft.candidate - 125.5) < 1
    assert {g for side in report.sides for g in side.groups} == {"l2:at capacity"}
    base, cand = (side.label for side in report.sides)
    note = f"each side at its own capacity, so at different offered rates: {base} at 6/s, {cand} at 9/s"
    markdown, page = render_markdown(report), render_html(report)
    assert note in markdown and note in page
    assert markdown.index("capacity (ttft_p95<=300ms)") < markdown.index(note) < \
        markdown.index("### l2:at capacity")
    plots = re.findall(r'<img src="data:image/svg\+xml;base64,([^"]+)" '
                       r'alt="latency vs offered rate, ([^"]+)"', page)
    assert [alt for _, alt in plots] == [f"{base}: 6.00/s meets, 9.00/s MISSES",
                                         f"{cand}: 6.00/s meets, 9.00/s meets, 13.50/s MISSES"]
    assert all(b"<svg" in base64.b64decode(data) for data, _ in plots)


def test_a_sweep_run_among_plain_runs_says_it_is_a_sweep_run(tmp_path, capsys):
    base, _ = _two(tmp_path)
    assert main(["compare", str(base), str(tmp_path / "plain"), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "is a --sweep run (summary.json l2.sweep" in err and "is a sweep directory" not in err \
        and "runs/" not in err


def test_one_sweep_run_alone_gets_its_plot(tmp_path, capsys):
    base, _ = _two(tmp_path)
    assert main(["compare", str(base), "--out", str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / "sweep.svg").read_text().startswith("<?xml")
    out = capsys.readouterr().out
    assert "capacity 6.00 requests/s" in out and "6.00/s meets, 9.00/s MISSES" in out
    assert json.loads((base / "summary.json").read_text())["l2"]["sweep"]["capacity_rps"] == 6.0


def test_a_sweep_directory_and_a_sweep_run_meet_in_one_group(tmp_path):
    sweep_dir = tmp_path / "sweep"
    run = write_sweep_run(sweep_dir / "runs", "rate-9", [(9.0, 120.0, True)], 9.0)     # one rate's own run
    rate = {"offered_rps": 9.0, "passed": True, "run_dir": f"runs/{run.name}", "latency_ms": {}}
    (sweep_dir / "summary.json").write_text(json.dumps({"kind": "sweep", "sweep": {
        "slo": "ttft_p95<=300ms", "rates": [rate, {**rate, "offered_rps": 12.0, "passed": False}],
        "capacity_rps": 9.0, "bracket_rps": [9.0, 12.0]}}))
    base, _ = _two(tmp_path)
    report = report_from_paths([base, sweep_dir], cache=False)
    ttft = next(r for r in report.comparisons[0].rows if r.metric == "ttft_p50")
    assert ttft.group == "l2:at capacity" and (ttft.n_baseline, ttft.n_candidate) == (12, 12)
    assert abs(ttft.candidate - 125.5) < 1

"""The Markdown report of hand-made runs, two a side, compared word for word with tests/golden/.

The candidate has a first-token regression (TTFT worse), no orchestrator cost on structured
prompts (the structured-minus-plain penalty better), the same decode speed and request rate (ITL
and output tokens/s: not worse), stalls in every 10th stream, and lower similarity on the same items
(a quality drop, paired). The bootstrap is seeded, so the text is the same on every run; set
``FOURFOLD_UPDATE_GOLDEN=1`` to rewrite the golden file after an intended change.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest

from fourfold.cli import main
from fourfold.reports.compare import CompareSettings
from fourfold.reports.markdown import render_markdown
from fourfold.reports.report import report_from_paths, report_from_sides
from tests.rundirs import RunSpec, write_dataset, write_run

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
BASELINE_T1 = 1_700_000_600.0
BASELINE = RunSpec("baseline", seed=11, char_f1=(0.60, 0.05))
CANDIDATE = RunSpec("candidate", seed=12, ttft_plain=(170.0, 8.0), ttft_structured=(172.0, 8.0),
                    similarity=(0.80, 0.03), pause_every=10, char_f1=(0.50, 0.05))


def _runs_of(base: Path, spec: RunSpec, seeds: tuple[int, ...], now_s: float, bandwidth: float,
             dataset: Path) -> list[Path]:
    out = []
    for k, seed in enumerate(seeds):
        run = write_run(base / "runs", dataclasses.replace(spec, seed=seed), dataset=dataset,
                        now_s=now_s + 600 * k)
        samples = [{"t_s": now_s + i, "server.mem_bw_util_pct": bandwidth + i % 3,    # server telemetry
                    "server.kv_cache_usage_pct": 10.0 + i} for i in range(12)]
        (run / "server_metrics.json").write_text(json.dumps(samples), encoding="utf-8")
        out.append(run)
    return out


@pytest.fixture(scope="module")
def sides(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Path], list[Path]]:
    """Two runs a side (the replicates the verdicts rest on)."""
    base = tmp_path_factory.mktemp("golden")
    dataset = write_dataset(base / "items.jsonl")
    return (_runs_of(base, BASELINE, (11, 13), BASELINE_T1 - 600, 40.0, dataset),
            _runs_of(base, CANDIDATE, (12, 14), BASELINE_T1 + 1200, 90.0, dataset))


@pytest.fixture(scope="module")
def runs(sides: tuple[list[Path], list[Path]]) -> tuple[Path, Path]:
    """One run a side."""
    return sides[0][0], sides[1][0]


def _check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("FOURFOLD_UPDATE_GOLDEN"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"{path} missing: run with FOURFOLD_UPDATE_GOLDEN=1 once"
    assert text == path.read_text(encoding="utf-8")


def test_markdown_report_matches_golden_and_verdicts(sides):
    report = report_from_sides(*sides[:1], [sides[1]], settings=CompareSettings(resamples=2000, seed=0))
    verdicts = {row.metric: row.verdict for row in report.comparisons[0].rows}
    assert verdicts["ttft_p50"] == "worse"                     # the latency regression
    assert verdicts["ttft_structured_penalty"] == "better"     # the orchestrator's cost is gone
    assert verdicts["itl_p50"] in ("no change", "equivalent")  # same decode speed
    assert verdicts["output_tps"] != "worse"                   # same request rate and lengths
    assert verdicts["stall_rate"] == "worse"
    assert verdicts["similarity_mean"] == "worse"              # the quality drop
    paired = {row.metric: row.paired for row in report.comparisons[0].rows}
    assert paired["similarity_mean"] and paired["structure_compliance"]
    _check_golden("compare_report.md", render_markdown(report))


def test_one_run_a_side_says_the_between_run_variance_is_unknown(runs):
    report = report_from_paths(list(runs), settings=CompareSettings(resamples=500))
    rows = {row.metric: row for row in report.comparisons[0].rows}
    assert rows["ttft_p50"].verdict == "inconclusive" and rows["ttft_p50"].ci_low > 0  # the interval is shown
    assert rows["similarity_mean"].verdict == "worse"                 # paired items: their own replicates
    assert any("one run a side" in note and "fourfold repeat" in note for note in report.notes)


def test_report_is_reproducible(sides):
    first = render_markdown(report_from_sides(sides[0], [sides[1]]))
    assert render_markdown(report_from_sides(sides[0], [sides[1]])) == first


def test_cli_prints_the_table_and_writes_three_files(sides, tmp_path, capsys):
    assert main(["compare", "--baseline", *map(str, sides[0]), "--candidate", *map(str, sides[1]),
                 "--out", str(tmp_path / "out"), "--no-plots"]) == 0
    printed = capsys.readouterr().out
    assert "| TTFT p50 (ms) † |" in printed and "❌ worse" in printed
    assert {p.name for p in (tmp_path / "out").iterdir()} == {"report.md", "report.html", "report.csv"}
    page = (tmp_path / "out" / "report.html").read_text()       # the plots are test_report_html's
    assert "plots left out (--no-plots)" in page and "<img" not in page and "TTFT p50 (ms)" in page
    header, *rows = (tmp_path / "out" / "report.csv").read_text().splitlines()
    assert header.startswith("baseline,candidate,group,metric") and len(rows) >= 15
    assert header.endswith(",band,p_adjusted,gated,runs_baseline,runs_candidate,why")


def test_fail_on_worse_exits_3(sides, tmp_path, capsys):
    assert main(["compare", "--baseline", *map(str, sides[0]), "--candidate", *map(str, sides[1]), "--out",
                 str(tmp_path), "--no-html", "--fail-on-worse"]) == 3
    assert "gated row(s) worse" in capsys.readouterr().err


def test_fail_on_worse_with_one_run_a_side_passes_without_a_verdict(runs, tmp_path, capsys):
    assert main(["compare", str(runs[0]), str(runs[1]), "--out", str(tmp_path), "--no-html",
                 "--fail-on-worse"]) == 3       # the paired similarity drop is gated and decided
    assert main(["compare", str(runs[0]), str(runs[1]), "--out", str(tmp_path), "--no-html",
                 "--fail-on-worse", "--gate", "ttft_*,e2e_*"]) == 0
    assert "gate: passed without a verdict" in capsys.readouterr().out


def test_identical_runs_show_no_change(sides):
    report = report_from_sides([sides[0][0], sides[0][0]], [[sides[0][0], sides[0][0]]],
                               settings=CompareSettings(resamples=500))
    rows = report.comparisons[0].rows
    assert {row.verdict for row in rows if row.test != "values only"} <= {"no change", "too few"}
    assert {row.metric for row in rows if row.test == "values only"} == {      # telemetry maxima: no test
        "telemetry.server.mem_bw_util_pct.max", "telemetry.server.kv_cache_usage_pct.max"}

"""The Markdown report of two hand-made runs, compared word for word with tests/golden/.

The candidate has a first-token regression (TTFT worse), no orchestrator cost on structured
prompts (the structured-minus-plain penalty better), the same decode speed and request rate (ITL
and output tokens/s: no significant change), stalls in every 10th stream, and lower similarity on the same items (a
quality drop, paired). The bootstrap is seeded, so the text is the same on every run; set
``FOURFOLD_UPDATE_GOLDEN=1`` to rewrite the golden file after an intended change.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from test_report_data import RunSpec, write_dataset, write_run

from fourfold.cli import main
from fourfold.reports.compare import Settings
from fourfold.reports.markdown import render_markdown
from fourfold.reports.report import report_from_paths

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
BASELINE_T1 = 1_700_000_600.0
BASELINE = RunSpec("baseline", seed=11, char_f1=(0.60, 0.05))
CANDIDATE = RunSpec("candidate", seed=12, ttft_plain=(170.0, 8.0), ttft_structured=(172.0, 8.0),
                    similarity=(0.80, 0.03), pause_every=10, char_f1=(0.50, 0.05))


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("golden")
    dataset = write_dataset(base / "items.jsonl")
    runs = (write_run(base / "runs", BASELINE, dataset=dataset),
            write_run(base / "runs", CANDIDATE, dataset=dataset, now_s=BASELINE_T1))
    for run, bandwidth in zip(runs, (40.0, 90.0)):      # server telemetry: memory-bandwidth util, KV cache
        samples = [{"t_s": BASELINE_T1 + i, "server.mem_bw_util_pct": bandwidth + i % 3,
                    "server.kv_cache_usage_pct": 10.0 + i} for i in range(12)]
        (run / "server_metrics.json").write_text(json.dumps(samples), encoding="utf-8")
    return runs


def _check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("FOURFOLD_UPDATE_GOLDEN"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"{path} missing: run with FOURFOLD_UPDATE_GOLDEN=1 once"
    assert text == path.read_text(encoding="utf-8")


def test_markdown_report_matches_golden_and_verdicts(runs):
    report = report_from_paths(list(runs), settings=Settings(resamples=2000, seed=0))
    verdicts = {row.metric: row.verdict for row in report.comparisons[0].rows}
    assert verdicts["ttft_p50"] == "worse"                     # the latency regression
    assert verdicts["ttft_structured_penalty"] == "better"     # the orchestrator's cost is gone
    assert verdicts["itl_p50"] == "no significant change"      # same decode speed
    assert verdicts["output_tps"] == "no significant change"   # same request rate and lengths
    assert verdicts["stall_rate"] == "worse"
    assert verdicts["similarity_mean"] == "worse"              # the quality drop
    paired = {row.metric: row.paired for row in report.comparisons[0].rows}
    assert paired["similarity_mean"] and paired["structure_compliance"]
    _check_golden("compare_report.md", render_markdown(report))


def test_report_is_reproducible(runs):
    first = render_markdown(report_from_paths(list(runs)))
    assert render_markdown(report_from_paths(list(runs))) == first


def test_cli_prints_the_table_and_writes_three_files(runs, tmp_path, capsys):
    assert main(["compare", str(runs[0]), str(runs[1]), "--out", str(tmp_path / "out")]) == 0
    printed = capsys.readouterr().out
    assert "| TTFT p50 (ms) |" in printed and "❌ worse" in printed
    assert {p.name for p in (tmp_path / "out").iterdir()} == {"report.md", "report.html", "report.csv"}
    header, *rows = (tmp_path / "out" / "report.csv").read_text().splitlines()
    assert header.startswith("baseline,candidate,group,metric") and len(rows) >= 15


def test_fail_on_worse_exits_3(runs, tmp_path, capsys):
    assert main(["compare", str(runs[0]), str(runs[1]), "--out", str(tmp_path), "--no-html",
                 "--fail-on-worse"]) == 3
    assert "row(s) worse" in capsys.readouterr().err


def test_identical_runs_show_no_change(runs):
    report = report_from_paths([runs[0], runs[0]], settings=Settings(resamples=500))
    rows = report.comparisons[0].rows
    assert {row.verdict for row in rows if row.test != "values only"} == {"no significant change"}
    assert {row.metric for row in rows if row.test == "values only"} == {      # telemetry maxima: no test
        "telemetry.server.mem_bw_util_pct.max", "telemetry.server.kv_cache_usage_pct.max"}

"""What `fourfold compare` says before its rows: the sides sent different workloads (a warning, exit 2
with --strict), a side with too few requests, a side whose load generator was starved."""

from __future__ import annotations

import json
from pathlib import Path

from fourfold.cli import main
from fourfold.reports.report import report_from_paths
from tests.rundirs import RunSpec, write_dataset, write_run


def _with_meta(run: Path, **fields: object) -> Path:
    meta = json.loads((run / "meta.json").read_text())
    meta.update(fields)
    (run / "meta.json").write_text(json.dumps(meta))
    return run


def _with_summary(run: Path, **fields: object) -> Path:
    path = run / "summary.json"
    summary = json.loads(path.read_text()) if path.is_file() else {}
    summary.update(fields)
    path.write_text(json.dumps(summary))
    return run


def test_different_datasets_are_a_loud_warning_and_strict_refuses(tmp_path, capsys):
    dataset = write_dataset(tmp_path / "items.jsonl")
    base = _with_meta(write_run(tmp_path / "runs", RunSpec("a", seed=1), dataset=dataset),
                      dataset_sha256="1a" * 32, dataset_name="prompts.jsonl", dataset_items=46)
    cand = _with_meta(write_run(tmp_path / "runs", RunSpec("b", seed=2), dataset=dataset,
                                now_s=1_700_000_900.0),
                      dataset_sha256="9f" * 32, dataset_name="mine.jsonl", dataset_items=5)
    report = report_from_paths([base, cand], cache=False)
    assert [d.field for d in report.workload_differences] == ["dataset"]
    assert report.warnings[0].startswith(
        "the sides sent different workloads: dataset (baseline sha256 1a1a1a1a")
    assert main(["compare", str(base), str(cand), "--out", str(tmp_path / "r"), "--no-html"]) == 0
    captured = capsys.readouterr()
    assert "warning: the sides sent different workloads: dataset" in captured.err
    assert "> **Warning:** the sides sent different workloads" in (tmp_path / "r" / "report.md").read_text()
    assert main(["compare", str(base), str(cand), "--out", str(tmp_path / "s"), "--strict"]) == 2
    assert "--strict: the sides sent different workloads: dataset" in capsys.readouterr().err


def test_the_same_dataset_and_enough_requests_say_nothing(tmp_path):
    dataset = write_dataset(tmp_path / "items.jsonl")
    runs = [_with_meta(write_run(tmp_path / "runs", RunSpec(label, seed=seed), dataset=dataset, now_s=now),
                       dataset_sha256="1a" * 32) for label, seed, now in (("a", 1, 1_700_000_000.0),
                                                                          ("b", 2, 1_700_000_900.0))]
    assert report_from_paths(runs, cache=False).warnings == []


def test_a_side_with_four_requests_and_a_starved_generator_are_warnings(tmp_path):
    dataset = write_dataset(tmp_path / "items.jsonl")
    base = write_run(tmp_path / "runs", RunSpec("a", seed=1, n=4), dataset=dataset)
    cand = _with_summary(write_run(tmp_path / "runs", RunSpec("b", seed=2), dataset=dataset,
                                   now_s=1_700_000_900.0),
                         generator={"cpu_pct_mean": 97.0, "cpu_pct_max": 100.0, "loop_lag_ms_p50": 30.0,
                                    "loop_lag_ms_p99": 120.0, "loop_lag_ms_max": 300.0, "samples": 400,
                                    "processes": 1, "starved": True, "why": "CPU 97 % of a core"})
    warnings = report_from_paths([base, cand], cache=False).warnings
    assert any(w.startswith("a l1:saturation has 4 requests, fewer than 30") for w in warnings), warnings
    assert any(w.startswith("b (") and "the load generator was starved" in w for w in warnings), warnings

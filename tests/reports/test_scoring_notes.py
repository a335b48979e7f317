"""The report says how runs were scored: a warning (Markdown and HTML) when baseline and candidate
were scored by different embedding models or backends, and each run's low-confidence answers;
a low-confidence row's similarity is left out of the comparison."""

from __future__ import annotations

import json
import math

from fourfold.reports.compare import CompareSettings
from fourfold.reports.html import render_html
from fourfold.reports.markdown import render_markdown
from fourfold.reports.report import report_from_paths
from fourfold.reports.scores import read_scores
from tests.rundirs import RunSpec, write_run

FP32 = {"name": "all-MiniLM-L6-v2", "weights_sha256": "ca23fb4b4077" + "0" * 52,
        "backend": "torch-fp32", "id": "m"}


def _scored(run, embedder: dict, low: int = 0) -> None:
    summary = json.loads((run / "summary.json").read_text())
    summary["quality"] = {"total": {"n": 10, "low_confidence_n": low, "char_f1_mean": 0.5, "char_f1_n": 10},
                          "by_scenario": {}, "model": embedder["id"], "embedder": embedder,
                          "unk_threshold": 0.2}
    (run / "summary.json").write_text(json.dumps(summary))


def test_different_backends_warn_in_markdown_and_html(tmp_path) -> None:
    base = write_run(tmp_path / "runs", RunSpec("base", seed=1, n=20))
    cand = write_run(tmp_path / "runs", RunSpec("cand", seed=2, n=20))
    _scored(base, FP32)
    _scored(cand, {**FP32, "backend": "torch-bf16", "id": "m:bf16"}, low=3)
    report = report_from_paths([base, cand], settings=CompareSettings(resamples=50))
    markdown, page = render_markdown(report), render_html(report, plots=False)
    for text in (markdown, page):
        assert "WARNING: the runs were scored with different embedding models or backends" in text
        assert "backend torch-fp32" in text and "backend torch-bf16" in text
        assert "cand: 3 of 10 answers are low-confidence" in text
    _scored(cand, FP32)                                       # scored alike: no warning
    report = report_from_paths([base, cand], settings=CompareSettings(resamples=50))
    assert "WARNING" not in render_markdown(report) and "WARNING" not in render_html(report, plots=False)


def test_different_models_warn(tmp_path) -> None:
    base = write_run(tmp_path / "runs", RunSpec("base", seed=1, n=20))
    cand = write_run(tmp_path / "runs", RunSpec("cand", seed=2, n=20))
    _scored(base, FP32)
    _scored(cand, {**FP32, "name": "paraphrase-multilingual-MiniLM-L12-v2", "weights_sha256": "ab" * 32})
    markdown = render_markdown(report_from_paths([base, cand], settings=CompareSettings(resamples=50)))
    assert "different embedding models" in markdown and "paraphrase-multilingual-MiniLM-L12-v2" in markdown


def test_low_confidence_similarity_is_left_out(tmp_path) -> None:
    path = tmp_path / "scores.jsonl"
    path.write_text('{"item_id": "a", "similarity": 0.9, "low_confidence": false}\n'
                    '{"item_id": "b", "similarity": 0.8, "low_confidence": true}\n'
                    '{"item_id": "c", "similarity": 0.7}\n')
    sims = read_scores(path).frame["similarity"].tolist()
    assert sims[0] == 0.9 and math.isnan(sims[1]) and sims[2] == 0.7

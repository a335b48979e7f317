"""report.html: self-contained, and every string from a run escaped."""

from __future__ import annotations

import base64
import re

from test_report_data import RunSpec, write_run

from fourfold.reports.compare import Settings
from fourfold.reports.html import render_html
from fourfold.reports.report import report_from_paths

ATTACK = "<script>alert(1)</script>"


def _report(tmp_path, text: str = ATTACK, label: str = "base"):
    base = write_run(tmp_path / "runs", RunSpec(label, seed=1, n=40, text=text, pause_every=5))
    cand = write_run(tmp_path / "runs", RunSpec("cand", seed=2, n=40, text=text, pause_every=3))
    return report_from_paths([base, cand], settings=Settings(resamples=200))


def test_model_output_and_labels_are_escaped(tmp_path):
    page = render_html(_report(tmp_path, label="x<script>alert(2)</script>"))
    assert "<script" not in page.lower()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page      # the answer is shown, as text
    assert "alert(2)" in page and "<script>alert(2)" not in page


def test_page_is_self_contained_with_plots_and_definitions(tmp_path):
    page = render_html(_report(tmp_path, text="a plain answer"))
    assert not re.search(r"""(?:src|href)=["'](?!data:|#)""", page)          # nothing loaded from elsewhere
    images = re.findall(r'<img src="data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)"', page)
    assert len(images) >= 5                                   # CDFs, ITL, tokens/s, similarity, waveforms
    for data in images:
        svg = base64.b64decode(data).decode("utf-8")
        assert svg.lstrip().startswith("<?xml") and "<script" not in svg
    assert "Metric definitions" in page and "inter-chunk latency" in page
    assert "Stream waveforms" in page and "typical (median E2E)" in page and "worst (most stalls" in page


def test_dollar_signs_in_labels_do_not_break_the_plots(tmp_path):
    page = render_html(_report(tmp_path, text="costs $5 and $6", label="v$1"))
    assert "v$1" in page

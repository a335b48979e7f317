"""docs/metrics.md against the code: its table is the metric registry's (names, units,
definitions, where each is shown), and what it says of percentiles matches the histogram."""

from __future__ import annotations

from pathlib import Path

import pytest

from fourfold.measure import metric_names
from fourfold.measure.histogram import DEFAULT_ALPHA
from fourfold.reports.glossary import DEFINITIONS

PAGE = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"


def test_the_page_s_table_is_the_registry_s():
    page = PAGE.read_text(encoding="utf-8")
    assert metric_names.with_table(page) == page, (
        "docs/metrics.md and fourfold/measure/metric_names.py differ: run "
        "python -m fourfold.measure.metric_names --write docs/metrics.md (and review the diff)")
    for metric in metric_names.METRICS:
        assert f"| `{metric.name}` | " in page


def test_the_page_states_the_histogram_s_error_and_the_report_s_exact_percentiles():
    page = PAGE.read_text(encoding="utf-8")
    assert f"alpha = {DEFAULT_ALPHA}" in page and f"({DEFAULT_ALPHA:.1%}".replace("%", " %") in page
    assert "**exact**" in page and "**log-bucket histograms**" in page


def test_the_report_footnote_defines_what_the_page_defines():
    for name, text, vllm, aiperf in DEFINITIONS:
        metric = metric_names.by_name(name)
        assert text.startswith(metric.definition) and (vllm, aiperf) == (metric.vllm, metric.aiperf)


def test_write_replaces_only_the_generated_block(tmp_path):
    page = tmp_path / "metrics.md"
    page.write_text(f"# x\n\nbefore\n{metric_names.BEGIN_MARK}\nstale\n{metric_names.END_MARK}\nafter\n")
    assert metric_names.main(["--write", str(page)]) == 0
    text = page.read_text()
    assert "stale" not in text and text.startswith("# x\n\nbefore\n") and text.endswith("\nafter\n")
    assert metric_names.markdown_table() in text
    with pytest.raises(ValueError, match="no"):
        metric_names.with_table("# a page without the marks\n")

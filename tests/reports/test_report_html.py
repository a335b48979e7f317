"""report.html: self-contained, and every string from a run escaped."""

from __future__ import annotations

import base64
import re

import pytest

from fourfold.reports import html as html_module
from fourfold.reports import plots
from fourfold.reports.compare import CompareSettings
from fourfold.reports.html import code_spans, render_html
from fourfold.reports.report import report_from_paths
from tests.rundirs import RunSpec, write_run

ATTACK = "<script>alert(1)</script>"


def _report(tmp_path, text: str = ATTACK, label: str = "base"):
    base = write_run(tmp_path / "runs", RunSpec(label, seed=1, n=40, text=text, pause_every=5))
    cand = write_run(tmp_path / "runs", RunSpec("cand", seed=2, n=40, text=text, pause_every=3))
    return report_from_paths([base, cand], settings=CompareSettings(resamples=200))


@pytest.fixture(scope="module")
def plain_page(tmp_path_factory) -> str:
    """One rendered page of plain answers, read by the tests below (each render plots every figure)."""
    return render_html(_report(tmp_path_factory.mktemp("plain"), text="a plain answer"))


@pytest.fixture(scope="module")
def hostile_page(tmp_path_factory) -> str:
    """One page whose answers and label hold markup and matplotlib's ``$`` (math mode) at once."""
    return render_html(_report(tmp_path_factory.mktemp("hostile"), text=f"costs $5 and $6 {ATTACK}",
                               label="v$1 x<script>alert(2)</script>"))


def test_model_output_and_labels_are_escaped(hostile_page):
    page = hostile_page
    assert "<script" not in page.lower()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page      # the answer is shown, as text
    assert "alert(2)" in page and "<script>alert(2)" not in page


def test_page_is_self_contained_with_plots_and_definitions(plain_page):
    page = plain_page
    assert not re.search(r"""(?:src|href)=["'](?!data:|#)""", page)          # nothing loaded from elsewhere
    images = re.findall(r'<img src="data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)"', page)
    assert len(images) >= 5                                   # CDFs, ITL, tokens/s, similarity, waveforms
    for data in images:
        svg = base64.b64decode(data).decode("utf-8")
        assert svg.lstrip().startswith("<?xml") and "<script" not in svg
    assert "Metric definitions" in page and "inter-chunk latency" in page
    assert "Stream waveforms" in page and "typical (median E2E)" in page and "worst (most stalls" in page


def test_dollar_signs_in_labels_do_not_break_the_plots(hostile_page):
    assert "v$1 x&lt;script&gt;" in hostile_page and "costs $5 and $6" in hostile_page
    assert len(re.findall(r'<img src="data:image/svg', hostile_page)) >= 5      # every plot was drawn


def test_definitions_show_code_spans_as_code_not_backticks(plain_page):
    """The definitions are written for docs/metrics.md: their `code` spans become <code> elements."""
    page = plain_page
    definitions = page[page.index("<h2>Metric definitions</h2>"):]
    assert "`" not in definitions
    assert "(quality&#x27;s <code>fact_checked_n</code>)" in definitions
    assert "share of <code>[UNK]</code> word pieces" in definitions


@pytest.mark.parametrize(("text", "expected"), [
    ("a `name` b", "a <code>name</code> b"),
    ("`<b>` & `x`", "<code>&lt;b&gt;</code> &amp; <code>x</code>"),          # escaped inside and out
    ("one ` alone", "one ` alone"),
    ("`a` and ` alone", "<code>a</code> and ` alone"),
    ("none", "none"),
])
def test_code_spans(text, expected):
    assert code_spans(text) == expected


def _svg(page: str, alt: str) -> str:
    pattern = r'<img src="data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)" alt="' + re.escape(alt) + '"'
    data = re.search(pattern, page)
    assert data, alt
    return base64.b64decode(data.group(1)).decode("utf-8")


def test_waveforms_use_the_sides_colours_and_say_typical_and_worst(plain_page):
    """Red and blue are the candidate and the baseline in every plot; the waveforms' typical and worst
    request differ by fill and dash (issue 31 item 8: red/blue meant worst/typical there)."""
    page = plain_page
    baseline, candidate = plots.COLORS[:2]
    assert _svg(page, "TTFT CDF").count(baseline) and _svg(page, "TTFT CDF").count(candidate)
    for alt, own, other in (("stream waveform of base", baseline, candidate),
                            ("stream waveform of cand", candidate, baseline)):
        svg = _svg(page, alt)
        assert own in svg and other not in svg, alt
        assert "<!-- typical request (filled) -->" in svg and "<!-- worst request (dashed) -->" in svg
        assert "stroke-dasharray" in svg
    assert html_module.WAVEFORM_NOTE in page
    assert plots.WAVEFORM_LEGEND == {False: "typical request (filled)", True: "worst request (dashed)"}

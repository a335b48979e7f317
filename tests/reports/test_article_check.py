"""The article check (issue #18 item 1): the table's own test decides, direction and margins included."""

from __future__ import annotations

import numpy as np
import pytest

from fourfold.reports import article
from fourfold.reports.article import CLAIMS, NOT_MEASURED, NOT_REPRODUCED, REPRODUCED, check_rows, judge
from fourfold.reports.compare import CompareSettings, GroupSample, Row, compare_groups
from fourfold.reports.html import render_html as render_report_html
from fourfold.reports.markdown import render_markdown as render_report_markdown
from fourfold.reports.report import Comparison, Report, Section, Side

SETTINGS = CompareSettings(resamples=500)


def claim(metric: str) -> article.Claim:
    return next(c for c in CLAIMS if metric in c.metrics)


def row(metric: str, delta: float, ci: tuple[float, float], p: float, verdict: str, *,
        group: str = "l1:saturation", unit: str = "ms", better: str = "lower",
        baseline: float = 100.0) -> Row:
    return Row(group, metric, metric, unit, better, baseline, baseline + delta, delta, delta / baseline * 100,
               ci[0], ci[1], p, verdict, "bootstrap", 200, 200)


def e2e_rows(shift_ms: float, unit: str = "arm") -> list[Row]:
    """Two A/B arms' L1 groups whose E2E latencies differ by ``shift_ms``, through the table's own test."""
    base = np.linspace(100.0, 2000.0, 3000)
    return compare_groups("l1:saturation", GroupSample(requests=3000, ok=3000, e2e_ms=base, unit=unit),
                          GroupSample(requests=3000, ok=3000, e2e_ms=np.sort(base + shift_ms),
                                      unit=unit), SETTINGS)


def e2e_p99_finding(rows: list[Row]) -> article.Finding:
    return next(f for f in check_rows(rows) if f.claim.metrics == ("e2e_p99",))


def test_a_difference_inside_the_band_is_not_reproduced():
    rows = e2e_rows(1.0)           # p99 up by 1 ms of ~2000: the old check said "yes" for any delta > 0
    p99 = next(r for r in rows if r.metric == "e2e_p99")
    assert p99.delta > 0 and p99.verdict in ("equivalent", "inconclusive")
    finding = e2e_p99_finding(rows)
    assert finding.outcome == NOT_REPRODUCED and finding.why.startswith(p99.verdict)
    assert article.magnitude(finding.claim, p99) == "0.0022x the article's"


def test_a_change_in_the_articles_direction_is_reproduced_with_its_magnitude():
    rows = e2e_rows(400.0)
    finding = e2e_p99_finding(rows)
    assert finding.row is not None and finding.row.verdict == "worse"       # up is worse for a latency
    assert finding.outcome == REPRODUCED and finding.why == "direction: worse, up"
    # +400 of ~1981 ms = +20 %, the article's 1120 -> 1380 ms is +23 %
    assert article.magnitude(finding.claim, finding.row) == "within 2x (0.87x)"
    assert "+23 %" in article.cells(finding) and "+20 %" in article.cells(finding)


def test_a_change_the_wrong_way_is_not_reproduced():
    finding = e2e_p99_finding(e2e_rows(-400.0))
    assert finding.row.verdict == "better"
    assert (finding.outcome, finding.why) == (NOT_REPRODUCED, "wrong direction (better, down)")
    assert article.magnitude(finding.claim, finding.row) == "opposite sign"


def test_one_run_a_side_reproduces_nothing():
    finding = e2e_p99_finding(e2e_rows(400.0, unit="run"))
    assert (finding.outcome, finding.why) == (NOT_REPRODUCED, "no verdict: one run a side")


@pytest.mark.parametrize(("ci_low", "outcome"), [(-0.029, REPRODUCED), (-0.031, NOT_REPRODUCED),
                                                 (0.01, REPRODUCED)])
def test_about_equal_is_non_inferiority_with_a_stated_margin(ci_low, outcome):
    fingerprint = claim("similarity_mean")
    assert fingerprint.direction == article.EQUAL and fingerprint.margin == 0.03
    similarity = row("similarity_mean", 0.03, (ci_low, 0.06), 0.2, "inconclusive", unit="cos",
                     better="higher", baseline=0.79)
    finding = judge(fingerprint, similarity)
    assert finding.outcome == outcome
    assert finding.expected == "about equal (non-inferiority, margin 0.03 cos)"


def test_a_missing_metric_is_not_measured_and_levels_are_respected():
    rows = [row("recall_at_k", 10.8, (5.0, 16.0), 0.001, "better", group="l1:saturation", unit="%",
                better="higher")]
    findings = {f.claim.effect: f for f in check_rows(rows)}
    assert findings["L3 fact errors"].outcome == NOT_MEASURED
    assert findings["L3 top-3 recall"].outcome == NOT_MEASURED        # an L1 row does not stand for L3
    rows = [row("recall_at_k", 10.8, (5.0, 16.0), 0.001, "better", group="l3:rag", unit="%", better="higher")]
    assert judge(claim("recall_at_k"), article.find_row(rows, claim("recall_at_k"))).outcome == REPRODUCED


def test_the_whole_article_table_is_covered():
    metrics = {m for c in CLAIMS for m in c.metrics}
    assert {"ttft_structured_penalty", "e2e_p95", "e2e_p99", "itl_p95", "itl_p99", "stall_rate", "output_tps",
            "conn_reuse", "recall_at_k", "fact_error_rate", "similarity_mean", "rounds_mean",
            "structure_compliance"} <= metrics
    assert any("mem_bw_util" in m for m in metrics)
    assert len(check_rows([])) == len(CLAIMS) and all(f.outcome == NOT_MEASURED for f in check_rows([]))


def test_markdown_and_html_are_tables_with_escaped_cells():
    hostile = row("e2e_p99", 400.0, (300.0, 500.0), 0.0001, "worse", group="l1:<script>|x")
    findings = check_rows([hostile])
    markdown = article.render_markdown(findings)
    assert "| effect | article | level |" in markdown
    assert "| reproduced: direction: worse, up | 17x the article's |" in markdown    # our own text as it is
    assert "l1:&lt;script&gt;\\|x" in markdown and "<script>" not in markdown
    page = article.render_html(findings)
    assert page.count("<table>") == 1 and page.count("<tr") == len(CLAIMS) + 1
    assert "&lt;script&gt;" in page and "<script>" not in page
    assert '<tr class="better"><td>E2E p99</td>' in page


def test_the_report_renders_the_section_as_html_not_preformatted_markdown():
    findings = check_rows([row("e2e_p99", 400.0, (300.0, 500.0), 0.001, "worse")])
    side_b, side_c = Side("baseline", []), Side("candidate", [])
    report = Report([Comparison(side_b, side_c, [])], SETTINGS,
                    sections=[Section(article.render_markdown(findings), article.render_html(findings))])
    page = render_report_html(report)
    assert "<h2>Article check</h2>" in page and "<pre>## Article check" not in page
    assert "## Article check" in render_report_markdown(report)


def test_two_runs_of_one_version_reproduce_nothing(tmp_path):
    """Two run directories drawn from the same distributions (different seeds), read and compared as
    `fourfold compare` does: no up/down row of the article may come out "reproduced"; the
    fingerprint's about-equal row is non-inferior, as two equal versions are."""
    from fourfold.reports.load import load_run
    from fourfold.reports.report import build_report
    from tests.rundirs import RunSpec, write_dataset, write_run

    dataset = write_dataset(tmp_path / "items.jsonl")
    runs = [load_run(write_run(tmp_path / "runs", RunSpec(label, seed=seed, n=400, pause_every=30),
                               dataset=dataset),
                     cache=False) for label, seed in (("a", 11), ("a", 13), ("b", 12), ("b", 14))]
    report = build_report(Side("a", runs[:2]), [Side("b", runs[2:])], SETTINGS)      # two runs a side
    findings = check_rows(report.comparisons[0].rows)
    measured = [f for f in findings if f.outcome != NOT_MEASURED]
    assert {f.claim.metrics[0] for f in measured} >= {"e2e_p95", "e2e_p99", "itl_p99", "stall_rate",
                                                      "ttft_structured_penalty", "similarity_mean"}
    for finding in measured:
        if finding.claim.direction == article.EQUAL:
            assert finding.outcome == REPRODUCED, finding
        else:
            assert finding.outcome == NOT_REPRODUCED, finding
            assert finding.why.startswith(("inconclusive", "equivalent", "no change", "too few")), finding


# ---- the terminal's compact table (issue 31 item 8: the demo printed 314 columns and wrapped) ----

def _demo_like_findings() -> list[article.Finding]:
    """Rows as a demo gives them: long reasons, a too-few row, a non-inferior one, a long group name."""
    import dataclasses

    stall = row("stall_rate", 3.5, (0.3, 6.7), 0.01, "inconclusive", unit="%", baseline=1.0)
    stall = dataclasses.replace(stall, why="better alone (p 0.0137), not after Holm over 32 rows (p 0.219)")
    few = dataclasses.replace(row("e2e_p95", 50.0, (40.0, 60.0), 0.01, "too few", group="l1:" + "x" * 200),
                              why="p95 of 173 values (needs 200)", ci_low=None, ci_high=None)
    similarity = row("similarity_mean", 0.03, (-0.01, 0.06), 0.2, "inconclusive", unit="cos", better="higher",
                     baseline=0.79)
    return check_rows([row("e2e_p99", 400.0, (300.0, 500.0), 0.0001, "worse"), stall, few, similarity])


@pytest.mark.parametrize("width", [160, 120, 100])
def test_the_terminal_table_fits_the_width(width):
    findings = _demo_like_findings()
    assert max(len(line) for line in article.render_markdown(findings).splitlines()) > 300  # the whole
    lines = article.render_terminal(findings, width).splitlines()
    assert max(article.display_width(line) for line in lines) <= width
    table = [line for line in lines if line.startswith("| ")]
    assert len(table) == len(CLAIMS) + 1
    assert len({article.display_width(line) for line in table}) == 1          # aligned


def test_the_terminal_table_says_the_outcome_in_a_few_words():
    lines = article.render_terminal(_demo_like_findings()).splitlines()
    assert lines[:3] == ["## Article check", "",
                         "| effect                      | level                  |              Δ [95% CI] "
                         "| verdict                  | direction                    | magnitude         |"]
    dashes = ["-" * 29, "-" * 24, "-" * 24 + ":", "-" * 26, "-" * 30, "-" * 19]
    assert lines[3] == "|" + "|".join(dashes) + "|"
    assert lines[6] == ("| E2E p99                     | l1:saturation          | +400.0 [+300.0, +500.0] "
                        "| ❌ worse                 | reproduced: worse, up        | 17x the article's |")
    rows = {cells[0]: cells[1:] for cells in ([c.strip() for c in line.strip("|").split("|")]
                                              for line in lines if line.startswith("| "))}
    assert rows["E2E p95"] == ["l1:" + "x" * 18 + "…", "+50.0", "· too few (p95 of 173 v…",
                               "not reproduced: too few data", "opposite sign"]
    assert rows["stall rate"][2:4] == ["❔ inconclusive (not af…", "not reproduced: inconclusive"]
    assert rows["fingerprint"][1:4] == ["+0.030 [-0.010, +0.060]", "❔ inconclusive",
                                        "reproduced: non-inferior"]
    assert rows["structured-prompt first-to…"] == ["l1/l2", "-", "-", "not measured: no row", "-"]
    assert lines[-2:] == [article.summary_line(_demo_like_findings()),
                          "(the whole table, with the article's figures: report.md, report.html)"]


def test_the_demo_prints_the_compact_table():
    from fourfold.cli.demo import render_check

    findings = _demo_like_findings()
    assert render_check(findings) == article.render_terminal(findings, 160)
    assert render_check(findings, width=120) == article.render_terminal(findings, 120)


@pytest.mark.parametrize(("why", "brief"), [
    ("direction: worse, up", "worse, up"),
    ("inconclusive (better alone (p 0.0137), not after Holm over 32 rows (p 0.219))", "inconclusive"),
    ("too few data (p95 of 173 values (needs 200))", "too few data"),
    ("non-inferior: CI low +0.021 > −0.03", "non-inferior"),
    ("inferiority not ruled out: CI low -0.05 ≤ −0.03", "inferiority not ruled out"),
    ("no verdict: one run a side", "no verdict"),
    ("wrong direction (better, down)", "wrong direction"),
    ("", ""),
])
def test_brief_why(why, brief):
    assert article.brief_why(why) == brief


@pytest.mark.parametrize(("text", "width", "expected"), [
    ("within 2x", 20, "within 2x"),
    ("within 2x (0.87x)", 10, "within 2x…"),
    ("❔ inconclusive", 15, "❔ inconclusive"),       # the symbol takes two columns
    ("❔ inconclusive", 14, "❔ inconclusi…"),
    ("✅ better", 2, "…"),
])
def test_clip(text, width, expected):
    clipped = article.clip(text, width)
    assert clipped == expected and article.display_width(clipped) <= width


@pytest.mark.parametrize(("natural", "minimum", "budget", "expected"), [
    ([10, 20, 30], [5, 5, 5], 100, [10, 20, 30]),            # fits: untouched
    ([10, 20, 30], [5, 5, 25], 50, [10, 10, 30]),            # the most above its minimum gives first
    ([10, 20, 30], [10, 20, 30], 48, [10, 19, 19]),          # below the minimums: the widest first
    ([3, 4], [9, 9], 100, [3, 4]),                           # a minimum above the natural width adds nothing
])
def test_fit_widths(natural, minimum, budget, expected):
    assert article.fit_widths(natural, minimum, budget) == expected

"""The article check: the article's comparison table, row by row, against a comparison report.

The article (``seed/article.zh.txt``, figures in MISSION.md) compares an old and a new version of
one serving stack. :data:`CLAIMS` holds its table as data: per row the effect, the article's
figure, the report metric(s) that measure it, the level, and the direction of the change the
article reports: ``up``, ``down`` or ``about equal`` (with a non-inferiority margin stated in
the metric's unit).

:func:`check_rows` judges each claim by the row of the comparison table (:class:`reports.compare.Row`),
so the article check and the table can never disagree:

- ``up`` / ``down``: **reproduced** only when the table's test is significant (its verdict is
  ``better`` or ``worse``, i.e. ``p < alpha``) *and* the change goes the article's way; otherwise
  **not reproduced**, with why (not significant, wrong direction, too few data for a test);
- ``about equal`` (the fingerprint: the speed-up did not cost quality): a non-inferiority test,
  **reproduced** when the bound of the difference's confidence interval on the worse side lies
  inside the margin (for a higher-is-better metric, ``ci_low > -margin``);
- **not measured** when the report has no row for the metric at that level (or a side has no value).

:func:`render_markdown` and :func:`render_html` draw the same table; every cell is escaped.
"""

from __future__ import annotations

import fnmatch
import html
from dataclasses import dataclass

from fourfold.reports.compare import BETTER, WORSE, Row
from fourfold.reports.glossary import fmt_ci, fmt_delta, fmt_p, fmt_value, verdict_text

__all__ = ["CLAIMS", "Claim", "Finding", "check_rows", "render_html", "render_markdown"]

UP, DOWN, EQUAL = "up", "down", "about equal"
REPRODUCED, NOT_REPRODUCED, NOT_MEASURED = "reproduced", "not reproduced", "not measured"


@dataclass(frozen=True)
class Claim:
    """One row of the article's table."""

    effect: str
    article: str                     # the article's figure, as it states it
    metrics: tuple[str, ...]         # report metric names (fnmatch patterns), the first present wins
    levels: tuple[str, ...]          # the levels whose groups measure it, preferred first
    direction: str                   # UP, DOWN or EQUAL
    margin: float | None = None      # EQUAL: the non-inferiority margin, in the metric's unit


CLAIMS: tuple[Claim, ...] = (
    Claim("structured-prompt first-token cost B − A", "58 ± 12 → ≤ 3 ms", ("ttft_structured_penalty",), ("l1", "l2"),
          DOWN),
    Claim("E2E p95", "≤ 800 → 412 ms", ("e2e_p95",), ("l1",), DOWN),
    Claim("E2E p99", "1120 → 1380 ms", ("e2e_p99",), ("l1",), UP),
    Claim("ITL p95 (between pulses)", "smooth → faster tokens", ("itl_p95",), ("l1",), DOWN),
    Claim("ITL p99 (pulses)", "jitter under 5 ms → ~200 ms pauses", ("itl_p99",), ("l1",), UP),
    Claim("stall rate (gaps over 150 ms)", "more stalls (pulses)", ("stall_rate",), ("l1",), UP),
    Claim("output tokens/s", "+32 % (1850 tok/s)", ("output_tps_per_user", "output_tps"), ("l1",), UP),
    Claim("GPU memory-bandwidth utilisation", "42 → 92 %", ("*mem_bw_util*mean*", "*mem_bw_util*"), ("l1",), UP),
    Claim("L2 connection reuse", "→ 89 %", ("conn_reuse",), ("l2",), UP),
    Claim("L3 top-3 recall", "68.3 → 79.1 %", ("recall_at_k",), ("l3",), UP),
    Claim("L3 fact errors", "12.4 → 5.1 %", ("fact_error_rate",), ("l3",), DOWN),
    Claim("fingerprint (similarity mean)", "0.79 → 0.82 (about equal)", ("similarity_mean",), ("l1", "l3"), EQUAL,
          margin=0.03),
    Claim("L4 rounds per session", "4.2 → 3.1", ("rounds_mean",), ("l4",), DOWN),
    Claim("structure compliance (asked n items, got n)", "99.2 → 94.7 %", ("structure_compliance",), ("l1",), DOWN),
)


@dataclass(frozen=True)
class Finding:
    """A claim, the report row that measures it (None: not measured) and the outcome."""

    claim: Claim
    row: Row | None
    outcome: str                     # REPRODUCED, NOT_REPRODUCED or NOT_MEASURED
    why: str = ""

    @property
    def expected(self) -> str:
        claim = self.claim
        if claim.direction != EQUAL:
            return claim.direction
        unit = f" {self.row.unit}" if self.row is not None else ""
        return f"about equal (non-inferiority, margin {claim.margin:g}{unit})"


def find_row(rows: list[Row], claim: Claim) -> Row | None:
    """The row of the first metric pattern and level (in the claim's order) the rows hold."""
    for pattern in claim.metrics:
        for level in claim.levels:
            for row in rows:
                if row.group.startswith(f"{level}:") and fnmatch.fnmatchcase(row.metric, pattern):
                    return row
    return None


def judge(claim: Claim, row: Row | None) -> Finding:
    """The outcome of one claim given the table's row (see module docstring)."""
    if row is None:
        return Finding(claim, None, NOT_MEASURED, f"no {' / '.join(claim.metrics)} row at {' / '.join(claim.levels)}")
    if row.baseline is None or row.candidate is None or row.delta is None:
        side = "baseline" if row.baseline is None else "candidate"
        return Finding(claim, row, NOT_MEASURED, f"no {side} value")
    if claim.direction == EQUAL:
        return _non_inferior(claim, row)
    if row.p_value is None or row.ci_low is None or row.ci_high is None:
        return Finding(claim, row, NOT_REPRODUCED, "too few data for a test")
    if row.verdict not in (BETTER, WORSE):
        return Finding(claim, row, NOT_REPRODUCED, f"not significant ({_p(row)})")
    went = UP if row.delta > 0 else DOWN
    if went != claim.direction:
        return Finding(claim, row, NOT_REPRODUCED, f"wrong direction (significant, {went})")
    return Finding(claim, row, REPRODUCED, f"significant ({_p(row)}), {went}")


def _p(row: Row) -> str:
    text = fmt_p(row.p_value)
    return f"p {text}" if text.startswith("<") else f"p = {text}"


def _non_inferior(claim: Claim, row: Row) -> Finding:
    margin = claim.margin or 0.0
    if row.ci_low is None or row.ci_high is None:
        return Finding(claim, row, NOT_REPRODUCED, "too few data for a confidence interval")
    if row.better == "higher":
        bound, inside = row.ci_low, row.ci_low > -margin
        text = f"CI low {fmt_delta(bound, row.unit)} {'>' if inside else '≤'} −{margin:g}"
    else:
        bound, inside = row.ci_high, row.ci_high < margin
        text = f"CI high {fmt_delta(bound, row.unit)} {'<' if inside else '≥'} +{margin:g}"
    return Finding(claim, row, REPRODUCED if inside else NOT_REPRODUCED,
                   ("non-inferior: " if inside else "inferiority not ruled out: ") + text)


def check_rows(rows: list[Row], claims: tuple[Claim, ...] = CLAIMS) -> list[Finding]:
    """One finding per claim, in the article's order."""
    return [judge(claim, find_row(rows, claim)) for claim in claims]


# ---- rendering ----
HEADER = ("effect", "article", "level", "baseline → candidate", "Δ [95% CI]", "p", "table's verdict", "expected",
          "reproduced")


def cells(finding: Finding) -> list[str]:
    """The table's cells for one finding (plain text; the renderers escape)."""
    claim, row = finding.claim, finding.row
    outcome = f"{finding.outcome}: {finding.why}" if finding.why else finding.outcome
    if row is None:
        return [claim.effect, claim.article, "/".join(claim.levels), "-", "-", "-", "-", finding.expected, outcome]
    unit = row.unit
    values = f"{fmt_value(row.baseline, unit)} → {fmt_value(row.candidate, unit)} {unit}"
    ci = fmt_ci(row.ci_low, row.ci_high, unit)
    delta = fmt_delta(row.delta, unit) + ("" if ci == "-" else f" {ci}")
    return [claim.effect, claim.article, row.group, values, delta, fmt_p(row.p_value), verdict_text(row),
            finding.expected, outcome]


def summary_line(findings: list[Finding]) -> str:
    counts = {name: sum(f.outcome == name for f in findings) for name in (REPRODUCED, NOT_REPRODUCED, NOT_MEASURED)}
    return (f"{counts[REPRODUCED]} of {len(findings)} rows reproduced, {counts[NOT_REPRODUCED]} not reproduced, "
            f"{counts[NOT_MEASURED]} not measured.")


INTRO = ("The article's table (old version → new) next to this comparison (baseline → candidate). A row is "
         "*reproduced* only when the table's own test is significant and the change goes the article's way; "
         "an *about equal* row when the confidence interval of the difference stays inside the stated "
         "non-inferiority margin.")


def _md_cell(text: str, *, from_run: bool = False) -> str:
    """A cell of the Markdown table: ``|``, ``*``, newlines and backticks made harmless; a string from a run
    (the group name) HTML-escaped as well (ours, such as ``p = <0.001``, print as they are)."""
    text = html.escape(text, quote=False) if from_run else text
    return text.replace("|", "\\|").replace("\n", " ").replace("`", "'").replace("*", "\\*")


def render_markdown(findings: list[Finding]) -> str:
    lines = ["## Article check", "", INTRO, "", "| " + " | ".join(HEADER) + " |",
             "|" + "|".join(("---", "---", "---", "---:", "---:", "---:", "---", "---", "---")) + "|"]
    lines += ["| " + " | ".join(_md_cell(c, from_run=i == 2) for i, c in enumerate(cells(f))) + " |"
              for f in findings]
    lines += ["", summary_line(findings)]
    return "\n".join(lines)


def render_html(findings: list[Finding]) -> str:
    def e(text: str) -> str:
        return html.escape(text, quote=True)

    rows = []
    for finding in findings:
        klass = {REPRODUCED: "better", NOT_REPRODUCED: "worse"}.get(finding.outcome, "na")
        tds = "".join(f'<td class="verdict">{e(c)}</td>' if i == len(HEADER) - 1 else f"<td>{e(c)}</td>"
                      for i, c in enumerate(cells(finding)))
        rows.append(f'<tr class="{klass}">{tds}</tr>')
    return ("<h2>Article check</h2>\n" + f"<p>{e(INTRO).replace('*', '')}</p>\n<table><tr>"
            + "".join(f"<th>{e(h)}</th>" for h in HEADER) + "</tr>\n" + "\n".join(rows) + "\n</table>\n"
            + f"<p>{e(summary_line(findings))}</p>")

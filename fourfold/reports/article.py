"""The article check: the article's comparison table, row by row, against a comparison report.

The article (``seed/article.zh.txt``, figures in MISSION.md) compares an old and a new version of
one serving stack. :data:`CLAIMS` holds its table as data: per row the effect, the article's
figure, its change as a number (relative or in the metric's unit, where the article gives one),
the report metric(s) that measure it, the level, and the direction of the change the article
reports: ``up``, ``down`` or ``about equal`` (with a non-inferiority margin stated in the metric's unit).

:func:`check_rows` judges each claim by the row of the comparison table (:class:`reports.compare.Row`),
so the article check and the table can never disagree; it uses the table's verdicts (interval
against the row's minimum effect, runs as replicates, Holm over the gated rows):

- ``up`` / ``down``: **direction reproduced** only when the row's verdict is ``better`` or ``worse``
  *and* the change goes the article's way; otherwise **not reproduced**, with why (inconclusive,
  equivalent, wrong direction, one run a side, too few data);
- ``about equal`` (the fingerprint: the speed-up did not cost quality): a non-inferiority test,
  **reproduced** when the bound of the difference's confidence interval on the worse side lies
  inside the margin (for a higher-is-better metric, ``ci_low > -margin``), from a row that was
  tested (not one run a side, not too few);
- **not measured** when the report has no row for the metric at that level (or a side has no value).

Beside the outcome, the **magnitude**: the measured change in the article's terms (relative, or
in the metric's unit) next to the article's, "within 2x" when it has the same sign and is between
half and twice the article's.

:func:`render_markdown` and :func:`render_html` draw the same table; every cell is escaped.
:func:`render_terminal` draws a compact one for the terminal (effect, level, Δ, verdict, direction,
magnitude; reasons in a few words), its columns fitted to a width (160 by default) and cells that
would not fit cut with "…": ``report.md`` and ``report.html`` keep the whole table.
"""

from __future__ import annotations

import fnmatch
import html
import re
import textwrap
import unicodedata
from dataclasses import dataclass

from fourfold.reports.compare import BETTER, NA, ONE_RUN, TOO_FEW, WORSE, Row
from fourfold.reports.glossary import fmt_ci, fmt_delta, fmt_value, verdict_text

__all__ = ["CLAIMS", "Claim", "Finding", "check_rows", "render_html", "render_markdown", "render_terminal"]

UP, DOWN, EQUAL = "up", "down", "about equal"
REPRODUCED, NOT_REPRODUCED, NOT_MEASURED = "reproduced", "not reproduced", "not measured"
RELATIVE, ABSOLUTE = "relative", "absolute"
MAGNITUDE_FACTOR = 2.0           # "within 2x": the measured change between half and twice the article's


@dataclass(frozen=True)
class Claim:
    """One row of the article's table."""

    effect: str
    article: str                     # the article's figure, as it states it
    metrics: tuple[str, ...]         # report metric names (fnmatch patterns), the first present wins
    levels: tuple[str, ...]          # the levels whose groups measure it, preferred first
    direction: str                   # UP, DOWN or EQUAL
    margin: float | None = None      # EQUAL: the non-inferiority margin, in the metric's unit
    change: tuple[str, float] | None = None   # the article's change: (RELATIVE, -0.485) or (ABSOLUTE, +10.8)


CLAIMS: tuple[Claim, ...] = (
    Claim("structured-prompt first-token cost B − A", "58 ± 12 → ≤ 3 ms", ("ttft_structured_penalty",),
          ("l1", "l2"), DOWN, change=(ABSOLUTE, -55.0)),
    Claim("E2E p95", "≤ 800 → 412 ms", ("e2e_p95",), ("l1",), DOWN, change=(RELATIVE, 412 / 800 - 1)),
    Claim("E2E p99", "1120 → 1380 ms", ("e2e_p99",), ("l1",), UP, change=(RELATIVE, 1380 / 1120 - 1)),
    Claim("ITL p95 (between pulses)", "smooth → faster tokens", ("itl_p95",), ("l1",), DOWN),
    Claim("ITL p99 (pulses)", "jitter under 5 ms → ~200 ms pauses", ("itl_p99",), ("l1",), UP),
    Claim("stall rate (gaps over 150 ms)", "more stalls (pulses)", ("stall_rate",), ("l1",), UP),
    Claim("output tokens/s", "+32 % (1850 tok/s)", ("output_tps_per_user", "output_tps"), ("l1",), UP,
          change=(RELATIVE, 0.32)),
    Claim("GPU memory-bandwidth utilisation", "42 → 92 %", ("*mem_bw_util*mean*", "*mem_bw_util*"),
          ("l1",), UP, change=(ABSOLUTE, 50.0)),
    Claim("L2 connection reuse", "→ 89 %", ("conn_reuse",), ("l2",), UP),
    Claim("L3 top-3 recall", "68.3 → 79.1 %", ("recall_at_k",), ("l3",), UP, change=(ABSOLUTE, 10.8)),
    Claim("L3 fact errors", "12.4 → 5.1 %", ("fact_error_rate",), ("l3",), DOWN, change=(ABSOLUTE, -7.3)),
    Claim("fingerprint (similarity mean)", "0.79 → 0.82 (about equal)", ("similarity_mean",), ("l1", "l3"),
          EQUAL, margin=0.03, change=(ABSOLUTE, 0.03)),
    Claim("L4 rounds per session", "4.2 → 3.1", ("rounds_mean",), ("l4",), DOWN,
          change=(RELATIVE, 3.1 / 4.2 - 1)),
    Claim("structure compliance (asked n items, got n)", "99.2 → 94.7 %", ("structure_compliance",), ("l1",),
          DOWN, change=(ABSOLUTE, -4.5)),
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
        return Finding(claim, None, NOT_MEASURED,
                       f"no {' / '.join(claim.metrics)} row at {' / '.join(claim.levels)}")
    if row.baseline is None or row.candidate is None or row.delta is None:
        side = "baseline" if row.baseline is None else "candidate"
        return Finding(claim, row, NOT_MEASURED, f"no {side} value")
    untested = _untested(row)
    if untested:
        return Finding(claim, row, NOT_REPRODUCED, untested)
    if claim.direction == EQUAL:
        return _non_inferior(claim, row)
    went = UP if row.delta > 0 else DOWN
    if row.verdict not in (BETTER, WORSE):
        return Finding(claim, row, NOT_REPRODUCED, f"{row.verdict}" + (f" ({row.why})" if row.why else ""))
    if went != claim.direction:
        return Finding(claim, row, NOT_REPRODUCED, f"wrong direction ({row.verdict}, {went})")
    return Finding(claim, row, REPRODUCED, f"direction: {row.verdict}, {went}")


def _untested(row: Row) -> str:
    """Why a row carries no test ("" when it does)."""
    if row.verdict == TOO_FEW:
        return f"too few data ({row.why})"
    if row.why == ONE_RUN:
        return "no verdict: one run a side"
    if row.verdict == NA or row.ci_low is None or row.ci_high is None:
        return "no test"
    return ""


def measured_change(claim: Claim, row: Row) -> float | None:
    """The row's change in the article's terms (relative, or in the metric's unit)."""
    if claim.change is None or row.delta is None:
        return None
    if claim.change[0] == ABSOLUTE:
        return row.delta
    return row.delta / abs(row.baseline) if row.baseline else None


def magnitude(claim: Claim, row: Row | None) -> str:
    """"within 2x" / "1/3.2x of it" / "4.1x it" / "opposite sign" of the article's change; "-" when it
    gives none."""
    if claim.change is None or row is None:
        return "-"
    measured, stated = measured_change(claim, row), claim.change[1]
    if measured is None or stated == 0:
        return "-"
    ratio = measured / stated
    if ratio <= 0:
        return "opposite sign"
    if 1 / MAGNITUDE_FACTOR <= ratio <= MAGNITUDE_FACTOR:
        return f"within {MAGNITUDE_FACTOR:g}x ({ratio:.2g}x)"
    return f"{ratio:.2g}x the article's"


def _fmt_change(kind: str, value: float, unit: str) -> str:
    if kind == RELATIVE:
        return f"{value * 100:+.0f} %"
    points = "points" if unit == "%" else unit
    return f"{value:+.3g} {points}".rstrip()


def _non_inferior(claim: Claim, row: Row) -> Finding:
    margin = claim.margin or 0.0
    if row.better == "higher":
        bound, inside = row.ci_low, (row.ci_low or 0.0) > -margin
        text = f"CI low {fmt_delta(bound, row.unit)} {'>' if inside else '≤'} −{margin:g}"
    else:
        bound, inside = row.ci_high, (row.ci_high or 0.0) < margin
        text = f"CI high {fmt_delta(bound, row.unit)} {'<' if inside else '≥'} +{margin:g}"
    return Finding(claim, row, REPRODUCED if inside else NOT_REPRODUCED,
                   ("non-inferior: " if inside else "inferiority not ruled out: ") + text)


def check_rows(rows: list[Row], claims: tuple[Claim, ...] = CLAIMS) -> list[Finding]:
    """One finding per claim, in the article's order."""
    return [judge(claim, find_row(rows, claim)) for claim in claims]


# ---- rendering ----
HEADER = ("effect", "article", "level", "baseline → candidate", "Δ [95% CI]", "article's change",
          "measured change", "table's verdict", "expected", "direction", "magnitude")


def cells(finding: Finding) -> list[str]:
    """The table's cells for one finding (plain text; the renderers escape)."""
    claim, row = finding.claim, finding.row
    outcome = f"{finding.outcome}: {finding.why}" if finding.why else finding.outcome
    stated = _fmt_change(*claim.change, row.unit if row else "") if claim.change else "-"
    if row is None:
        return [claim.effect, claim.article, "/".join(claim.levels), "-", "-", stated, "-", "-",
                finding.expected, outcome, "-"]
    unit = row.unit
    values = f"{fmt_value(row.baseline, unit)} → {fmt_value(row.candidate, unit)} {unit}"
    ci = fmt_ci(row.ci_low, row.ci_high, unit)
    delta = fmt_delta(row.delta, unit) + ("" if ci == "-" else f" {ci}")
    measured = measured_change(claim, row)
    measured_text = (_fmt_change(claim.change[0], measured, unit) if claim.change and measured is not None
                     else "-")
    return [claim.effect, claim.article, row.group, values, delta, stated, measured_text, verdict_text(row),
            finding.expected, outcome, magnitude(claim, row)]


def summary_line(findings: list[Finding]) -> str:
    counts = {name: sum(f.outcome == name for f in findings)
              for name in (REPRODUCED, NOT_REPRODUCED, NOT_MEASURED)}
    within = sum(magnitude(f.claim, f.row).startswith("within") for f in findings if f.outcome == REPRODUCED)
    return (f"{counts[REPRODUCED]} of {len(findings)} rows reproduced ({within} of them within "
            f"{MAGNITUDE_FACTOR:g}x of the article's magnitude), {counts[NOT_REPRODUCED]} not reproduced, "
            f"{counts[NOT_MEASURED]} not measured.")


INTRO = ("The article's table (old version → new) next to this comparison (baseline → candidate). A row's "
         "*direction* is reproduced only when the table's own verdict is better or worse (its interval "
         "beyond the row's minimum effect, runs as replicates, Holm over the gated rows) and the change goes "
         "the article's way; an *about equal* row when the confidence interval of the difference stays "
         "inside the stated non-inferiority margin. *Magnitude*: the measured change against the article's, "
         "within 2x or not.")


def _md_cell(text: str, *, from_run: bool = False) -> str:
    """A cell of the Markdown table: ``|``, ``*``, newlines and backticks made harmless; a string from a run
    (the group name) HTML-escaped as well (ours, such as ``p = <0.001``, print as they are)."""
    text = html.escape(text, quote=False) if from_run else text
    return text.replace("|", "\\|").replace("\n", " ").replace("`", "'").replace("*", "\\*")


def render_markdown(findings: list[Finding]) -> str:
    lines = ["## Article check", "", INTRO, "", "| " + " | ".join(HEADER) + " |",
             "|" + "|".join(("---", "---", "---", "---:", "---:", "---:", "---:", "---", "---", "---", "---"))
             + "|"]
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
        tds = "".join(f'<td class="verdict">{e(c)}</td>' if i == len(HEADER) - 2 else f"<td>{e(c)}</td>"
                      for i, c in enumerate(cells(finding)))
        rows.append(f'<tr class="{klass}">{tds}</tr>')
    return ("<h2>Article check</h2>\n" + f"<p>{e(INTRO).replace('*', '')}</p>\n<table><tr>"
            + "".join(f"<th>{e(h)}</th>" for h in HEADER) + "</tr>\n" + "\n".join(rows) + "\n</table>\n"
            + f"<p>{e(summary_line(findings))}</p>")


# ---- the terminal's compact table ----
TERMINAL_WIDTH = 160
COMPACT_HEADER = ("effect", "level", "Δ [95% CI]", "verdict", "direction", "magnitude")
# columns shrink to these widths first: a Δ with its CI, "not reproduced: inconclusive"
_COMPACT_MIN = (18, 13, 24, 15, 28, 13)
_COMPACT_RIGHT = {2}                         # right-aligned columns (numbers)
_PARENTHESES = re.compile(r" ?\([^()]*\)")


def _without_parentheses(text: str) -> str:
    """``text`` without its parenthesised asides, nested ones included."""
    while True:
        shorter = _PARENTHESES.sub("", text)
        if shorter == text:
            return text.strip()
        text = shorter


def brief_why(why: str) -> str:
    """A finding's reason in a few words: "direction: worse, up" -> "worse, up", "inconclusive (better
    alone (p 0.01), not after Holm ...)" -> "inconclusive", "non-inferior: CI low +0.021 > −0.03" ->
    "non-inferior" (the verdict and Δ columns beside it say the rest)."""
    text = _without_parentheses(why.removeprefix("direction: "))
    return text.split(": ")[0]


def compact_cells(finding: Finding) -> list[str]:
    """The terminal table's cells for one finding (see :data:`COMPACT_HEADER`)."""
    claim, row = finding.claim, finding.row
    why = brief_why(finding.why)
    direction = f"{finding.outcome}: {why}" if why else finding.outcome
    effect = _without_parentheses(claim.effect)
    if row is None:            # its why names every metric pattern tried
        return [effect, "/".join(claim.levels), "-", "-", f"{NOT_MEASURED}: no row", "-"]
    ci = fmt_ci(row.ci_low, row.ci_high, row.unit)
    delta = fmt_delta(row.delta, row.unit) + ("" if ci == "-" else f" {ci}")
    return [effect, row.group, delta, verdict_text(row), direction, magnitude(claim, row)]


def display_width(text: str) -> int:
    """Columns ``text`` takes on a terminal: wide characters (✅, ❌, CJK) two, combining marks none."""
    return sum(0 if unicodedata.combining(ch) or ch == "\ufe0f"
               else 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1 for ch in text)


def clip(text: str, width: int) -> str:
    """``text`` cut to ``width`` columns, "…" standing for what was cut."""
    if display_width(text) <= width:
        return text
    kept = ""
    for ch in text:
        if display_width(kept + ch) > width - 1:
            break
        kept += ch
    return kept.rstrip() + "…"


def fit_widths(natural: list[int], minimum: list[int], budget: int) -> list[int]:
    """Column widths summing to at most ``budget`` where it can be done at one column each: the natural
    widths, shrunk one column at a time where they exceed their minimum the most; below the minimums
    (a narrow terminal), the widest column first."""
    widths = list(natural)
    floors = [min(n, m) for n, m in zip(natural, minimum, strict=True)]
    while sum(widths) > budget and max(widths) > 1:
        excess = [w - f for w, f in zip(widths, floors, strict=True)]
        pick = excess if max(excess) > 0 else widths
        widths[pick.index(max(pick))] -= 1
    return widths


def render_terminal(findings: list[Finding], width: int = TERMINAL_WIDTH) -> str:
    """The article check for a terminal: an aligned pipe table of :func:`compact_cells`, no line wider
    than ``width`` columns (the whole table: ``report.md``, ``report.html``)."""
    rows = [compact_cells(f) for f in findings]
    columns = zip(COMPACT_HEADER, *rows, strict=True)
    natural = [max(display_width(cell) for cell in column) for column in columns]
    widths = fit_widths(natural, list(_COMPACT_MIN), width - (3 * len(COMPACT_HEADER) + 1))

    def line(cells: list[str] | tuple[str, ...]) -> str:
        padded = []
        for i, (cell, column_width) in enumerate(zip(cells, widths, strict=True)):
            text = clip(cell.replace("\n", " "), column_width)
            pad = " " * (column_width - display_width(text))
            padded.append(pad + text if i in _COMPACT_RIGHT else text + pad)
        return "| " + " | ".join(padded) + " |"

    rule = "|" + "|".join(("-" * (w + 1) + ":") if i in _COMPACT_RIGHT else "-" * (w + 2)
                          for i, w in enumerate(widths)) + "|"
    summary = summary_line(findings)
    return "\n".join(["## Article check", "", line(COMPACT_HEADER), rule, *map(line, rows), "",
                      textwrap.fill(summary, width),
                      "(the whole table, with the article's figures: report.md, report.html)"])


"""The gateway's overhead per ladder step: a run with ``--direct-host`` compared arm by arm.

Such a run's records are two variants of each step, ``direct`` (straight to the backend) and
``gateway`` (through ``--host``), interleaved pair by pair (:mod:`fourfold.levels.l2_direct`).
``fourfold compare RUN`` compares them as the two A/B arms of one run, direct the baseline
(:func:`fourfold.reports.report.report_from_paths`), so every row of a step's group is gateway minus
direct with the arms' interval (blocks of requests: :func:`fourfold.reports.compare.compare_groups`).
:func:`overhead_section` picks the TTFT and E2E rows of every ladder step out of that comparison and
lays them out step by step: the same numbers, no statistics of its own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from fourfold.reports.document import Report, Section, table_section
from fourfold.reports.rows import Row

DIRECT, GATEWAY = "direct", "gateway"
ROWS = ("ttft_p50", "ttft_p95", "e2e_p50", "e2e_p95")      # compare's metric keys, in display order
_STEP = re.compile(r"^(?P<level>[^:]+):(?P<base>.+)@(?P<users>\d+)$")


@dataclass(frozen=True)
class OverheadRow:
    """One step's figure: both arms, the overhead (gateway - direct) and its interval."""

    users: int
    metric: str
    label: str
    direct: float | None
    gateway: float | None
    overhead: float | None
    ci_low: float | None
    ci_high: float | None
    n_direct: int
    n_gateway: int
    why: str


def is_overhead(report: Report) -> bool:
    """True for a comparison of one run's ``gateway`` arm against its ``direct`` arm."""
    return (len(report.comparisons) == 1 and report.baseline.variant == DIRECT
            and report.comparisons[0].candidate.variant == GATEWAY)


def overhead_rows(rows: list[Row]) -> list[OverheadRow]:
    """The TTFT / E2E rows of the ladder steps (groups ``l2:<base>@<users>``), by step then metric."""
    out = []
    for row in rows:
        step = _STEP.match(row.group)
        if step is None or row.metric not in ROWS:
            continue
        out.append(OverheadRow(int(step["users"]), row.metric, row.label, row.baseline, row.candidate,
                               row.delta, row.ci_low, row.ci_high, row.n_baseline, row.n_candidate,
                               "" if row.ci_low is not None else row.why))
    return sorted(out, key=lambda r: (r.users, ROWS.index(r.metric)))


def overhead_section(report: Report) -> Section | None:
    """The report's "gateway overhead per step" section (None when the report is no such comparison)."""
    if not is_overhead(report):
        return None
    rows = overhead_rows(report.comparisons[0].rows)
    if not rows:
        return None
    head = ["users", "metric", "direct (ms)", "gateway (ms)", "overhead (ms)", "95% CI", "requests d/g"]
    cells = [[str(r.users), r.label, _num(r.direct), _num(r.gateway), _num(r.overhead, sign=True),
              _ci(r), f"{r.n_direct}/{r.n_gateway}"] for r in rows]
    title = "Gateway overhead per ladder step (gateway - direct, the same items interleaved)"
    return table_section(title, head, cells, align="---:")


def _num(value: float | None, *, sign: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:+.1f}" if sign else f"{value:.1f}"


def _ci(row: OverheadRow) -> str:
    if row.ci_low is None or row.ci_high is None:
        return f"- ({row.why})" if row.why else "-"
    return f"[{row.ci_low:+.1f}, {row.ci_high:+.1f}]"


__all__ = ["OverheadRow", "is_overhead", "overhead_rows", "overhead_section"]

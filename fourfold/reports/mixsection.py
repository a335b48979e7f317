"""``--mix`` in a report: each side's tenants against their weights, and fairness (pure).

A ``--mix`` run's summary.json has a ``mix`` block (:func:`fourfold.measure.mixstats.mix_block`).
:func:`mix_section` lays out, per side of a comparison (its runs pooled by :func:`pool_mix`), each
tenant's weight, share of requests, goodput share, 429s and Retry-After answers, and Jain's index of
goodput share / weight. The tenants' latency rows and verdicts are those of their own groups
(``level:scenario#tenant``, :mod:`fourfold.reports.tenants`) in the comparison table.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fourfold.measure.mixstats import jain_index
from fourfold.reports.document import Section, Side, table_section

__all__ = ["mix_section", "pool_mix"]


def mix_section(sides: list[Side]) -> Section | None:
    """The report's "traffic mix" section: per side (its runs pooled) each ``--mix`` tenant's weight,
    share of requests, goodput share, 429s and Retry-After answers, and Jain's index of goodput share /
    weight over the pooled counts (summary.json's ``mix`` blocks); None when no run had a mix. The
    variants of one run (``fourfold compare RUN``) share its block: it is shown once."""
    head = ["side", "tenant", "weight", "requests", "share", "goodput share", "429s", "Retry-After (s)",
            "fairness (Jain)"]
    cells: list[list[str]] = []
    shown: set[Path] = set()
    for side in sides:
        runs = [run for run in side.runs if (run.summary or {}).get("mix")
                and not (side.variant and run.path in shown)]
        shown.update(run.path for run in runs if side.variant)
        if not runs:
            continue
        pooled = pool_mix([run.summary["mix"] for run in runs if run.summary])
        label = runs[0].label if side.variant else side.label
        for i, t in enumerate(pooled["tenants"]):
            cells.append([label if i == 0 else "", t["name"], _pct(t["weight"]), str(t["requests"]),
                          _pct(t["share"]), _pct(t["goodput_share"]), str(t["rate_limited"]),
                          f"{t['retry_after']} ({t['retry_after_s']:g})",
                          _ratio(pooled["jain_index"]) if i == 0 else ""])
    if not cells:
        return None
    return table_section("Traffic mix: tenants' shares against their weights", head, cells,
                         "Fairness is Jain's index of goodput share / weight: 1 when every tenant's goodput "
                         "follows its weight, towards 1/n as one tenant takes it all (descriptive: no test "
                         "stands behind it).")


def pool_mix(blocks: list[dict[str, Any]]) -> dict[str, Any]:
    """Several runs' ``mix`` blocks as one: counts summed per tenant, shares and Jain's index from the
    sums (a tenant missing from a run counts zero there); the weights are the first block's."""
    weights: dict[str, float] = {}
    sums: dict[str, dict[str, float]] = {}
    for block in blocks:
        for t in block.get("tenants") or []:
            weights.setdefault(t["name"], float(t.get("weight") or 0.0))
            into = sums.setdefault(t["name"], dict.fromkeys(_COUNTS, 0.0))
            for key in _COUNTS:
                into[key] += float(t.get(key) or 0)
    requests = sum(s["requests"] for s in sums.values())
    good = sum(s["good"] for s in sums.values())
    tenants: list[dict[str, Any]] = [
        {"name": name, "weight": weights[name], "requests": int(s["requests"]),
         "share": s["requests"] / requests if requests else None,
         "goodput_share": s["good"] / good if good else None, "rate_limited": int(s["rate_limited"]),
         "retry_after": int(s["retry_after"]), "retry_after_s": round(s["retry_after_s"], 3)}
        for name, s in sums.items()]
    ratios = [sums[name]["good"] / good / weights[name] for name in sums if weights[name] > 0] if good else []
    return {"tenants": tenants, "jain_index": jain_index(ratios)}


_COUNTS = ("requests", "good", "rate_limited", "retry_after", "retry_after_s")


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f} %"


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"

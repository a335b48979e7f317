"""Capacity sweeps in reports: reading a sweep directory, the capacity row, the latency-vs-rate plot.

A run with ``--sweep`` (``l2_open_loop.py``) holds the same block as ``l2.sweep`` in its own
summary.json, every rate a step of that one run (scenario ``sweep@RATE/s``; :func:`is_live_sweep`). A sweep
directory (``fourfold sweep``) holds ``summary.json`` with a ``sweep`` block (rates,
capacity, bracket, knee; :mod:`fourfold.gates.sweep`) and the per-rate run directories under
``runs/``. When every run given to ``fourfold compare`` is a sweep, the comparison gets one
*capacity* row per candidate: capacity = the highest rate that met the SLO, with the bracket
``[last pass, first miss]`` as its uncertainty. The verdict is read from the brackets, not from a
statistical test: *better* when the candidate's last pass is at or above the baseline's first
miss, *worse* when the candidate's first miss is at or below the baseline's last pass, otherwise
(the brackets overlap) *inconclusive*. The row's interval is the range of differences
the two brackets allow.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from fourfold.errors import SLOSpecError
from fourfold.gates.slo import SLO, parse_spec
from fourfold.reports.plots import COLORS, _data_uri, _figure, _pyplot, text
from fourfold.reports.rows import BETTER, INCONCLUSIVE, NA, WORSE, Row
from fourfold.rundir.runread import read_summary

__all__ = ["CAPACITY_GROUP", "capacity_row", "is_live_sweep", "read_sweep", "sweep_plot", "sweep_plot_uri",
           "sweep_rates_text"]

CAPACITY_GROUP = "sweep"


def read_sweep(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The ``sweep`` block of a sweep directory's summary.json, or the ``l2.sweep`` block of a run
    with ``--sweep`` (its rates' ``run_dir`` is ``""``: the run itself); None when it is neither."""
    summary = read_summary(Path(path)) if Path(path).is_dir() else None
    block = summary.get("sweep") if summary else None
    if block is None and summary:
        block = (summary.get("l2") or {}).get("sweep")
    return block if isinstance(block, dict) else None


def is_live_sweep(block: dict[str, Any]) -> bool:
    """A run's own ``l2.sweep`` (``--sweep``: every rate a step, scenario ``sweep@RATE/s``), not a
    sweep directory's ``sweep`` block."""
    return "step_s" in block or any(r.get("run_dir") == "" for r in block.get("rates") or [])


def sweep_rates_text(block: dict[str, Any]) -> str:
    """The offered rates, ascending, each with its verdict: ``6.00/s meets, 9.00/s MISSES``."""
    rates = sorted(block.get("rates") or [], key=lambda r: r["offered_rps"])
    return ", ".join(f"{r['offered_rps']:.2f}/s {'meets' if r.get('passed') else 'MISSES'}" for r in rates)


def _bracket(block: dict[str, Any]) -> tuple[float, float | None]:
    low, high = (list(block.get("bracket_rps") or []) + [0.0, None])[:2]
    return float(low or 0.0), (None if high is None else float(high))


def capacity_row(baseline: dict[str, Any], candidate: dict[str, Any]) -> Row:
    """The capacity row of two sweep blocks (see module docstring)."""
    base_low, base_high = _bracket(baseline)
    cand_low, cand_high = _bracket(candidate)
    base, cand = baseline.get("capacity_rps"), candidate.get("capacity_rps")
    slo = baseline.get("slo") or ""
    label = f"capacity ({slo})" if slo == candidate.get("slo") else "capacity (SLOs differ)"
    n_base, n_cand = len(baseline.get("rates") or []), len(candidate.get("rates") or [])
    if base is None or cand is None or base_high is None or cand_high is None:
        return Row(CAPACITY_GROUP, "capacity_rps", label, "req/s", "higher", base, cand, None, None, None,
                   None, None, NA, "sweep brackets (a side has no pass or no miss)", n_base, n_cand)
    delta = cand - base
    if cand_low >= base_high:
        verdict = BETTER
    elif cand_high <= base_low:
        verdict = WORSE
    else:
        verdict = INCONCLUSIVE
    return Row(CAPACITY_GROUP, "capacity_rps", label, "req/s", "higher", float(base), float(cand), delta,
               100 * delta / abs(base) if base else None, cand_low - base_high, cand_high - base_low, None,
               verdict, "sweep brackets: overlapping brackets are inconclusive", n_base, n_cand, gated=True)


def _latency_slos(spec: str) -> list[SLO]:
    """The spec's TTFT and E2E p50/p95 clauses (the curves drawn), for their threshold lines."""
    try:
        slos = parse_spec(spec) if spec else []
    except SLOSpecError:
        return []
    return [slo for slo in slos
            if slo.metric in ("ttft_p50", "ttft_p95", "e2e_p50", "e2e_p95") and not slo.scope]


def sweep_plot(block: dict[str, Any], path: str | os.PathLike[str], title: str = "capacity sweep") -> Path:
    """TTFT and E2E p50/p95 against the offered rate, the SLO's thresholds on them dashed, the bracket
    shaded; written as SVG to ``path``."""

    fig = _sweep_figure(block, title)
    target = Path(path)
    fig.savefig(target, format="svg", bbox_inches="tight", metadata={"Date": None})
    _pyplot().close(fig)
    return target


def sweep_plot_uri(block: dict[str, Any], title: str = "capacity sweep") -> str:
    """:func:`sweep_plot` as an SVG data URI (the HTML report's)."""

    return _data_uri(_sweep_figure(block, title))


def _sweep_figure(block: dict[str, Any], title: str):  # type: ignore[no-untyped-def]
    rates = sorted(block.get("rates") or [], key=lambda r: r["offered_rps"])
    fig, ax = _figure(text(title), "offered rate (requests/s)", "latency (ms, log scale)")
    x = [r["offered_rps"] for r in rates]
    for i, (name, label) in enumerate((("ttft_ms", "TTFT"), ("e2e_ms", "E2E"))):
        for q, style in (("p50", ":"), ("p95", "-")):
            y = [(r.get("latency_ms") or {}).get(name, {}).get(q) for r in rates]
            points = [(a, b) for a, b in zip(x, y, strict=True) if b is not None and b > 0]
            if points:
                ax.plot(*zip(*points, strict=True), style, marker="o", color=COLORS[i], label=f"{label} {q}",
                        linewidth=1.3, markersize=3)
    for r in rates:
        if not r.get("passed"):
            ax.axvline(r["offered_rps"], color="#d62728", linewidth=0.5, alpha=0.4)
    for slo in _latency_slos(block.get("slo") or ""):
        ax.axhline(slo.threshold, color="grey", linewidth=0.8, linestyle="--", label=text(f"SLO {slo.label}"))
    low, high = _bracket(block)
    if block.get("capacity_rps") is not None and high is not None:
        ax.axvspan(low, high, color="#2ca02c", alpha=0.15, label=f"capacity {low:.2f}-{high:.2f}/s")
    ax.set_yscale("log")
    ax.legend(fontsize=7)
    return fig

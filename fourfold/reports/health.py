"""Was a run's load generator starved? Notes for a comparison, from summary.json's ``generator`` block.

Every run records the load generator's own CPU use and event-loop lag (each process that sent
load, merged on a master: :mod:`fourfold.measure.loadgen`). A side whose generator was starved
measured its own waiting as well as the target's, so a "regression" there may be the client
machine's contention. :func:`starved` is the verdict the run wrote into its block (one
definition, in the measure layer that writes it; its docstring gives the thresholds and why);
:func:`health_notes` turns a side's summary into the warning a report prints. Pure: no Locust,
no files.
"""

from __future__ import annotations

from typing import Any

from fourfold.measure.loadgen import starved

__all__ = ["health_notes", "starved"]

CONSEQUENCE = "its latencies include the client's own waiting, not only the target's"


def health_notes(label: str, summary: dict[str, Any] | None) -> list[str]:
    """One warning line when ``summary``'s generator was starved, else ``[]`` (a healthy generator,
    no summary, or an older run without a ``generator`` block). The verdict is :func:`starved`
    over the block's figures, so a run written with other thresholds is judged by today's."""
    block = summary.get("generator") if isinstance(summary, dict) else None
    if not isinstance(block, dict):
        return []
    is_starved, why = starved(block)
    if not is_starved:
        return []
    return [f"{label}: the load generator was starved ({why}): {CONSEQUENCE}"]

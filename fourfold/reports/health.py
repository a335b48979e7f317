"""Was a run's load generator starved? Notes for a comparison, from summary.json's ``generator`` block.

Every run records the load generator's own CPU use and event-loop lag (each process that sent
load, merged on a master: :mod:`fourfold.measure.loadgen`). A side whose generator was starved
measured its own waiting as well as the target's, so a "regression" there may be the client
machine's contention. :func:`starved` is the verdict the run wrote into its block (one
definition, in the measure layer that writes it; its docstring gives the thresholds and why);
:func:`health_notes` turns a side's summary into the warning a report prints; :func:`stopped_notes`
says where ``--stop-on-saturation`` ended a ladder (``l2.ladder.<base>.stopped``). Pure: no Locust,
no files.
"""

from __future__ import annotations

from typing import Any

from fourfold.measure.loadgen import starved

__all__ = ["health_notes", "starved", "stopped_notes"]

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


def stopped_notes(label: str, summary: dict[str, Any] | None) -> list[str]:
    """One note per ladder that ``--stop-on-saturation`` ended early: at which step and why."""
    l2 = summary.get("l2") if isinstance(summary, dict) else None
    ladders = l2.get("ladder") if isinstance(l2, dict) else None
    if not isinstance(ladders, dict):
        return []
    notes = []
    for base, ladder in ladders.items():
        stopped = ladder.get("stopped") if isinstance(ladder, dict) else None
        if isinstance(stopped, dict):
            notes.append(f"{label}: ladder '{base}' stopped early at {stopped.get('step')} users, "
                         f"{stopped.get('at_s')} s into the run (--stop-on-saturation): "
                         f"{stopped.get('reason')}")
    return notes

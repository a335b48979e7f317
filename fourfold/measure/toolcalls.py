"""Tool calls in the figures (pure): how many answers were calls, and how many calls fit the tools the
request offered (the record's ``extra``: :func:`fourfold.client.answer.tool_call_facts`, judged by
:func:`fourfold.workloads.tools.call_problem`). One definition for LLMStats and the report.

- ``tool_calls``: the calls ok answers made; ``requests_tool_calls``: the ok answers that made one;
  ``tool_call_share`` = requests_tool_calls / ok;
- ``tool_calls_judged``: the calls of ok answers to requests that offered tools; ``tool_calls_invalid``:
  of them, an unknown tool, arguments that are no JSON object, or arguments that break the schema;
  ``tool_calls_valid`` = judged - invalid; ``tool_call_valid_share`` = valid / judged.
"""

from __future__ import annotations

import numpy as np

from fourfold.measure.metrics import ratio
from fourfold.measure.record import TOOL_CALL_COUNT, TOOL_CALLS_INVALID, RequestRecord

__all__ = ["add_tool_calls", "tool_counts_array", "tool_rates"]


def _number(value: object) -> int:
    return value if type(value) is int and value >= 0 else 0


def add_tool_calls(counts: dict[str, int], record: RequestRecord) -> None:
    """One ok record's tool calls into LLMStats' counters."""
    extra = record.extra
    calls = _number(extra.get(TOOL_CALL_COUNT))
    if not calls:
        return
    counts["tool_calls"] += calls
    counts["requests_tool_calls"] += 1
    if TOOL_CALLS_INVALID in extra:
        invalid = min(_number(extra[TOOL_CALLS_INVALID]), calls)
        counts["tool_calls_judged"] += calls
        counts["tool_calls_invalid"] += invalid
        counts["tool_calls_valid"] += calls - invalid


def tool_rates(counts: dict[str, int]) -> dict[str, float | None]:
    """summary.json's tool-call rates from LLMStats' counters."""
    return {"tool_call_share": ratio(counts["requests_tool_calls"], counts["ok"]),
            "tool_call_valid_share": ratio(counts["tool_calls_valid"], counts["tool_calls_judged"])}


def tool_counts_array(ok: np.ndarray, calls: np.ndarray, invalid: np.ndarray) -> dict[str, np.ndarray]:
    """Per request, what :func:`add_tool_calls` counts (ok requests; NaN: the record has no such key)."""
    n = np.where(ok, np.nan_to_num(np.asarray(calls, dtype=np.float64)), 0.0)
    bad = np.asarray(invalid, dtype=np.float64)
    judged = np.isfinite(bad) & (n > 0)
    invalid = np.where(judged, np.minimum(np.nan_to_num(bad), n), 0.0)
    return {"tool_calls": n, "requests_tool_calls": n > 0, "tool_calls_judged": np.where(judged, n, 0.0),
            "tool_calls_invalid": invalid, "tool_calls_valid": np.where(judged, n, 0.0) - invalid}

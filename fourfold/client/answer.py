"""What a finished body says about the answer beside its text: which content chunk first carried
answer output (the time to first answer token, reasoning left out) and the tool calls it made."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from fourfold.measure.record import (
    MAX_TOOL_CALLS,
    TEXT_CAP_CHARS,
    TOOL_CALL_COUNT,
    TOOL_CALL_PROBLEM,
    TOOL_CALLS,
    TOOL_CALLS_INVALID,
    TOOL_CALLS_NOT_JSON,
)
from fourfold.workloads.tools import call_problem

__all__ = ["answer_chunk", "arguments_parse", "tool_call_facts"]


def arguments_parse(arguments: str) -> bool:
    """A tool call's argument text is a JSON object (an empty text is none: ``{}`` is what a tool
    without arguments gets)."""
    try:
        return isinstance(json.loads(arguments), dict)
    except (ValueError, RecursionError):
        return False


def answer_chunk(counts: list[int], first_answer_delta: int | None) -> int:
    """The index of the content chunk that carried delta ``first_answer_delta`` (``counts``: the
    deltas each chunk completed); ``len(counts)`` when no delta was answer output (reasoning only)."""
    if first_answer_delta is None:
        return len(counts)
    seen = 0
    for index, n in enumerate(counts):
        seen += n
        if seen > first_answer_delta:
            return index
    return len(counts)


def tool_call_facts(calls: list[dict[str, str]], scrub: Callable[[str], str],
                    schemas: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """``record.extra``'s tool-call keys: the calls (the first MAX_TOOL_CALLS, texts capped, credentials
    scrubbed), how many there were, how many have arguments that are no JSON object, and, when the
    request offered tools (``schemas``: name -> argument schema), how many do not fit them and why the
    first does not (:func:`fourfold.workloads.tools.call_problem`)."""
    facts: dict[str, Any] = {
        TOOL_CALLS: [{"id": call["id"], "name": scrub(call["name"])[:256],
                      "arguments": scrub(call["arguments"])[:TEXT_CAP_CHARS]}
                     for call in calls[:MAX_TOOL_CALLS]],
        TOOL_CALL_COUNT: len(calls),
        TOOL_CALLS_NOT_JSON: sum(not arguments_parse(call["arguments"]) for call in calls)}
    if schemas is not None:
        problems = [call_problem(call["name"], call["arguments"], schemas) for call in calls]
        facts[TOOL_CALLS_INVALID] = sum(bool(p) for p in problems)
        first = next((p for p in problems if p), "")
        if first:
            facts[TOOL_CALL_PROBLEM] = scrub(first)
    return facts

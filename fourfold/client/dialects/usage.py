"""The usage a server reports, believed only where it is plausible: output, reasoning, input and cached
prompt tokens (:func:`settle_usage`, run once by ``JsonEventParser.finish``), and the number checks
every dialect uses on a server's values."""

from __future__ import annotations

import math
from typing import Any

from fourfold.client.dialects.base import Completion
from fourfold.measure.record import INPUT_USAGE_IMPLAUSIBLE, USAGE_IMPLAUSIBLE

__all__ = ["MAX_INPUT_TOKENS", "USAGE_FACTOR", "USAGE_MARGIN", "finite_number", "settle_usage",
           "whole_number"]

# A reported output count is believed when it is a whole number >= 0 and, less the reasoning tokens
# the server says it kept to itself, at most USAGE_FACTOR per content delta or one per byte of the
# text received (a token is at least a byte), plus USAGE_MARGIN; a prompt count up to MAX_INPUT_TOKENS.
USAGE_FACTOR, USAGE_MARGIN, MAX_INPUT_TOKENS = 10, 64, 100_000_000


def whole_number(value: Any) -> int | None:
    """``value`` as an int when it is a whole number (``12``, ``12.0``), else None (``True``,
    ``12.5``, ``"12"``, NaN, infinity)."""
    if type(value) is int:
        return value
    if type(value) is float and value.is_integer():
        return int(value)
    return None


def finite_number(value: Any) -> float | None:
    """``value`` as a finite float when it is a JSON number, else None (a bool, a string, NaN,
    infinity or an int beyond a double would each break a record or the statistics)."""
    if type(value) not in (int, float):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _as_reported(value: Any) -> Any:
    """A server's value as a record can keep it: small ints as they are, anything else as (the
    start of) its text (a NaN would make the record's JSON line unwritable)."""
    if type(value) is int and abs(value) < 2**53:
        return value
    return str(value)[:64]


def settle_usage(parser: Any, done: Completion) -> None:
    """Believe the reported usage only when it is plausible (the limits above); else keep the
    reported value in ``extra`` and leave the count None (the record then counts chunks)."""
    reported = parser.usage_output
    if reported is not None:
        tokens = whole_number(reported)
        visible = tokens
        if tokens is not None and 0 < parser.usage_hidden <= tokens:
            visible = tokens - parser.usage_hidden
        if (tokens is None or tokens < 0
                or (visible is not None and visible > USAGE_FACTOR * done.content_deltas + USAGE_MARGIN
                    and visible > len(done.text.encode()) + len(done.reasoning.encode()) + USAGE_MARGIN)):
            done.extra[USAGE_IMPLAUSIBLE] = _as_reported(reported)
            done.output_tokens = None
        else:
            done.output_tokens = tokens
    reasoning = whole_number(parser.usage_reasoning)
    if reasoning is not None and done.output_tokens is not None and 0 <= reasoning <= done.output_tokens:
        done.reasoning_tokens = reasoning      # else not believed: the record counts the reasoning
    reported = parser.usage_input
    if reported is not None:
        tokens = whole_number(reported)
        if tokens is None or not 0 <= tokens <= MAX_INPUT_TOKENS:
            done.extra[INPUT_USAGE_IMPLAUSIBLE] = _as_reported(reported)
            done.input_tokens = None
        else:
            done.input_tokens = tokens
    cached = whole_number(parser.usage_cached)
    if (cached is not None and cached >= 0
            and cached <= (done.input_tokens if done.input_tokens is not None else MAX_INPUT_TOKENS)):
        done.cached_tokens = cached

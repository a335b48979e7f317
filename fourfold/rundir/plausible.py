"""Which records a reader keeps: the kinds a record's values must have, and the values no request can have.

fourfold writes every record itself, so a line of ``records.jsonl`` with a text where a number goes,
NaN, a negative latency or a start 1e11 s away from the run's other records is damage (a disk, an
editor, a hand-made file). Every reader leaves such a record out and counts it, as it does a torn
line, so one line can neither stop a report nor make its per-second timeline span centuries.

The rules, one definition each, in a scalar form (:func:`wrong_kind`, :func:`impossible`: why one
decoded record is left out; ``fourfold.rundir.runread``) and a vectorised one beside it
(:func:`impossible_rows`, over the columns of a block; ``fourfold.reports.recordlines``):

- the start lies within ``FAR_S`` of the file's ``anchor`` (the median ``started_at`` of its first
  ``ANCHOR_RECORDS`` records, :func:`anchor`);
- latencies (``LATENCY_FIELDS``) and chunk offsets are finite and within ``FAR_S``; latencies >= 0;
- ``output_tokens`` within [0, ``MAX_TOKENS``]; ``status`` within [0, 999];
- null is no value and breaks no rule (a failed request has no TTFT).
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

FAR_S = 31 * 86_400          # a start further than this from the file's first records, a time longer:
                             # impossible
FAR_MS = FAR_S * 1000.0
MAX_TOKENS = 1e9             # output tokens of one record beyond this: impossible
ANCHOR_RECORDS = 64
LATENCY_FIELDS = ("ttfb_ms", "ttft_ms", "ttfo_ms", "e2e_ms", "queue_ms")
NUMBER_FIELDS = ("started_at", "status", "ttfb_ms", "ttft_ms", "e2e_ms", "queue_ms", "output_tokens",
                 "conn_reused", "ttfo_ms", "input_tokens", "cached_tokens", "reasoning_tokens",
                 "reasoning_chunks", "client_output_tokens", "multi_token_chunks", "warmup",
                 "terminal")    # a JSON number, true/false or null
# fields newer than schema 1's first records: a line without them reads them as null
OPTIONAL_FIELDS = ("ttfo_ms", "input_tokens", "cached_tokens", "reasoning_tokens", "reasoning_chunks",
                   "client_output_tokens", "multi_token_chunks")
TOKEN_FIELDS = ("output_tokens", "input_tokens", "cached_tokens", "reasoning_tokens", "client_output_tokens")
TEXT_FIELDS = ("level", "scenario", "variant", "item_id", "error_class", "tenant")   # a string or null
OPTIONAL_TEXT_FIELDS = ("tenant",)          # newer than schema 1's first records: missing reads as null
OFFSETS = "chunk_offsets_ms"                                   # a list of numbers, or null
_RANGES = (*((name, 0.0, FAR_MS) for name in LATENCY_FIELDS),
           *((name, 0.0, MAX_TOKENS) for name in TOKEN_FIELDS),
           ("reasoning_chunks", 0.0, MAX_TOKENS), ("multi_token_chunks", 0.0, MAX_TOKENS),
           ("status", 0.0, 999.0))
_NUMBER = (int, float)


def anchor(path: str | Path) -> float | None:
    """The median ``started_at`` of the first ANCHOR_RECORDS records of a records.jsonl (None: none)."""
    starts: list[float] = []
    with open(path, "rb") as fh:
        for line in itertools.islice(fh, 20 * ANCHOR_RECORDS):
            try:
                data = json.loads(line)
            except (ValueError, RecursionError):
                continue
            value = data.get("started_at") if type(data) is dict else None
            if type(value) is float and math.isfinite(value) or type(value) is int and abs(value) < 2**53:
                starts.append(float(value))
                if len(starts) == ANCHOR_RECORDS:
                    break
    return float(np.median(starts)) if starts else None


def wrong_kind(data: Mapping[str, Any]) -> str | None:
    """Why a decoded record is left out for a value of the wrong kind (None: every value fits)."""
    for name in NUMBER_FIELDS:
        value = data.get(name)
        if value is not None and not isinstance(value, _NUMBER):
            return f"a record with a value of the wrong kind ({name} is not a number)"
        if type(value) is float and value != value:
            return f"a record with {name} NaN"
    for name in TEXT_FIELDS:
        if not isinstance(data.get(name), (str, type(None))):
            return f"a record with a value of the wrong kind ({name} is not a text)"
    offsets = data.get(OFFSETS)
    if offsets is not None and not (type(offsets) is list and all(isinstance(v, _NUMBER) for v in offsets)):
        return f"a record with a value of the wrong kind ({OFFSETS} is not a list of numbers)"
    return None


def impossible(values: Mapping[str, Any], offsets: Sequence[float], start_anchor: float | None) -> str | None:
    """Why a record with these numbers (None: null) is left out as impossible (None: it is kept)."""
    started = _float(values.get("started_at"))
    if started is not None and (math.isinf(started) or start_anchor is not None
                                and abs(started - start_anchor) > FAR_S):
        return (f"a record that started {abs(started - (start_anchor or 0.0)) / 86_400:.3g} days away from "
                f"the run's other records (started_at {started!r})")
    for name, low, high in _RANGES:
        value = _float(values.get(name))
        if value is not None and not math.isnan(value) and not low <= value <= high:
            return f"a record with an impossible {name} ({value!r})"
    if not all(abs(_float(v)) <= FAR_MS for v in offsets):          # (NaN compares False)
        return "a record with chunk offsets that are NaN, infinite or beyond 31 days"
    return None


def _float(value: Any) -> Any:
    """A JSON number as a float (an integer beyond a double: +-inf); None stays None."""
    try:
        return None if value is None else float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def impossible_rows(columns: Mapping[str, np.ndarray], flat: np.ndarray, lens: np.ndarray,
                    start_anchor: float | None) -> np.ndarray:
    """:func:`impossible` over the columns of many records (NaN for null; ``flat``: their chunk
    offsets one record after another, ``lens[i]`` of them for record i): True where it is."""
    with np.errstate(invalid="ignore"):
        started = columns["started_at"]
        bad = np.isinf(started)
        if start_anchor is not None:
            bad |= np.abs(started - start_anchor) > FAR_S
        for name, low, high in _RANGES:
            bad |= (columns[name] < low) | (columns[name] > high)
        odd = ~(np.abs(flat) <= FAR_MS)
        if odd.any():
            records = np.repeat(np.arange(len(lens)), lens)
            bad |= np.bincount(records[odd], minlength=len(lens)) > 0
    return bad


__all__ = ["ANCHOR_RECORDS", "FAR_MS", "FAR_S", "LATENCY_FIELDS", "MAX_TOKENS", "NUMBER_FIELDS", "OFFSETS",
           "OPTIONAL_TEXT_FIELDS", "TEXT_FIELDS", "anchor", "impossible", "impossible_rows", "wrong_kind"]

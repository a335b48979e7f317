"""``scores.jsonl`` (what ``fourfold score`` writes after a run) as the frame a comparison reads.

One row per scored answer: its level, scenario, variant and item, and ``similarity``,
``compliant`` and ``groundedness`` (NaN where absent). A line that is not JSON is skipped and
counted; a JSON line that is not a score row (no ``item_id``) is a :class:`RunDirError`.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pandas as pd

from fourfold.errors import RunDirError
from fourfold.reports.cache import CachedScores
from fourfold.reports.records import loads_or_none

__all__ = ["SCORES_FILE", "SCORE_COLUMNS", "read_scores"]

SCORES_FILE = "scores.jsonl"
SCORE_BLOCK_BYTES = 8 << 20
SCORE_COLUMNS = ("level", "scenario", "variant", "item_id", "similarity", "compliant", "groundedness", "fact_error")


def read_scores(path: Path) -> CachedScores:
    """scores.jsonl as a frame of SCORE_COLUMNS (one orjson.loads per block of lines; line by line
    with json.loads when a block does not decode; a missing column is None)."""
    if not path.is_file():
        return CachedScores(None)
    columns: dict[str, list[Any]] = {name: [] for name in SCORE_COLUMNS}
    bad = 0
    lineno = 0
    with open(path, "rb") as fh:
        while True:
            lines = fh.readlines(SCORE_BLOCK_BYTES)
            if not lines:
                break
            lines = [line for line in lines if line.strip()]
            try:
                rows = orjson.loads(b"[" + b",".join(lines) + b"]")
            except orjson.JSONDecodeError:
                rows = [loads_or_none(line) for line in lines]
            wrong = next((i for i, row in enumerate(rows)
                          if row is not None and (type(row) is not dict or "item_id" not in row)), None)
            if wrong is not None:
                raise RunDirError(f"{path}:{lineno + wrong + 1}: not a fourfold score row (no item_id); "
                                  "re-run `fourfold score` on the run")
            lineno += len(rows)
            if None in rows:
                rows = [row for row in rows if row is not None]
                bad += len(lines) - len(rows)
            for name, values in columns.items():
                values.extend([row.get(name) for row in rows])
    frame = pd.DataFrame({name: _text_categories(columns[name]) for name in ("level", "scenario", "variant", "item_id")})
    for name in ("similarity", "compliant", "groundedness", "fact_error"):
        frame[name] = _numbers(np.array(columns[name], dtype=object))
    return CachedScores(frame[list(SCORE_COLUMNS)], bad)


def _text_categories(values: list[Any]) -> pd.Categorical:
    """``Series(values).fillna("").astype(str).astype("category")``, through one dict when every
    value is text or None (a few distinct names in a million rows)."""
    index: dict[Any, int] = {}
    add = index.setdefault
    codes = np.fromiter((add(v, len(index)) for v in values), dtype=np.int64, count=len(values))
    if not all(type(v) is str or v is None for v in index):
        return pd.Categorical(pd.Series(values, dtype=object).fillna("").astype(str).astype("category"))
    texts = ["" if v is None else v for v in index]
    categories = sorted(set(texts))
    position = {text: i for i, text in enumerate(categories)}
    remap = np.array([position[text] for text in texts], dtype=np.int64)
    return pd.Categorical.from_codes(remap[codes] if codes.size else codes,
                                     categories=pd.Index(categories, dtype="str"))


def _numbers(values: np.ndarray) -> np.ndarray:
    """JSON numbers, bools and nulls -> floats (NaN for null or anything else)."""
    try:
        return np.array(values, dtype=float)
    except (TypeError, ValueError):
        return np.array([_number(v) for v in values], dtype=float)


def _number(value: Any) -> float:
    """JSON number or bool -> float; anything else (None, text) -> NaN."""
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    return float(value) if isinstance(value, (int, float)) else math.nan

"""``scores.jsonl`` (what ``fourfold score`` writes after a run) as the frame a comparison reads.

One row per scored answer: its level, scenario, variant and item, and ``similarity``,
``compliant``, ``groundedness``, ``fact_error`` and ``char_f1`` (NaN where absent). A row marked
``low_confidence`` (the embedding model could not read most of the answer: its ``[UNK]`` share
was over the threshold) has its similarity read as NaN, as ``fourfold score`` leaves it out of
the similarity figures; the ``low_confidence`` column is 1.0 / 0.0 per answer with a similarity
(NaN without one, or in a file scored before the flag existed), which :func:`confidence_columns`
gives the comparison.
A line that is not JSON is skipped and counted; a JSON line that is not a score row (no
``item_id``) is a :class:`RunDirError`.

:func:`scoring_notes` gives the report's lines about how the runs were scored: a warning when
runs were scored by different embedding models or backends (summary.json ``quality.embedder``),
and each run's low-confidence count and character-bigram F1 mean.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pandas as pd

from fourfold.errors import RunDirError
from fourfold.measure.console import counted
from fourfold.reports.cache import CachedScores
from fourfold.reports.records import loads_or_none
from fourfold.reports.rows import GroupSample

__all__ = ["SCORES_FILE", "SCORE_COLUMNS", "add_answer_scores", "confidence_columns", "read_scores",
           "scoring_notes"]

SCORES_FILE = "scores.jsonl"
SCORE_BLOCK_BYTES = 8 << 20
SCORE_COLUMNS = ("level", "scenario", "variant", "item_id", "similarity", "compliant", "groundedness",
                 "fact_error", "low_confidence", "char_f1")


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
    frame = pd.DataFrame({name: _text_categories(columns[name])
                          for name in ("level", "scenario", "variant", "item_id")})
    for name in ("similarity", "compliant", "groundedness", "fact_error", "char_f1"):
        frame[name] = _numbers(np.array(columns[name], dtype=object))
    low = np.fromiter((v is True for v in columns["low_confidence"]), dtype=bool, count=len(frame))
    known = np.fromiter((type(v) is bool for v in columns["low_confidence"]), dtype=bool, count=len(frame))
    frame["low_confidence"] = np.where(known & np.isfinite(frame["similarity"]), low.astype(float), np.nan)
    frame.loc[low, "similarity"] = np.nan
    return CachedScores(frame[list(SCORE_COLUMNS)], bad)


def confidence_columns(scores: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A group's scores -> (1.0 / 0.0 per answer with a similarity: low-confidence or not; char-bigram F1
    per answer with one; their items), for the report's low-confidence share and char-F1 mean rows.
    A frame cached before these columns existed has neither (empty arrays)."""
    low = scores["low_confidence"].to_numpy(dtype=float) if "low_confidence" in scores else np.zeros(0)
    f1 = scores["char_f1"].to_numpy(dtype=float) if "char_f1" in scores else np.zeros(0)
    items = (scores["item_id"].to_numpy(dtype=object)[np.isfinite(f1)] if f1.size
             else np.zeros(0, dtype=object))
    return low[np.isfinite(low)], f1[np.isfinite(f1)], items


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


def _embedder_of(summary: dict[str, Any] | None) -> str | None:
    """'name (weights sha256 ..., backend ...)' of a scored run, or None when it was not scored."""
    quality = (summary or {}).get("quality")
    if not isinstance(quality, dict):
        return None
    about = quality.get("embedder")
    if not isinstance(about, dict):           # scored before the embedder was recorded
        return f"{quality.get('model', 'unknown model')} (backend not recorded)"
    sha = str(about.get("weights_sha256") or "")[:12]
    return f"{about.get('name', '?')} (weights sha256 {sha or '?'}, backend {about.get('backend') or '?'})"


def scoring_notes(runs: list[Any]) -> list[str]:
    """Report notes on how ``runs`` (objects with ``label`` and ``summary``; baseline first) were
    scored: one warning when their embedders differ, one line per run with low-confidence answers."""
    notes: list[str] = []
    scored = [(run.label, _embedder_of(run.summary)) for run in runs]
    scored = [(label, about) for label, about in scored if about is not None]
    if len({about for _, about in scored}) > 1:
        notes.append("WARNING: the runs were scored with different embedding models or backends, so their "
                     "similarities are not comparable: "
                     + "; ".join(f"{label}: {about}" for label, about in scored)
                     + ". Re-score them alike (`fourfold score RUN --embed-backend ... --embed-model ...`).")
    for run in runs:
        quality = (run.summary or {}).get("quality")
        total = quality.get("total") if isinstance(quality, dict) else None
        if not isinstance(quality, dict) or not isinstance(total, dict) or not total.get("low_confidence_n"):
            continue
        f1, n, f1_n = total.get("char_f1_mean"), total.get("n"), total.get("char_f1_n") or 0
        of_n = f"{counted(n, 'answer')} {'is' if n == 1 else 'are'}" if isinstance(n, int) else "? are"
        notes.append(f"{run.label}: {total['low_confidence_n']} of {of_n} low-confidence "
                     f"(more than {quality.get('unk_threshold', 0.2):.0%} of their word pieces are [UNK] to "
                     "the embedding model): their similarity is left out of every similarity figure"
                     + (f"; character-bigram F1 mean {f1:.3f} over {counted(f1_n, 'answer')}"
                        if isinstance(f1, (int, float)) else ""))
    return notes


def add_answer_scores(sample: GroupSample, scores: pd.DataFrame) -> None:
    """The per-answer arrays of a group's sample from its rows of scores.jsonl (``scores``): the
    similarities ascending with their items, groundedness, structure compliance, fact errors,
    low-confidence flags and character F1."""
    scores = scores.reset_index(drop=True)
    sim = scores["similarity"].to_numpy(dtype=float)
    has_sim = np.isfinite(sim)
    sample.similarity = np.sort(sim[has_sim])
    order = np.argsort(sim[has_sim], kind="stable")
    sample.similarity_items = scores["item_id"].to_numpy(dtype=object)[has_sim][order]
    grounded = scores["groundedness"].to_numpy(dtype=float)
    sample.groundedness = grounded[np.isfinite(grounded)]
    compliant = scores["compliant"].to_numpy(dtype=float)
    judged = np.isfinite(compliant)
    sample.compliant = compliant[judged]
    sample.compliant_items = scores["item_id"].to_numpy(dtype=object)[judged]
    fact_error = (scores["fact_error"].to_numpy(dtype=float) if "fact_error" in scores   # (an older cache)
                  else np.full(len(scores), np.nan))        # 1.0 / 0.0 per answer with a checked fact
    checked = np.isfinite(fact_error)
    sample.fact_error = fact_error[checked]
    sample.fact_error_items = scores["item_id"].to_numpy(dtype=object)[checked]
    sample.low_confidence, sample.char_f1, sample.char_f1_items = confidence_columns(scores)

"""Similarity scoring and its aggregation (pure: vectors and rows in, numbers out).

- :func:`cosine` / :func:`cosine_matrix`: cosine similarity (vectors need not be unit length; a
  zero vector scores 0).
- :func:`max_similarity`: an answer against several acceptable references scores its *best*
  match (an answer only has to be as good as one of them).
- :func:`groundedness` (for L3): the answer against the chunks the retriever returned. The
  default, ``how="max"``, is the cosine to the closest chunk: an answer built from one relevant
  chunk is grounded even when the other retrieved chunks are off-topic, so a retrieval miss does
  not show up as a generation fault. ``how="mean"`` averages over all chunks (it falls when the
  context is noisy, which mixes retrieval quality into the figure).
- :func:`distribution`: n, mean, p5 and p50 of a run's similarities. Percentiles interpolate
  linearly between the closest ranks (numpy's default, Hyndman-Fan type 7).
- :func:`summarize` / :func:`quality_block`: the ``quality`` block of ``summary.json``, per
  ``level:scenario`` and in total, from :class:`ScoreRow`s. ``similarity_mean``/``p5``/``p50``
  are over the answers the embedding model could judge: a ``low_confidence`` row (its share of
  ``[UNK]`` word pieces above the threshold, see runscore) is counted in ``low_confidence_n``
  (``low_confidence_share``: of the answers with a similarity) and left out of them;
  ``char_f1_mean`` (fingerprint.lexical) is over every answer with a reference.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from fourfold.measure.histogram import exact_quantile

__all__ = [
    "Distribution",
    "ScoreRow",
    "cosine",
    "cosine_matrix",
    "distribution",
    "groundedness",
    "max_similarity",
    "percentile",
    "quality_block",
    "summarize",
]


def cosine_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine similarity of every row of ``a`` (n, d) with every row of ``b`` (m, d): (n, m)."""
    a = np.atleast_2d(np.asarray(a, dtype=np.float64))
    b = np.atleast_2d(np.asarray(b, dtype=np.float64))
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"vectors differ in dimension: {a.shape[1]} vs {b.shape[1]}")
    norm_a = np.linalg.norm(a, axis=1, keepdims=True)
    norm_b = np.linalg.norm(b, axis=1, keepdims=True)
    a = np.divide(a, norm_a, out=np.zeros_like(a), where=norm_a > 0)
    b = np.divide(b, norm_b, out=np.zeros_like(b), where=norm_b > 0)
    return np.clip(a @ b.T, -1.0, 1.0)


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine similarity of two vectors, in [-1, 1]."""
    return float(cosine_matrix(a, b)[0, 0])


def max_similarity(answer: np.ndarray, references: np.ndarray) -> float | None:
    """The best cosine of ``answer`` to any row of ``references``; None when there are none."""
    references = np.asarray(references)
    if references.size == 0:
        return None
    return float(cosine_matrix(answer, references).max())


def groundedness(answer: np.ndarray, chunks: np.ndarray, how: str = "max") -> float | None:
    """Cosine of the answer to its retrieved context chunks: ``max`` (default) or ``mean``
    over the chunks (see module docstring); None when there are no chunks."""
    if how not in ("max", "mean"):
        raise ValueError(f"unknown groundedness aggregation {how!r}; expected 'max' or 'mean'")
    chunks = np.asarray(chunks)
    if chunks.size == 0:
        return None
    sims = cosine_matrix(answer, chunks)[0]
    return float(sims.max() if how == "max" else sims.mean())


def percentile(values: Sequence[float], pct: float) -> float | None:
    """The ``pct`` percentile (0-100) by the nearest-rank rule of every fourfold percentile
    (:func:`fourfold.measure.histogram.exact_quantile`, as the report's ``similarity_p5``); None
    for no values."""
    if not values:
        return None
    return exact_quantile(sorted(values), pct / 100.0)


@dataclass(frozen=True)
class Distribution:
    """Summary of a run's similarities."""

    n: int
    mean: float | None
    p5: float | None
    p50: float | None


def distribution(values: Iterable[float]) -> Distribution:
    data = [float(v) for v in values]
    if not data:
        return Distribution(0, None, None, None)
    return Distribution(len(data), math.fsum(data) / len(data), percentile(data, 5), percentile(data, 50))


@dataclass
class ScoreRow:
    """One scored answer: a line of ``scores.jsonl``."""

    request_id: str
    item_id: str
    level: str = ""
    scenario: str = ""
    variant: str = ""
    similarity: float | None = None       # max cosine to the item's references; None without any
    requested_items: int | None = None    # None: the prompt asks for no count
    requested_source: str = ""            # "item" (dataset field) or "prompt" (parsed)
    delivered_items: int = 0
    delivered_kind: str = "none"          # list, table, inline, none
    compliant: bool | None = None         # None: nothing asked, the length forced, or the answer truncated
    chinese: bool = False
    fullwidth_punct: int = 0
    halfwidth_punct: int = 0
    fullwidth_share: float | None = None  # None for non-Chinese answers or answers without punctuation
    forced_length: bool = False           # ignore_eos: the answer was padded to max_tokens
    truncated: bool = False               # the server cut the answer at max_tokens (not judged for structure)
    groundedness: float | None = None     # L3: cosine to the retrieved chunks (fingerprint.rag)
    fact_checked: int | None = None       # L3: labelled facts it states (fingerprint.facts); None: no facts
    fact_errors: int | None = None        # L3: of those, stated with another value
    fact_error: bool | None = None        # fact_errors > 0; None when no fact was checked
    unk_share: float | None = None        # share of the answer's word pieces that are [UNK]; None: unmeasured
    low_confidence: bool = False          # unk_share above the threshold: the similarity cannot be trusted
    char_f1: float | None = None          # best character-bigram F1 to a reference (fingerprint.lexical)

    @property
    def group(self) -> str:
        return f"{self.level}:{self.scenario}"

    def to_dict(self) -> dict[str, Any]:
        data = dict(self.__dict__)
        for key in ("similarity", "fullwidth_share", "groundedness", "unk_share", "char_f1"):
            if data[key] is not None:
                data[key] = round(data[key], 6)
        return data


def _round(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits)


def summarize(rows: Sequence[ScoreRow]) -> dict[str, Any]:
    """n, similarity mean/p5/p50 (low-confidence answers left out: their count and share of the answers
    with a similarity beside), char-bigram F1 mean, structure compliance and full-width punctuation share."""
    dist = distribution(r.similarity for r in rows if r.similarity is not None and not r.low_confidence)
    low = sum(1 for r in rows if r.low_confidence and r.similarity is not None)
    lexical = [r.char_f1 for r in rows if r.char_f1 is not None]
    judged = [r.compliant for r in rows if r.compliant is not None]
    facts = [r.fact_error for r in rows if r.fact_error is not None]
    chinese = [r for r in rows if r.chinese]
    full = sum(r.fullwidth_punct for r in chinese)
    half = sum(r.halfwidth_punct for r in chinese)
    return {
        "n": len(rows),
        "similarity_n": dist.n,
        "similarity_mean": _round(dist.mean),
        "similarity_p5": _round(dist.p5),
        "similarity_p50": _round(dist.p50),
        "low_confidence_n": low,
        "low_confidence_share": _round(low / (low + dist.n)) if low + dist.n else None,
        "char_f1_n": len(lexical),
        "char_f1_mean": _round(math.fsum(lexical) / len(lexical)) if lexical else None,
        "structure_n": len(judged),
        "structure_compliance": _round(sum(judged) / len(judged)) if judged else None,
        "chinese_n": len(chinese),
        "fullwidth_punct_share": _round(full / (full + half)) if full + half else None,
        "forced_length_n": sum(r.forced_length for r in rows),
        "fact_checked_n": len(facts),
        "fact_error_rate": _round(sum(facts) / len(facts)) if facts else None,
        "truncated_n": sum(r.truncated for r in rows),
    }


def quality_block(rows: Sequence[ScoreRow]) -> dict[str, Any]:
    """``{"by_scenario": {"l1:saturation": {...}, ...}, "total": {...}}`` (see :func:`summarize`)."""
    groups: dict[str, list[ScoreRow]] = {}
    for row in rows:
        groups.setdefault(row.group, []).append(row)
    return {"by_scenario": {name: summarize(group) for name, group in sorted(groups.items())},
            "total": summarize(rows)}

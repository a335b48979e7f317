"""Semantic fingerprint: is the answer still as good?

Offline all-MiniLM-L6-v2 embeddings behind an ``Embedder`` protocol with a disk cache
(:mod:`fourfold.fingerprint.embedder`), cosine scoring and its aggregation
(:mod:`fourfold.fingerprint.score`), structure compliance and punctuation checks
(:mod:`fourfold.fingerprint.structure`), and the run-directory scorer behind
``fourfold score RUN_DIR`` (:mod:`fourfold.fingerprint.runscore`).

Importing this package is cheap: torch and sentence-transformers load on the first encode.
Never score on the gevent hub of a running load test; score the run directory afterwards.
"""

from __future__ import annotations

from fourfold.fingerprint.embedder import (
    CachedEmbedder,
    Embedder,
    EmbeddingCache,
    MiniLMEmbedder,
    ModelUnavailable,
)
from fourfold.fingerprint.runscore import (
    SCORES_FILE,
    RunScore,
    format_quality,
    make_embedder,
    score_run,
    text_groundedness,
)
from fourfold.fingerprint.score import ScoreRow, cosine, distribution, groundedness, max_similarity
from fourfold.fingerprint.structure import compliant, delivered_items, fullwidth_share, requested_items

__all__ = [
    "SCORES_FILE",
    "CachedEmbedder",
    "Embedder",
    "EmbeddingCache",
    "MiniLMEmbedder",
    "ModelUnavailable",
    "RunScore",
    "ScoreRow",
    "compliant",
    "cosine",
    "delivered_items",
    "distribution",
    "format_quality",
    "fullwidth_share",
    "groundedness",
    "make_embedder",
    "max_similarity",
    "requested_items",
    "score_run",
    "text_groundedness",
]

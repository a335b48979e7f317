"""The report's embeddings and rerank rows (levels.embed_batches): inputs/s and input tokens/s per batch
size, each a total over the side's wall time with the spread of its steady per-second series, as
output tokens/s (:func:`fourfold.reports.estimators.per_second`). A group is an embeddings group when
its requests sent inputs (``extra.inputs``); there the output tokens/s row, 0 by construction, is left
out, and elsewhere these rows are."""

from __future__ import annotations

import math

import numpy as np

from fourfold.measure.metrics import ratio
from fourfold.reports.estimators import per_second
from fourfold.reports.rows import GroupSample, Metric

__all__ = ["EMBED_ROWS", "EMBED_METRICS", "embed_fields"]


def embed_fields(inputs: np.ndarray, input_tokens: np.ndarray, ok: np.ndarray, end_s: np.ndarray, t0: float,
                 t1: float) -> dict[str, object]:
    """A side's GroupSample fields: the ok requests' inputs and input tokens, in total and by the second
    each request ended (the ``embed`` block's inputs_total and input_tokens_total)."""
    sent = np.where(ok, np.nan_to_num(np.asarray(inputs, dtype=np.float64)), 0.0)
    if not sent.any():
        return {}
    tokens = np.where(ok, np.nan_to_num(np.asarray(input_tokens, dtype=np.float64)), 0.0)
    bins = max(1, math.ceil(t1 - t0))
    index = np.clip(np.floor(end_s - t0).astype(np.int64), 0, bins - 1)
    return {"inputs_total": float(sent.sum()), "input_tokens_total": float(tokens.sum()),
            "inputs_series": np.bincount(index, weights=sent, minlength=bins),
            "input_tokens_series": np.bincount(index, weights=tokens, minlength=bins)}


def _total(name: str):  # type: ignore[no-untyped-def]
    def total(g: GroupSample) -> float | None:
        value = getattr(g, name)
        return ratio(value, g.wall_s) if value else None
    return total


EMBED_METRICS = (
    Metric("inputs_per_s", "inputs/s (texts embedded, documents ranked)", "inputs/s", "higher",
           per_second(_total("inputs_total"), lambda g: g.inputs_series)),
    Metric("input_tokens_per_s", "input tokens/s", "tok/s", "higher",
           per_second(_total("input_tokens_total"), lambda g: g.input_tokens_series)),
)
EMBED_ROWS = tuple(metric.key for metric in EMBED_METRICS)

"""Resampling statistics for comparisons (pure numpy: arrays in, numbers out).

Every function takes a ``numpy.random.Generator``; :func:`row_rng` derives one per table row from
the report's seed and the row's name, so a row's interval does not depend on which other rows
exist or their order, and a report is reproducible.

- :func:`mean_replicates`: bootstrap means; real resampling up to ``EXACT_MEAN_N`` values, the
  normal approximation (CLT) above it.
- :func:`proportion_replicates`: resampled proportions (binomial draws).
- :func:`clustered_quantile_replicates`: quantiles of values pooled over clusters (the ITL gaps
  of requests, the requests of a block), resampling whole clusters, on log-bucket counts.

The within-run resampling of :mod:`fourfold.reports.replication` is built from these; the verdicts
(:mod:`fourfold.reports.verdict`) read a variance from the replicates, not their percentiles.
"""

from __future__ import annotations

import math
import zlib

import numpy as np

from fourfold.measure.histogram import exact_quantile, nearest_ranks

__all__ = ["EXACT_MEAN_N", "clustered_quantile_replicates", "mean_replicates", "proportion_replicates",
           "quantile", "row_rng"]

EXACT_MEAN_N = 10_000
_CHUNK_CELLS = 2_000_000     # resampling work per numpy call (rows x values)


def row_rng(seed: int, *names: str) -> np.random.Generator:
    """A generator for one row, from the report seed and the row's names."""
    return np.random.default_rng([seed, zlib.crc32("\x1f".join(names).encode("utf-8"))])


quantile = exact_quantile      # the nearest-rank quantile of ascending values (measure.histogram)


def mean_replicates(values: np.ndarray, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """Bootstrap replicates of the mean (resampling, or the normal approximation above EXACT_MEAN_N)."""
    values = np.asarray(values, dtype=np.float64)
    n = values.size
    if n > EXACT_MEAN_N:
        return rng.normal(values.mean(), values.std(ddof=1) / math.sqrt(n), size=resamples)
    out = np.empty(resamples)
    rows = max(1, _CHUNK_CELLS // max(n, 1))
    for start in range(0, resamples, rows):
        stop = min(resamples, start + rows)
        out[start:stop] = values[rng.integers(0, n, size=(stop - start, n))].mean(axis=1)
    return out


def proportion_replicates(successes: int, n: int, resamples: int, rng: np.random.Generator) -> np.ndarray:
    return rng.binomial(n, successes / n, size=resamples) / n


def clustered_quantile_replicates(keys: np.ndarray, cluster: np.ndarray, n_clusters: int, values: np.ndarray,
                                  qs: tuple[float, ...], resamples: int,
                                  rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Quantiles of pooled bucketed values, and their replicates when whole clusters are resampled.

    ``keys[i]`` is the bucket (0..K-1, ascending value) of value ``i`` and ``cluster[i]`` its
    cluster (0..n_clusters-1); ``values[k]`` is bucket k's representative. Returns the quantiles
    of the sample (len(qs),) and the replicates (resamples, len(qs)).
    """
    n_keys = len(values)
    table = np.zeros((n_clusters, n_keys), dtype=np.float32)
    np.add.at(table, (cluster, keys), 1.0)
    point = _bucket_quantiles(table.sum(axis=0, keepdims=True), values, qs)[0]
    out = np.empty((resamples, len(qs)))
    rows = max(1, _CHUNK_CELLS // max(n_clusters, 1))
    p = np.full(n_clusters, 1.0 / n_clusters)
    for start in range(0, resamples, rows):
        stop = min(resamples, start + rows)
        weights = rng.multinomial(n_clusters, p, size=stop - start).astype(np.float32)
        out[start:stop] = _bucket_quantiles(weights @ table, values, qs)
    return point, out


def _bucket_quantiles(counts: np.ndarray, values: np.ndarray, qs: tuple[float, ...]) -> np.ndarray:
    """Nearest-rank quantiles of each row of bucket ``counts`` (rows, K) -> (rows, len(qs))."""
    cumulative = np.cumsum(counts, axis=1, dtype=np.float64)
    total = cumulative[:, -1]
    out = np.empty((counts.shape[0], len(qs)))
    for j, q in enumerate(qs):
        rank = nearest_ranks(q, total)
        index = (cumulative < rank[:, None] - 0.5).sum(axis=1)
        out[:, j] = values[np.minimum(index, len(values) - 1)]
    return out

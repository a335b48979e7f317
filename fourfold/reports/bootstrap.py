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

    A replicate draws ``n_clusters`` clusters with replacement (uniform indices counted per row: the
    multinomial weights, several times faster than ``rng.multinomial`` row by row) and pools their
    bucket counts (weights @ the clusters' bucket counts); when every value is its own cluster the
    drawn values' buckets are counted directly.
    """
    keys = np.asarray(keys, dtype=np.int64)
    cluster = np.asarray(cluster, dtype=np.int64)
    n_keys = len(values)
    point = _bucket_quantiles(np.bincount(keys, minlength=n_keys)[None, :], values, qs)[0]
    out = np.empty((resamples, len(qs)))
    singletons = keys.size == n_clusters and np.array_equal(np.sort(cluster), np.arange(n_clusters))
    if singletons:
        key_of = np.empty(n_clusters, dtype=np.int64)
        key_of[cluster] = keys
    else:
        table = np.zeros((n_clusters, n_keys), dtype=np.float32)
        np.add.at(table, (cluster, keys), 1.0)
    rows = max(1, _CHUNK_CELLS // max(n_clusters, n_keys, 1))
    for start in range(0, resamples, rows):
        stop = min(resamples, start + rows)
        size = stop - start
        drawn = rng.integers(0, n_clusters, size=(size, n_clusters))
        if singletons:
            flat = (key_of[drawn] + np.arange(size, dtype=np.int64)[:, None] * n_keys).ravel()
            counts: np.ndarray = np.bincount(flat, minlength=size * n_keys).reshape(size, n_keys)
        else:
            flat = (drawn + np.arange(size, dtype=np.int64)[:, None] * n_clusters).ravel()
            weights = np.bincount(flat, minlength=size * n_clusters).reshape(size, n_clusters)
            counts = weights.astype(np.float32) @ table
        out[start:stop] = _bucket_quantiles(counts, values, qs)
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

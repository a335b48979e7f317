"""Resampling statistics for comparisons (pure numpy: arrays in, numbers out).

Every function takes a ``numpy.random.Generator``; :func:`row_rng` derives one per table row from
the report's seed and the row's name, so a row's interval does not depend on which other rows
exist or their order, and a report is reproducible.

- :func:`quantile_replicates`: bootstrap replicates of a nearest-rank sample quantile, *exact*
  and O(1) each after one sort. Resampling n values with replacement and taking the r-th
  smallest is the same as taking ``sorted[ceil(n * U) - 1]`` with ``U ~ Beta(r, n - r + 1)``
  (the r-th order statistic of n uniforms; ``ceil(n·)`` is monotone), so runs of a million
  requests cost no more than runs of a hundred.
- :func:`mean_replicates`: bootstrap means; real resampling up to ``EXACT_MEAN_N`` values, the
  normal approximation (CLT) above it.
- :func:`proportion_replicates`: resampled proportions (binomial draws).
- :func:`clustered_quantile_replicates`: quantiles of values pooled over clusters (the ITL gaps
  of requests), resampling whole clusters (requests), on log-bucket counts.
- :func:`percentile_ci` and :func:`bootstrap_p`: the percentile interval of the replicated
  differences, and the two-sided p-value that inverts it (``2 × min(share <= 0, share >= 0)``,
  with the +1 correction so it is never 0).
- :func:`two_proportion_p`: the pooled two-proportion z-test, or Fisher's exact test when an
  expected cell count is below 5 (where the normal approximation fails).
- :func:`signflip_p`: the paired permutation test (random sign flips of per-item differences;
  exact enumeration up to 12 items).
"""

from __future__ import annotations

import math
import zlib

import numpy as np

from fourfold.measure.histogram import exact_quantile, nearest_rank, nearest_ranks

__all__ = ["EXACT_MEAN_N", "bootstrap_p", "clustered_quantile_replicates", "fisher_exact_p", "mean_replicates",
           "percentile_ci", "proportion_replicates", "quantile", "quantile_replicates", "row_rng", "signflip_p",
           "two_proportion_p"]

EXACT_MEAN_N = 10_000
EXACT_SIGNFLIP_ITEMS = 12
_CHUNK_CELLS = 2_000_000     # resampling work per numpy call (rows x values)


def row_rng(seed: int, *names: str) -> np.random.Generator:
    """A generator for one row, from the report seed and the row's names."""
    return np.random.default_rng([seed, zlib.crc32("\x1f".join(names).encode("utf-8"))])


quantile = exact_quantile      # the nearest-rank quantile of ascending values (measure.histogram)


def quantile_replicates(sorted_values: np.ndarray, q: float, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """Bootstrap replicates of the nearest-rank quantile (see module docstring)."""
    n = len(sorted_values)
    rank = nearest_rank(q, n)
    u = rng.beta(rank, n - rank + 1, size=resamples)
    index = np.clip(np.ceil(u * n).astype(np.int64) - 1, 0, n - 1)
    return np.asarray(sorted_values, dtype=np.float64)[index]


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


def percentile_ci(deltas: np.ndarray, confidence: float = 0.95) -> tuple[float, float]:
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(deltas, [tail, 1.0 - tail])
    return float(low), float(high)


def bootstrap_p(deltas: np.ndarray) -> float:
    """Two-sided p-value of "the difference is 0" from its bootstrap replicates."""
    count = len(deltas)
    below = int(np.count_nonzero(deltas <= 0))
    above = int(np.count_nonzero(deltas >= 0))
    return min(1.0, 2.0 * (min(below, above) + 1) / (count + 1))


def two_proportion_p(k1: int, n1: int, k2: int, n2: int) -> tuple[float, str]:
    """Two-sided p-value that two proportions are equal, and the test's name."""
    total_k, total_n = k1 + k2, n1 + n2
    if total_k in (0, total_n):
        return 1.0, "two-proportion z"
    expected = min(n1, n2) * min(total_k, total_n - total_k) / total_n
    if expected < 5:
        return fisher_exact_p(k1, n1, k2, n2), "Fisher exact"
    pooled = total_k / total_n
    se = math.sqrt(pooled * (1 - pooled) * (1 / n1 + 1 / n2))
    z = (k2 / n2 - k1 / n1) / se
    return math.erfc(abs(z) / math.sqrt(2.0)), "two-proportion z"


def fisher_exact_p(k1: int, n1: int, k2: int, n2: int) -> float:
    """Two-sided Fisher exact test of a 2x2 table (sum of tables no more likely than the one seen)."""
    total_k, total_n = k1 + k2, n1 + n2
    low, high = max(0, total_k - n2), min(total_k, n1)
    x = np.arange(low, high + 1)
    lgamma = np.vectorize(math.lgamma, otypes=[float])
    log_pmf = (lgamma(n1 + 1) - lgamma(x + 1) - lgamma(n1 - x + 1)
               + lgamma(n2 + 1) - lgamma(total_k - x + 1) - lgamma(n2 - total_k + x + 1)
               - (math.lgamma(total_n + 1) - math.lgamma(total_k + 1) - math.lgamma(total_n - total_k + 1)))
    pmf = np.exp(log_pmf)
    observed = pmf[k1 - low]
    return float(min(1.0, pmf[pmf <= observed * (1 + 1e-7)].sum()))


def signflip_p(diffs: np.ndarray, resamples: int, rng: np.random.Generator) -> float:
    """Two-sided paired permutation p-value of "the mean difference is 0"."""
    diffs = np.asarray(diffs, dtype=np.float64)
    k = diffs.size
    observed = abs(diffs.mean()) * (1 - 1e-9)
    if not np.any(diffs):
        return 1.0
    if k <= EXACT_SIGNFLIP_ITEMS:
        signs = 1 - 2 * ((np.arange(2**k)[:, None] >> np.arange(k)) & 1)
        means = np.abs(signs @ diffs) / k
        return float(np.count_nonzero(means >= observed) / 2**k)
    hits = 0
    rows = max(1, _CHUNK_CELLS // k)
    for start in range(0, resamples, rows):
        stop = min(resamples, start + rows)
        signs = rng.integers(0, 2, size=(stop - start, k)) * 2 - 1
        hits += int(np.count_nonzero(np.abs(signs @ diffs) / k >= observed))
    return (hits + 1) / (resamples + 1)

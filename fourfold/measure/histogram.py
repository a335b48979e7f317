"""LogHistogram: a mergeable log-bucket histogram with bounded relative error.

DDSketch-style buckets: a value ``v >= ZERO_CUTOFF`` falls in bucket ``i = ceil(log_gamma(v))``,
which covers ``(gamma**(i-1), gamma**i]``, with ``gamma = (1 + alpha) / (1 - alpha)``. The
bucket's representative value ``2 * gamma**i / (gamma + 1)`` is within ``alpha`` (relative) of
every value in the bucket. With the default ``alpha = 0.005`` a quantile is off by at most 0.5%
(comfortably inside the 1% fourfold promises), whatever the range of values.

- **Zero bucket.** Values in ``[0, ZERO_CUTOFF)`` (0.001: a microsecond when the unit is ms)
  share one bucket whose representative is 0 (clamped to the observed min, see below).
- **Invalid values.** Negative numbers, NaN and infinities are *rejected*: they are not added
  to any bucket, to ``count``, ``sum``, ``min`` or ``max``, but counted in ``invalid`` so a
  clock bug shows up instead of vanishing.
- **Rank rule (nearest rank).** ``quantile(q)`` is the representative of the bucket holding
  the sample of rank ``r = max(1, ceil(q * n))`` in ascending order, i.e. an estimate of the
  smallest recorded value ``v`` such that at least ``ceil(q * n)`` samples are ``<= v``
  (numpy's ``method="inverted_cdf"``). The result is clamped to ``[min, max]``, so p99 never
  exceeds max (Locust issue #1563); ranks 1 and n return the exact ``min`` and ``max``, so
  ``quantile(0) == min`` and ``quantile(1) == max``.
- **Merge is exact.** Bucket counts add, ``count``/``sum``/``invalid`` add, ``min``/``max``
  combine, so merging workers' histograms equals adding every sample to one histogram (up to
  float rounding in ``sum``).
- **Empty.** ``quantile``, ``mean``, ``min`` and ``max`` return ``None`` when ``count == 0``.

The wire form (``to_wire``/``from_wire``) is a small dict of ints and floats with int bucket
keys: msgpack-friendly (Locust loads with ``strict_map_key=False``); string keys from a JSON
round trip are accepted too.

**The same buckets over arrays.** :func:`bucket_keys` and :func:`bucket_values` are the
vectorised forms of a bucket's key and representative (the zero bucket is ``ZERO_KEY``), and
:func:`bucket_quantiles` the rank rule over sorted bucket counts: ``LogHistogram.quantiles``
and the report's pooled ITL (:class:`fourfold.reports.compare.ItlSample`) both call it.
:func:`exact_quantile` is the same rank rule over the sorted values themselves (the report's
TTFT, E2E and TPOT percentiles): a histogram's quantile is within ``alpha`` of it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

DEFAULT_ALPHA = 0.005
ZERO_CUTOFF = 1e-3
ZERO_KEY = -(1 << 30)          # the zero bucket's key in array form (below every log bucket's key)
WIRE_VERSION = 1

_log = math.log
_ceil = math.ceil
_INF = math.inf
_ARRAY_MIN = 32                # add_all files arrays this long with numpy


def nearest_rank(q: float, n: int) -> int:
    """1-based rank of the q-quantile among n sorted samples: ``max(1, ceil(q * n))``.

    ``q * n`` is rounded to 9 decimals first so that float noise (0.07 * 100 = 7.000000000000001)
    does not push the rank up by one.
    """
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile must be within [0, 1], got {q!r}")
    return min(n, max(1, _ceil(round(q * n, 9))))


def nearest_ranks(q: float, n: np.ndarray) -> np.ndarray:
    """:func:`nearest_rank` for many sample sizes at once (float ranks, 1 when n is 0)."""
    return np.maximum(1.0, np.minimum(np.asarray(n, dtype=np.float64), np.ceil(np.round(q * n, 9))))


def exact_quantile(sorted_values: Sequence[float] | np.ndarray, q: float) -> float:
    """The nearest-rank q-quantile of ascending ``sorted_values`` (numpy's ``inverted_cdf``)."""
    return float(sorted_values[nearest_rank(q, len(sorted_values)) - 1])


def _gamma(alpha: float) -> float:
    return (1.0 + alpha) / (1.0 - alpha)


def bucket_keys(values: np.ndarray, alpha: float = DEFAULT_ALPHA) -> np.ndarray:
    """The bucket key of each non-negative value, as ``LogHistogram.add`` files it
    (``ZERO_KEY`` below ZERO_CUTOFF)."""
    values = np.asarray(values, dtype=np.float64)
    inv_log_gamma = 1.0 / _log(_gamma(alpha))
    big = values >= ZERO_CUTOFF
    if big.all():
        return np.ceil(np.log(values) * inv_log_gamma).astype(np.int64)
    keys = np.full(values.shape, ZERO_KEY, dtype=np.int64)
    keys[big] = np.ceil(np.log(values[big]) * inv_log_gamma).astype(np.int64)
    return keys


def bucket_values(keys: np.ndarray, alpha: float = DEFAULT_ALPHA) -> np.ndarray:
    """The representative value of each bucket key (``LogHistogram.representative``; 0 for the
    zero bucket)."""
    keys = np.asarray(keys, dtype=np.int64)
    gamma = _gamma(alpha)
    out = 2.0 * np.power(gamma, keys.astype(np.float64)) / (gamma + 1.0)
    out[keys == ZERO_KEY] = 0.0
    return out


def bucket_quantiles(keys: np.ndarray, counts: np.ndarray, qs: Iterable[float], lo: float, hi: float,
                     alpha: float = DEFAULT_ALPHA) -> list[float | None]:
    """Nearest-rank quantiles of samples held as counts per bucket (``keys`` ascending): the
    representative of the bucket holding the rank, clamped to ``[lo, hi]`` (the exact min and
    max), and exactly ``lo`` / ``hi`` for ranks 1 and n. None for every q when empty."""
    qs = list(qs)
    counts = np.asarray(counts, dtype=np.int64)
    n = int(counts.sum())
    if not n:
        for q in qs:
            nearest_rank(q, 1)  # validate q even when empty
        return [None] * len(qs)
    cumulative = np.cumsum(counts)
    values = bucket_values(keys, alpha)
    out: list[float | None] = []
    for q in qs:
        rank = nearest_rank(q, n)
        if rank == 1:
            out.append(lo)
        elif rank == n:
            out.append(hi)
        else:
            value = float(values[int(np.searchsorted(cumulative, rank))])
            out.append(min(max(value, lo), hi))
    return out


class LogHistogram:
    """Counts of values in log-spaced buckets; see the module docstring for the definitions."""

    __slots__ = ("alpha", "gamma", "_inv_log_gamma", "buckets", "zero_count",
                 "count", "sum", "_min", "_max", "invalid")

    def __init__(self, alpha: float = DEFAULT_ALPHA) -> None:
        if not 0.0 < alpha < 1.0:
            raise ValueError(f"alpha must be within (0, 1), got {alpha!r}")
        self.alpha = alpha
        self.gamma = _gamma(alpha)
        self._inv_log_gamma = 1.0 / _log(self.gamma)
        self.buckets: dict[int, int] = {}
        self.zero_count = 0
        self.count = 0
        self.sum = 0.0
        self._min = _INF
        self._max = -_INF
        self.invalid = 0

    # ---- adding ----
    def add(self, value: float, count: int = 1) -> None:
        """Record ``value`` ``count`` times (count >= 1). Negative/NaN/inf values go to ``invalid``."""
        if ZERO_CUTOFF <= value < _INF:
            key = _ceil(_log(value) * self._inv_log_gamma)
            buckets = self.buckets
            buckets[key] = buckets.get(key, 0) + count
        elif 0.0 <= value < ZERO_CUTOFF:
            self.zero_count += count
        else:  # negative, NaN or +inf
            self.invalid += count
            return
        self.count += count
        self.sum += value * count
        if value < self._min:
            self._min = value
        if value > self._max:
            self._max = value

    def add_all(self, values: Iterable[float] | np.ndarray) -> None:
        """Record each value once (the per-request ITL gaps, say); cheaper per value than ``add``.
        A float64 array of many values is filed in one pass of :func:`bucket_keys` (the report's
        form of the same buckets)."""
        if isinstance(values, np.ndarray) and values.size >= _ARRAY_MIN and values.dtype == np.float64:
            low, high = values.min(), values.max()
            if ZERO_CUTOFF <= low and high < _INF:      # every value in a log bucket (NaN fails too)
                keys = np.ceil(np.log(values) * self._inv_log_gamma).astype(np.int64)
                first = int(keys.min())
                counts = np.bincount(keys - first)       # the keys of one stream's gaps lie close together
                buckets = self.buckets
                get = buckets.get
                for offset in np.flatnonzero(counts).tolist():
                    key = first + offset
                    buckets[key] = get(key, 0) + int(counts[offset])
                self.count += values.size
                self.sum += sum(values.tolist())        # summed in order, as the list path does
                self._min = min(self._min, float(low))
                self._max = max(self._max, float(high))
                return
            values = values.tolist()
        vals = values if isinstance(values, (list, tuple)) else list(values)
        for value in vals:
            if not ZERO_CUTOFF <= value < _INF:
                break
        else:  # fast path: every value lands in a log bucket
            if not vals:
                return
            buckets, inv = self.buckets, self._inv_log_gamma
            get = buckets.get
            for value in vals:
                key = _ceil(_log(value) * inv)
                buckets[key] = get(key, 0) + 1
            self.count += len(vals)
            self.sum += sum(vals)
            self._min = min(self._min, min(vals))
            self._max = max(self._max, max(vals))
            return
        add = self.add
        for value in vals:
            add(value)

    def merge(self, other: LogHistogram) -> None:
        """Add ``other``'s samples to this histogram, exactly (same alpha required)."""
        if other.alpha != self.alpha:
            raise ValueError(f"cannot merge histograms with alpha {self.alpha} and {other.alpha}")
        buckets = self.buckets
        for key, n in other.buckets.items():
            buckets[key] = buckets.get(key, 0) + n
        self.zero_count += other.zero_count
        self.count += other.count
        self.sum += other.sum
        self.invalid += other.invalid
        self._min = min(self._min, other._min)
        self._max = max(self._max, other._max)

    def reset(self) -> None:
        self.buckets = {}
        self.zero_count = self.count = self.invalid = 0
        self.sum = 0.0
        self._min, self._max = _INF, -_INF

    def copy(self) -> LogHistogram:
        clone = LogHistogram(self.alpha)
        clone.merge(self)
        return clone

    # ---- reading ----
    def __len__(self) -> int:
        return self.count

    @property
    def min(self) -> float | None:
        return self._min if self.count else None

    @property
    def max(self) -> float | None:
        return self._max if self.count else None

    @property
    def mean(self) -> float | None:
        return self.sum / self.count if self.count else None

    def representative(self, key: int) -> float:
        """The value reported for bucket ``key``: within alpha of everything in the bucket."""
        return 2.0 * self.gamma**key / (self.gamma + 1.0)

    def quantile(self, q: float) -> float | None:
        """The nearest-rank q-quantile (see module docstring), or None when empty."""
        return self.quantiles((q,))[0]

    def quantiles(self, qs: Iterable[float]) -> list[float | None]:
        """Several quantiles with one sort of the buckets (:func:`bucket_quantiles`)."""
        keys = sorted(self.buckets)
        counts = [self.buckets[k] for k in keys]
        if self.zero_count:
            keys.insert(0, ZERO_KEY)
            counts.insert(0, self.zero_count)
        return bucket_quantiles(np.array(keys, dtype=np.int64), np.array(counts, dtype=np.int64), qs,
                                self._min, self._max, self.alpha)

    # ---- wire ----
    def to_wire(self) -> dict[str, Any]:
        """A compact msgpack/JSON-friendly dict; see ``from_wire``."""
        wire: dict[str, Any] = {"a": self.alpha, "n": self.count, "s": self.sum, "b": dict(self.buckets)}
        if self.count:
            wire["lo"], wire["hi"] = self._min, self._max
        if self.zero_count:
            wire["z"] = self.zero_count
        if self.invalid:
            wire["x"] = self.invalid
        return wire

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> LogHistogram:
        hist = cls(float(data.get("a", DEFAULT_ALPHA)))
        hist.buckets = {int(k): int(v) for k, v in data.get("b", {}).items()}
        hist.count = int(data.get("n", 0))
        hist.sum = float(data.get("s", 0.0))
        hist.zero_count = int(data.get("z", 0))
        hist.invalid = int(data.get("x", 0))
        if hist.count:
            hist._min, hist._max = float(data["lo"]), float(data["hi"])
        return hist

    def merge_wire(self, data: dict[str, Any]) -> None:
        self.merge(LogHistogram.from_wire(data))

    def __eq__(self, other: object) -> bool:
        """Same alpha, buckets, counts, min and max (``sum`` is left out: float addition order)."""
        if not isinstance(other, LogHistogram):
            return NotImplemented
        return (self.alpha, self.buckets, self.zero_count, self.count, self.invalid, self.min, self.max) == (
            other.alpha, other.buckets, other.zero_count, other.count, other.invalid, other.min, other.max)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (f"LogHistogram(n={self.count}, min={self.min}, max={self.max}, "
                f"buckets={len(self.buckets)}, alpha={self.alpha})")

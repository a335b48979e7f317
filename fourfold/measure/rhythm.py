"""Stream rhythm: the timing of one stream's content chunks (pure).

The article's candidate version "pulses": the first ~10 tokens arrive fast, then the stream
pauses for ~200 ms, again and again; the old version streamed smoothly (jitter < 5 ms). These
functions read the arrival times of a stream's content chunks (``RequestRecord.chunk_offsets_ms``,
milliseconds since the request was sent) and say how it flowed. They are the one definition of
each chunk-timing quantity: ``RequestRecord.itl_ms`` is :func:`gaps_ms`, :mod:`fourfold.measure.stats`
and the report's reader count stalls with :func:`is_stall`, tokens per second spread a record's
tokens with :func:`chunk_tokens` (:func:`tokens_through` over many records), and the HTML
report draws :func:`waveform`.

- :func:`gaps_ms`: the gaps between consecutive chunks (pooled, they are ``itl_ms``);
- :func:`stalls`: the gaps above a threshold (150 ms by default: where a UI would show a
  "thinking..." placeholder), with where they happened;
- :func:`chunk_tokens`: how a record's output tokens are spread over its chunks when the server
  reports ``usage``: the first ``k`` of ``n`` chunks carry ``k*T//n`` of ``T``
  (:func:`tokens_through`), so chunk ``j`` carries ``(j+1)*T//n - j*T//n``, integers that add
  up to ``T``;
- :func:`token_gaps`: the per-token ITL: each chunk's gap shared by the tokens it carried
  (:func:`gap_tokens`, the same spread), weighted by their number;
- :func:`waveform`: tokens received per interval since the request was sent;
- :func:`jitter_ms`: the standard deviation of the gaps between chunks (population, ms);
- :func:`pulse_frequency_hz`: the dominant frequency of token arrivals, from the spectrum of the
  token-rate series (bins of ``bin_ms``) — a stream that bursts every 250 ms pulses at 4 Hz;
  ``None`` when the stream is too short or has no periodic component worth the name.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

import numpy as np

DEFAULT_STALL_MS = 150.0
WAVEFORM_INTERVAL_MS = 50.0


@dataclass(frozen=True)
class Stall:
    after_chunk: int     # index of the chunk before the gap (0-based)
    at_ms: float         # offset of that chunk
    gap_ms: float


@dataclass(frozen=True)
class Rhythm:
    chunks: int
    stalls: int
    longest_gap_ms: float
    jitter_ms: float
    pulse_hz: float | None


def gaps_ms(offsets_ms: Sequence[float]) -> list[float]:
    """Gaps between consecutive content chunks."""
    return [b - a for a, b in pairwise(offsets_ms)]


def is_stall(gap_ms: float | np.ndarray, threshold_ms: float) -> bool | np.ndarray:
    """A gap strictly above the stall threshold (a float, or elementwise over an array)."""
    return gap_ms > threshold_ms


def stall_count(gaps: Sequence[float], threshold_ms: float) -> int:
    """How many of ``gaps`` are stalls (:func:`is_stall`, counted in one pass: the load generator
    calls this once per record)."""
    return sum(1 for gap in gaps if gap > threshold_ms)


def stalls(offsets_ms: Sequence[float], threshold_ms: float = DEFAULT_STALL_MS) -> list[Stall]:
    """Every gap strictly above ``threshold_ms``."""
    return [Stall(i, offsets_ms[i], gap) for i, gap in enumerate(gaps_ms(offsets_ms))
            if is_stall(gap, threshold_ms)]


def jitter_ms(offsets_ms: Sequence[float]) -> float:
    """Population standard deviation of the inter-chunk gaps (0 with fewer than two gaps)."""
    gaps = gaps_ms(offsets_ms)
    if len(gaps) < 2:
        return 0.0
    return float(np.std(gaps))


def tokens_through(k: int | np.ndarray, tokens: int | np.ndarray,
                   chunks: int | np.ndarray) -> int | np.ndarray:
    """How many of ``tokens`` spread over ``chunks`` chunks the first ``k`` chunks carry:
    ``k * tokens // chunks`` (ints, or elementwise over integer arrays)."""
    return k * tokens // chunks


def chunk_tokens(tokens: int, chunks: int) -> list[int]:
    """``tokens`` spread over ``chunks`` content chunks in integers (see module docstring)."""
    # every chunk the same share: k * tokens // chunks steps evenly
    if chunks > 0 and tokens % chunks == 0:
        return [tokens // chunks] * chunks
    through = [int(tokens_through(k, tokens, chunks)) for k in range(chunks + 1)]
    return [b - a for a, b in pairwise(through)]


def gap_tokens(gap_index: np.ndarray, tokens: np.ndarray | np.int64,
               chunks: np.ndarray | np.int64) -> np.ndarray:
    """The tokens that arrived at the end of each gap: gap ``j`` (0-based) of a stream leads to its
    chunk ``j + 1``, which carries ``(j+2)*T//n - (j+1)*T//n`` of ``T = max(tokens, n)`` spread over
    ``n`` chunks (:func:`chunk_tokens`; fewer tokens than chunks: one each). Elementwise over integer
    arrays: each gap's index in its stream, and its stream's tokens and chunks."""
    spread = np.maximum(tokens, chunks)
    return ((gap_index + 2) * spread) // chunks - ((gap_index + 1) * spread) // chunks


def token_gaps(offsets_ms: Sequence[float], tokens: int | None) -> tuple[np.ndarray, np.ndarray]:
    """The per-token ITL of one stream: ``(gap / k, k)`` for each gap between consecutive chunks,
    ``k`` the tokens the later chunk carried (:func:`gap_tokens`): each of its ``k`` tokens is
    counted at the chunk's gap divided by ``k`` (SGLang's rule). The first chunk's tokens are the
    TTFT's, in no gap. One token a chunk: the chunk gaps, weight 1."""
    gaps = np.diff(np.asarray(offsets_ms, dtype=np.float64))
    n = gaps.size + 1
    if not gaps.size:
        return gaps, np.zeros(0, dtype=np.int64)
    k = gap_tokens(np.arange(gaps.size, dtype=np.int64), np.int64(tokens or 0), np.int64(n))
    return gaps / k, k


def waveform(offsets_ms: Sequence[float], output_tokens: int | None = None,
             interval_ms: float = WAVEFORM_INTERVAL_MS,
             start_ms: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Tokens received per ``interval_ms`` from ``start_ms`` (default: the send) to the last chunk:
    ``(counts, edges)``, ``len(edges) == len(counts) + 1``; empty intervals are kept (a pause is a
    run of zeros). ``output_tokens`` (the record's, usage or counted) are spread over the chunks
    with :func:`chunk_tokens`; without it (or with fewer tokens than chunks) each chunk counts one.
    A stream without chunks is one empty interval."""
    offsets = np.asarray(offsets_ms, dtype=np.float64)
    n = offsets.size
    if not n:
        return np.zeros(1), np.array([start_ms, start_ms + interval_ms])
    tokens = output_tokens if output_tokens is not None and output_tokens >= n else n
    bins = int(max(offsets.max() - start_ms, 0.0) // interval_ms) + 1
    edges = start_ms + interval_ms * np.arange(bins + 1, dtype=np.float64)
    index = ((offsets - start_ms) // interval_ms).astype(np.int64)
    inside = (index >= 0) & (index < bins)
    counts = np.bincount(index[inside], weights=np.array(chunk_tokens(tokens, n), dtype=np.float64)[inside],
                         minlength=bins)
    return counts, edges


def pulse_frequency_hz(offsets_ms: Sequence[float] | np.ndarray, bin_ms: float = 10.0, min_hz: float = 0.5,
                       max_hz: float = 20.0, min_power_share: float = 0.15) -> float | None:
    """Dominant frequency of the token-arrival rate, or None.

    The arrivals are binned into a rate series (``bin_ms``), the mean is removed, and the peak of
    the power spectrum between ``min_hz`` and ``max_hz`` is taken. The peak must hold at least
    ``min_power_share`` of the series' power at every frequency (a smooth stream's spectrum is
    flat noise, or the binning's own pattern above the band: no pulse), and the series must cover at
    least two periods of the lowest frequency searched.
    The frequency resolution is 1 / series length; the estimate is refined by the peak's
    neighbours (parabolic interpolation). A period must span at least four of the stream's median
    gaps (``max_hz`` is lowered to ``1000 / (4 * median gap)``): a steady 40 chunks/s stream binned
    at 10 ms counts 2, 3, 2, 3... chunks, a pattern, not a pulse.
    """
    if len(offsets_ms) < 8:
        return None
    offsets = np.asarray(offsets_ms, dtype=np.float64)
    typical_gap_ms = _median(offsets[1:] - offsets[:-1])
    # a period spans >= 4 typical gaps: a steady stream's binning pattern is no pulse
    if typical_gap_ms > 0:
        max_hz = min(max_hz, 1000.0 / (4 * typical_gap_ms))
    series = _arrivals(offsets, bin_ms)
    n = len(series)
    duration_s = n * bin_ms / 1000.0
    if duration_s < 2.0 / min_hz:
        min_hz = 2.0 / duration_s
    series = series - series.mean()
    if not np.any(series):
        return None
    power = np.abs(np.fft.rfft(series * _hanning(n))) ** 2
    freqs = _rfftfreq(n, bin_ms / 1000.0)
    band = (freqs >= min_hz) & (freqs <= max_hz)
    if not np.any(band):
        return None
    band_power = power[band]
    total = power[1:].sum()      # every frequency's power but the mean's: a band of noise has no share
    if total <= 0 or band_power.sum() <= 0:
        return None
    k = int(np.argmax(band_power))
    if band_power[k] / total < min_power_share:
        return None
    index = int(np.flatnonzero(band)[k])
    peak = freqs[index]
    if 0 < index < len(power) - 1:
        a, b, c = power[index - 1], power[index], power[index + 1]
        denom = a - 2 * b + c
        if denom != 0:
            peak += 0.5 * (a - c) / denom * (freqs[1] - freqs[0])
    return round(float(peak), 3)


def _median(values: np.ndarray) -> float:
    """``float(np.median(values))`` of a non-empty 1-d float64 array, without np.median's ~20 µs
    of dispatch (the load generator computes one per record): the middle value, or the mean of
    the two middle values as np.median takes it; NaN when any value is NaN."""
    ordered = np.sort(values)
    n = ordered.size
    if ordered[-1] != ordered[-1]:          # np.sort puts NaN last
        return math.nan
    half = n // 2
    if n % 2:
        return float(ordered[half])
    return float((ordered[half - 1] + ordered[half]) / 2.0)


def _arrivals(offsets: np.ndarray, bin_ms: float) -> np.ndarray:
    """``waveform(offsets, interval_ms=bin_ms, start_ms=offsets[0])[0]`` with every chunk counting
    one, in fewer array passes (the same float counts: sums of ones are exact)."""
    start = offsets[0]
    bins = int(max(offsets.max() - start, 0.0) // bin_ms) + 1
    index = ((offsets - start) // bin_ms).astype(np.int64)
    if index.min() < 0 or index.max() >= bins:
        index = index[(index >= 0) & (index < bins)]
    return np.bincount(index, minlength=bins).astype(np.float64)


@functools.lru_cache(maxsize=256)
def _hanning(n: int) -> np.ndarray:
    window = np.hanning(n)
    window.flags.writeable = False
    return window


@functools.lru_cache(maxsize=256)
def _rfftfreq(n: int, spacing_s: float) -> np.ndarray:
    freqs = np.fft.rfftfreq(n, d=spacing_s)
    freqs.flags.writeable = False
    return freqs


def rhythm(offsets_ms: list[float], stall_ms: float = DEFAULT_STALL_MS) -> Rhythm:
    gaps = gaps_ms(offsets_ms)
    return Rhythm(
        chunks=len(offsets_ms),
        stalls=len(stalls(offsets_ms, stall_ms)),
        longest_gap_ms=round(max(gaps, default=0.0), 3),
        jitter_ms=round(jitter_ms(offsets_ms), 3),
        pulse_hz=pulse_frequency_hz(offsets_ms),
    )

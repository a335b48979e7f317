"""Stream rhythm: stalls, jitter, pulse frequency and the waveform of one stream (pure).

The article's candidate version "pulses": the first ~10 tokens arrive fast, then the stream
pauses for ~200 ms, again and again; the old version streamed smoothly (jitter < 5 ms). These
functions read the arrival times of a stream's content chunks (``RequestRecord.chunk_offsets_ms``,
milliseconds since the request was sent) and say how it flowed:

- :func:`stalls`: the gaps above a threshold (150 ms by default: where a UI would show a
  "thinking..." placeholder), with where they happened;
- :func:`jitter_ms`: the standard deviation of the gaps between chunks (population, ms);
- :func:`pulse_frequency_hz`: the dominant frequency of token arrivals, from the spectrum of the
  token-rate series (bins of ``bin_ms``) — a stream that bursts every 250 ms pulses at 4 Hz;
  ``None`` when the stream is too short or has no periodic component worth the name;
- :func:`waveform`: tokens received per interval over time, what the report draws.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

import numpy as np

DEFAULT_STALL_MS = 150.0


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


def gaps_ms(offsets_ms: list[float]) -> list[float]:
    return [b - a for a, b in pairwise(offsets_ms)]


def stalls(offsets_ms: list[float], threshold_ms: float = DEFAULT_STALL_MS) -> list[Stall]:
    """Every gap strictly above ``threshold_ms``."""
    return [Stall(i, offsets_ms[i], gap) for i, gap in enumerate(gaps_ms(offsets_ms)) if gap > threshold_ms]


def jitter_ms(offsets_ms: list[float]) -> float:
    """Population standard deviation of the inter-chunk gaps (0 with fewer than two gaps)."""
    gaps = gaps_ms(offsets_ms)
    if len(gaps) < 2:
        return 0.0
    return float(np.std(gaps))


def waveform(offsets_ms: list[float], interval_ms: float = 50.0, start_ms: float | None = None
             ) -> tuple[list[float], list[int]]:
    """(interval start times, chunks received in each interval), from ``start_ms`` (default: the
    first chunk) to the last chunk; empty intervals are kept (a pause is a run of zeros)."""
    if not offsets_ms:
        return [], []
    origin = offsets_ms[0] if start_ms is None else start_ms
    span = max(offsets_ms[-1] - origin, 0.0)
    bins = int(span // interval_ms) + 1
    counts = np.zeros(bins, dtype=int)
    for offset in offsets_ms:
        index = int((offset - origin) // interval_ms)
        if 0 <= index < bins:
            counts[index] += 1
    return [round(origin + i * interval_ms, 3) for i in range(bins)], counts.tolist()


def pulse_frequency_hz(offsets_ms: list[float], bin_ms: float = 10.0, min_hz: float = 0.5,
                       max_hz: float = 20.0, min_power_share: float = 0.15) -> float | None:
    """Dominant frequency of the token-arrival rate, or None.

    The arrivals are binned into a rate series (``bin_ms``), the mean is removed, and the peak of
    the power spectrum between ``min_hz`` and ``max_hz`` is taken. The peak must hold at least
    ``min_power_share`` of the power in that band (a smooth stream's spectrum is flat noise: no
    pulse), and the series must cover at least two periods of the lowest frequency searched.
    The frequency resolution is 1 / series length; the estimate is refined by the peak's
    neighbours (parabolic interpolation).
    """
    if len(offsets_ms) < 8:
        return None
    _, counts = waveform(offsets_ms, bin_ms)
    series = np.asarray(counts, dtype=float)
    n = len(series)
    duration_s = n * bin_ms / 1000.0
    if duration_s < 2.0 / min_hz:
        min_hz = 2.0 / duration_s
    series = series - series.mean()
    if not np.any(series):
        return None
    power = np.abs(np.fft.rfft(series * np.hanning(n))) ** 2
    freqs = np.fft.rfftfreq(n, d=bin_ms / 1000.0)
    band = (freqs >= min_hz) & (freqs <= max_hz)
    if not np.any(band):
        return None
    band_power = power[band]
    total = band_power.sum()
    if total <= 0:
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


def rhythm(offsets_ms: list[float], stall_ms: float = DEFAULT_STALL_MS) -> Rhythm:
    gaps = gaps_ms(offsets_ms)
    return Rhythm(
        chunks=len(offsets_ms),
        stalls=len(stalls(offsets_ms, stall_ms)),
        longest_gap_ms=round(max(gaps, default=0.0), 3),
        jitter_ms=round(jitter_ms(offsets_ms), 3),
        pulse_hz=pulse_frequency_hz(offsets_ms),
    )

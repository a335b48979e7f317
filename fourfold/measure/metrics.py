"""One definition per metric: each formula once, for one record and for columns of many (pure).

Every number fourfold reports is computed by a function here. Per request, the scalar form
takes one :class:`~fourfold.measure.record.RequestRecord`; it is what :mod:`fourfold.measure.stats`
aggregates during the run (summary.json, the console table, the web UI, the SLO gate). Beside
it, the vectorised form takes numpy columns of many records; it is what :mod:`fourfold.reports`
computes after the run from ``records.jsonl``. Both forms use the same arithmetic in the same
order, so on the same records they give the same numbers, bit for bit
(``tests/unit/test_metrics.py`` checks each pair on random records;
``tests/integration/test_summary_vs_report.py`` checks a real run end to end).

Per run, the rates and ratios (:func:`wall_s`, :func:`ratio`) are the same small functions on
both paths. Percentiles are the nearest-rank rule of :mod:`fourfold.measure.histogram`: bucketed there
(within ``alpha``) for summary.json, exact over the sorted values in the report.

What each metric means, its unit and where it is shown: :mod:`fourfold.measure.metric_names`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from fourfold.measure.record import FAILURE_CLASSES
from fourfold.measure.rhythm import chunk_tokens, is_stall, pulse_frequency_hz, tokens_through
from fourfold.measure.rhythm import jitter_ms as gaps_jitter_ms

if TYPE_CHECKING:
    from fourfold.measure.record import RequestRecord

__all__ = ["NO_SECOND", "PHASES", "SLO_METRICS", "answer_tps", "answer_tps_array", "reasoning_ms",
           "reasoning_tps",
           "reasoning_tps_array", "reasoning_ms_array", "VACUOUS_SLO_METRICS", "check_slo", "end_offset_ms",
           "end_offset_ms_array", "end_s", "MIN_JITTER_CHUNKS", "MIN_PULSE_CHUNKS", "interrupted_array",
           "is_interrupted", "is_stall", "jitter_ms", "jitter_ms_of_gaps", "max_gap_ms", "pulse_hz",
           "pulse_hz_of_gaps", "meets_slo", "meets_slo_array", "ok_array", "ratio", "request_tps",
           "token_seconds_array", "tokens_by_second", "tpot_ms", "tpot_ms_array", "wall_s"]

# per-request limits a goodput SLO may put (``{"ttft_ms": 450, ...}``); ``itl_ms`` limits the
# request's largest chunk gap. A request with no value for one of VACUOUS_SLO_METRICS (one token,
# no gap) meets that limit; missing any other value fails it.
SLO_METRICS = ("ttfb_ms", "ttft_ms", "ttfo_ms", "itl_ms", "tpot_ms", "e2e_ms", "queue_ms")
VACUOUS_SLO_METRICS = ("itl_ms", "tpot_ms")


# ---- ok ----
def ok_array(error_class: np.ndarray) -> np.ndarray:
    """``RequestRecord.ok`` over a column of error classes: not one of FAILURE_CLASSES."""
    return ~np.isin(np.asarray(error_class, dtype=object), list(FAILURE_CLASSES))


# ---- TPOT and decode speed ----
def tpot_ms(record: RequestRecord) -> float | None:
    """``(e2e - ttft) / (output_tokens - 1)``: vLLM's TPOT, AIPerf's ITL; None below 2 tokens."""
    if record.ttft_ms is None or record.e2e_ms is None or record.output_tokens < 2:
        return None
    return (record.e2e_ms - record.ttft_ms) / (record.output_tokens - 1)


# A request's phases, where the transport sees them (client.transport.ConnFacts.phases), in
# record.extra, ms: a new connection's name lookup, TCP connect and TLS handshake; then the request
# written (from the connection ready) and the wait for the response head (last byte written -> head).
# k6's http_req_looking_up, _connecting, _tls_handshaking, _sending, _waiting (docs/metrics.md).
PHASES = ("dns_ms", "tcp_ms", "tls_ms", "send_ms", "wait_ms")

def tpot_ms_array(ttft_ms: np.ndarray, e2e_ms: np.ndarray, output_tokens: np.ndarray) -> np.ndarray:
    """:func:`tpot_ms` over columns (NaN where it is None: a missing time or fewer than 2 tokens)."""
    tokens = np.asarray(output_tokens, dtype=np.float64)
    ttft, e2e = np.asarray(ttft_ms, dtype=np.float64), np.asarray(e2e_ms, dtype=np.float64)
    return np.where(tokens >= 2, (e2e - ttft) / np.maximum(tokens - 1, 1), np.nan)


def request_tps(tpot: float | None) -> float | None:
    """One request's decode speed, ``1000 / tpot_ms`` (tokens/s after the first token)."""
    return 1000.0 / tpot if tpot is not None and tpot > 0 else None


# ---- reasoning: the answer apart from the thinking before it ----
def reasoning_ms(record: RequestRecord) -> float | None:
    """``ttfo - ttft`` of a stream that reasoned before it answered (its first chunks were reasoning
    only): the time spent reasoning; None when it did not reason first or never answered."""
    if not record.reasoning_chunks or record.ttfo_ms is None or record.ttft_ms is None:
        return None
    return record.ttfo_ms - record.ttft_ms


def reasoning_ms_array(ttft_ms: np.ndarray, ttfo_ms: np.ndarray, reasoning_chunks: np.ndarray) -> np.ndarray:
    """:func:`reasoning_ms` over columns (NaN where it is None)."""
    ttft, ttfo = np.asarray(ttft_ms, dtype=np.float64), np.asarray(ttfo_ms, dtype=np.float64)
    return np.where(np.asarray(reasoning_chunks, dtype=np.float64) > 0, ttfo - ttft, np.nan)


def reasoning_tps(record: RequestRecord) -> float | None:
    """The reasoning's speed: reasoning tokens / (ttfo - ttft), tokens/s (the tokens after the first
    reasoning token up to and including the first answer token, over that span); None for a stream
    that did not reason first (reasoning the server never streamed has no span)."""
    span_ms = reasoning_ms(record)
    return record.reasoning_tokens * 1000.0 / span_ms if span_ms and span_ms > 0 else None


def reasoning_tps_array(ttft_ms: np.ndarray, ttfo_ms: np.ndarray, reasoning_tokens: np.ndarray,
                        reasoning_chunks: np.ndarray) -> np.ndarray:
    """:func:`reasoning_tps` over columns (NaN where it is None)."""
    span = reasoning_ms_array(ttft_ms, ttfo_ms, reasoning_chunks)
    with np.errstate(invalid="ignore", divide="ignore"):
        tokens = np.nan_to_num(np.asarray(reasoning_tokens, dtype=np.float64))
        return np.where(span > 0, tokens * 1000.0 / span, np.nan)


def answer_tps(record: RequestRecord) -> float | None:
    """The answer's decode speed: answer tokens after its first / (e2e - ttfo), tokens/s (reasoning
    tokens left out; None below 2 answer tokens or without a TTFO)."""
    if record.ttfo_ms is None or record.e2e_ms is None:
        return None
    answer = record.output_tokens - record.reasoning_tokens
    span_ms = record.e2e_ms - record.ttfo_ms
    return (answer - 1) * 1000.0 / span_ms if answer >= 2 and span_ms > 0 else None


def answer_tps_array(ttfo_ms: np.ndarray, e2e_ms: np.ndarray, output_tokens: np.ndarray,
                     reasoning_tokens: np.ndarray) -> np.ndarray:
    """:func:`answer_tps` over columns (NaN where it is None)."""
    answer = np.asarray(output_tokens, dtype=np.float64) - np.nan_to_num(
        np.asarray(reasoning_tokens, dtype=np.float64))
    span = np.asarray(e2e_ms, dtype=np.float64) - np.asarray(ttfo_ms, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where((answer >= 2) & (span > 0), (answer - 1) * 1000.0 / span, np.nan)


# ---- interrupted ----
def is_interrupted(record: RequestRecord) -> bool:
    """Error class ``interrupted``, or the response started (2xx headers) and then either no
    terminal event came or a failure was recorded."""
    if record.error_class == "interrupted":
        return True
    started = record.ttfb_ms is not None and 200 <= record.status < 300
    return started and (not record.terminal or record.error_class in FAILURE_CLASSES)


def interrupted_array(error_class: np.ndarray, status: np.ndarray, ttfb_ms: np.ndarray,
                      terminal: np.ndarray) -> np.ndarray:
    """:func:`is_interrupted` over columns (``ttfb_ms`` NaN where it is None)."""
    classes = np.asarray(error_class, dtype=object)
    status = np.asarray(status)
    started = np.isfinite(np.asarray(ttfb_ms, dtype=np.float64)) & (status >= 200) & (status < 300)
    failed = ~ok_array(classes)
    return (classes == "interrupted") | (started & (~np.asarray(terminal, dtype=bool) | failed))


# ---- when a request ended ----
def end_offset_ms(record: RequestRecord) -> float:
    """Milliseconds from send to the end: e2e, else the last known offset (ttft, ttfb, last
    chunk), else 0."""
    if record.e2e_ms is not None:
        return record.e2e_ms
    known = [o for o in (record.ttft_ms, record.ttfb_ms, *record.chunk_offsets_ms[-1:]) if o is not None]
    return max(known, default=0.0)


def end_offset_ms_array(e2e_ms: np.ndarray, ttft_ms: np.ndarray, ttfb_ms: np.ndarray,
                        last_chunk_ms: np.ndarray) -> np.ndarray:
    """:func:`end_offset_ms` over columns (NaN for None)."""
    known = np.fmax(np.fmax(np.asarray(ttft_ms, dtype=np.float64), np.asarray(ttfb_ms, dtype=np.float64)),
                    np.asarray(last_chunk_ms, dtype=np.float64))
    e2e = np.asarray(e2e_ms, dtype=np.float64)
    return np.where(np.isfinite(e2e), e2e, np.nan_to_num(known, nan=0.0))


def end_s(record: RequestRecord) -> float:
    """Unix seconds when the request ended: ``started_at + end_offset_ms / 1000``; over columns,
    ``started_at + end_offset_ms_array(...) / 1000`` is the same arithmetic."""
    return record.started_at + end_offset_ms(record) / 1000


# ---- chunk gaps (the gaps themselves, stalls and the token spread: measure.rhythm) ----
def max_gap_ms(record: RequestRecord) -> float | None:
    """The request's largest gap between content chunks (None with fewer than 2 chunks)."""
    return max(record.itl_ms, default=None)


# ---- stream rhythm: jitter and pulse frequency (the article's 3-5 Hz diagnosis) ----
MIN_JITTER_CHUNKS = 3       # two gaps: a spread needs two
_ARRAY_MIN = 32             # tokens_by_second takes numpy's path from this many chunks
MIN_PULSE_CHUNKS = 8        # fewer chunks cannot show a period (measure.rhythm.pulse_frequency_hz)


def jitter_ms(record: RequestRecord) -> float | None:
    """Population standard deviation of the request's content-chunk gaps (ms); None below
    MIN_JITTER_CHUNKS chunks."""
    offsets = record.chunk_offsets_ms
    return gaps_jitter_ms(offsets) if len(offsets) >= MIN_JITTER_CHUNKS else None


def jitter_ms_of_gaps(gaps: np.ndarray) -> float | None:
    """:func:`jitter_ms` from the request's gaps (the report keeps gaps, not offsets)."""
    gaps = np.asarray(gaps, dtype=np.float64)
    return float(np.std(gaps)) if gaps.size >= MIN_JITTER_CHUNKS - 1 else None


def pulse_hz(record: RequestRecord) -> float | None:
    """The request's pulse frequency (Hz): the dominant period of its token arrivals
    (:func:`fourfold.measure.rhythm.pulse_frequency_hz`), 0.0 for a stream of at least
    MIN_PULSE_CHUNKS chunks with no periodic component (smooth), None for a shorter stream."""
    offsets = record.chunk_offsets_ms
    if len(offsets) < MIN_PULSE_CHUNKS:
        return None
    # as the report computes it: from the gaps, which it keeps as float32 (a borderline stream's
    # spectrum can tip either way on the last bits)
    return pulse_hz_of_gaps(np.diff(np.asarray(offsets, dtype=np.float64)).astype(np.float32))


def pulse_hz_of_gaps(gaps: np.ndarray) -> float | None:
    """:func:`pulse_hz` from the request's gaps: the offsets from its first chunk, which is where
    the rhythm analysis starts anyway."""
    gaps = np.asarray(gaps, dtype=np.float64)
    if gaps.size < MIN_PULSE_CHUNKS - 1:
        return None
    return pulse_frequency_hz(np.concatenate(([0.0], np.cumsum(gaps)))) or 0.0


# ---- goodput: a request that meets every per-request SLO ----
def check_slo(slo_ms: Mapping[str, float] | None) -> dict[str, float]:
    """``{"ttft_ms": 450, ...}`` with float limits; ValueError naming any unknown metric."""
    slo = dict(slo_ms or {})
    unknown = sorted(set(slo) - set(SLO_METRICS))
    if unknown:
        raise ValueError(f"unknown goodput SLO metric(s) {unknown}; valid: {', '.join(SLO_METRICS)}")
    return {k: float(v) for k, v in slo.items()}


def meets_slo(record: RequestRecord, slo_ms: Mapping[str, float]) -> bool:
    """The record is ok and every metric in ``slo_ms`` is at or under its limit (see SLO_METRICS)."""
    if not record.ok:
        return False
    for metric, limit in slo_ms.items():
        if metric == "itl_ms":
            value = max_gap_ms(record)
        elif metric == "tpot_ms":
            value = tpot_ms(record)
        else:
            value = getattr(record, metric)
        if value is None:
            if metric in VACUOUS_SLO_METRICS:
                continue
            return False
        if value > limit:
            return False
    return True


def meets_slo_array(ok: np.ndarray, columns: Mapping[str, np.ndarray],
                    slo_ms: Mapping[str, float]) -> np.ndarray:
    """:func:`meets_slo` over columns: ``columns[metric]`` per SLO metric named in ``slo_ms``
    (``itl_ms``: the largest gap, ``tpot_ms``: :func:`tpot_ms_array`; NaN for None)."""
    good = np.asarray(ok, dtype=bool).copy()
    for metric, limit in check_slo(slo_ms).items():
        values = np.asarray(columns[metric], dtype=np.float64)
        missing = ~np.isfinite(values)
        good &= np.where(missing, metric in VACUOUS_SLO_METRICS, values <= limit)
    return good


# ---- output tokens over time ----
def tokens_by_second(record: RequestRecord) -> dict[int, int]:
    """Output tokens per Unix second of arrival, spread over the content chunks in integers
    (:func:`fourfold.measure.rhythm.chunk_tokens`); all at the end second when the record has no chunk
    offsets."""
    tokens, offsets = record.output_tokens, record.chunk_offsets_ms
    if tokens <= 0:
        return {}
    if not offsets:
        return {math.floor(end_s(record)): tokens}
    if len(offsets) >= _ARRAY_MIN:
        found = _tokens_by_second_array(record.started_at, np.asarray(offsets, dtype=np.float64), tokens)
        if found is not None:
            return found
    out: dict[int, int] = {}
    for offset_ms, share in zip(offsets, chunk_tokens(tokens, len(offsets)), strict=True):
        if share:
            sec = math.floor(record.started_at + offset_ms / 1000)
            out[sec] = out.get(sec, 0) + share
    return out


def _tokens_by_second_array(started_s: float, offsets_ms: np.ndarray, tokens: int) -> dict[int, int] | None:
    """:func:`tokens_by_second` of a long stream in a few array passes (the same float arithmetic
    per chunk, the same integer shares); seconds in ascending order. None when the offsets span
    more than a day (a damaged record: the per-chunk loop takes it)."""
    n = offsets_ms.size
    seconds = np.floor(started_s + offsets_ms / 1000).astype(np.int64)
    first = int(seconds.min())
    if int(seconds.max()) - first > 100_000:
        return None
    if tokens % n == 0:
        counts = np.bincount(seconds - first) * (tokens // n)
    else:
        counts = np.bincount(seconds - first, weights=np.diff(np.arange(n + 1, dtype=np.int64) * tokens // n))
    return {first + at: int(counts[at]) for at in np.flatnonzero(counts).tolist()}


NO_SECOND = np.iinfo(np.int64).min      # a null start, an offset past int64 seconds: the caller leaves it out


def _seconds(stamps_s: np.ndarray) -> np.ndarray:
    """``floor(stamps_s)`` as int64; NaN, infinities and values past ±2^62 become ``NO_SECOND`` (a cast
    of them is undefined: INT64_MIN on x86-64, 0 on ARM, i.e. the Unix epoch)."""
    floor = np.floor(stamps_s)
    usable = np.isfinite(floor) & (np.abs(floor) < 2.0 ** 62)
    seconds = np.full(floor.shape, NO_SECOND, dtype=np.int64)
    seconds[usable] = floor[usable].astype(np.int64)
    return seconds


def token_seconds_array(started_s: np.ndarray, end_s: np.ndarray, tokens: np.ndarray, lens: np.ndarray,
                        offsets_ms: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`tokens_by_second` over many records, as ``(seconds, tokens)`` pairs to be summed by
    second. ``lens[i]`` is record i's number of chunk offsets, ``offsets_ms`` all of them, record
    after record; ``end_s`` (:func:`end_s` of each record) places a record with tokens and no
    offsets. The chunks of one record that arrived in one second carry
    ``tokens_through(j1) - tokens_through(j0)`` (j0..j1: their positions), so only the runs of
    chunks per second are computed, not every chunk's share."""
    tokens = np.maximum(np.nan_to_num(np.asarray(tokens, dtype=np.float64)), 0).astype(np.int64)
    lens = np.asarray(lens, dtype=np.int64)
    first = np.zeros(len(lens) + 1, dtype=np.int64)
    np.cumsum(lens, out=first[1:])
    whole = (lens == 0) & (tokens > 0)
    whole_seconds = _seconds(np.asarray(end_s, dtype=np.float64)[whole])
    total = int(first[-1])
    if not total:
        return whole_seconds, tokens[whole]
    seconds = _seconds(np.repeat(np.asarray(started_s, dtype=np.float64), lens)
                       + np.asarray(offsets_ms, dtype=np.float64) / 1000)
    run_start = np.empty(total, dtype=bool)              # a chunk that starts a run: new record or new second
    run_start[0] = True
    np.not_equal(seconds[1:], seconds[:-1], out=run_start[1:])
    run_start[first[:-1][lens > 0]] = True
    begin = np.flatnonzero(run_start)
    end = np.append(begin[1:], total)
    record = np.searchsorted(first, begin, side="right") - 1
    t, n = tokens[record], lens[record]
    carried = (np.asarray(tokens_through(end - first[record], t, n))
               - tokens_through(begin - first[record], t, n))
    keep = carried > 0
    return (np.concatenate([seconds[begin[keep]], whole_seconds]),
            np.concatenate([carried[keep], tokens[whole]]))


# ---- per run ----
def wall_s(first_start_s: float | None, last_end_s: float | None) -> float | None:
    """First send to last end (seconds); None when unknown or not positive."""
    if first_start_s is None or last_end_s is None or last_end_s <= first_start_s:
        return None
    return last_end_s - first_start_s


def ratio(numerator: float, denominator: float | None) -> float | None:
    """``numerator / denominator``, None when the denominator is 0 or unknown (every rate:
    ``output_tps = output_tokens_total / wall_s``, ``error_rate = failures / requests``, ...)."""
    return numerator / denominator if denominator else None

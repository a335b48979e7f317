"""LLMStats: per (level, scenario) aggregates of RequestRecords, mergeable across Locust workers.

Every per-request value and every rate comes from :mod:`fourfold.measure.metrics` (the formulas the
report uses too); the names, units and definitions are :mod:`fourfold.measure.metric_names`
(docs/metrics.md). In brief, over non-warm-up, non-cancelled records:

- ``ttfb_ms``, ``ttft_ms``, ``e2e_ms``, ``tpot_ms``, ``output_tokens``: one sample per *ok*
  request (``record.ok``), like vLLM bench; failures are counted, never blended into latency.
  ``tpot_ms = (e2e - ttft) / (output_tokens - 1)`` (absent below 2 tokens).
- ok requests: ``ttfo_ms`` (the first *answer* token), ``reasoning_ms`` (``ttfo - ttft`` of a stream
  that reasoned first), ``reasoning_tokens``, ``answer_tps`` / ``reasoning_tps`` (each part's tokens/s);
  ``reasoning_share`` = ok requests with reasoning tokens / ok; ``cache_hit_share`` = cached prompt
  tokens / the prompt tokens of the requests whose cached count the server reported.
- ``itl_ms``: every gap between consecutive content chunks of ok requests, pooled; ``itl_token_ms`` per
  token, ``multi_token_chunk_share``, ``token_discrepancy_share``: :mod:`fourfold.measure.tokentiming`.
- ``request_tps``: per-request decode speed, ``1000 / tpot_ms`` (tokens/s after the first token).
- ``queue_ms``: open-loop client queueing (intended arrival -> send), every request.
- ``stalls``: gaps strictly above ``stall_threshold_ms`` (150 ms default) in *any* request;
  ``requests_with_stall`` counts requests with at least one; ``stall_rate`` = that / requests.
- ``interrupted``: ``error_class == "interrupted"``, or the response started (2xx headers
  arrived) and then either no terminal event came or a failure class was recorded.
- ``output_tokens_total``: every output token received (failed streams too: they used the
  server); ``output_tps`` = that / wall time. ``output_tokens_estimated``: records with output
  whose count is not the server's ``usage`` (counted from chunks).
- ``good``: ok requests meeting every SLO threshold given (``slo_ms``, e.g.
  ``{"ttft_ms": 450, "e2e_ms": 1400}``; ``itl_ms`` means the request's largest gap; a request
  with no value for ``tpot_ms``/``itl_ms`` meets it vacuously, for any other metric it fails);
  ``goodput_rps`` = good / wall time.
- ``conn_reuse`` = requests on an already-open connection / requests where that is known.
  ``conn_reconnects``: requests whose pooled connection the server had closed while idle, so
  they had to open a new one (``record.conn_reconnected``; a reconnect stall).
- What a target got wrong beside the class: ``usage_implausible`` (its usage was not believed, the record
  counts chunks), ``no_terminal_event`` (complete by a finish reason and a clean end of the body, without
  ``[DONE]``/``message_stop``), ``unsolicited_responses`` (bytes after a response, or on an idle connection).
- Tool calls (``tool_call_share``, ``tool_call_valid_share``): :mod:`fourfold.measure.toolcalls`.
- wall time = ``last_end - first_start``: first send to last end (started_at + e2e) over the key's records.
- Per-second series (Unix seconds): output tokens by the second their chunk arrived (usage
  tokens spread over the chunks in integers), requests finished and failed by their end second,
  stalls by the second the stalling gap ended, TTFT count/sum/max by the second the first token arrived.

Percentiles are nearest-rank over log-bucket histograms (:mod:`fourfold.measure.histogram`): within ``alpha``
(0.5 %, ``histogram_alpha`` in the summary) of the exact value; the report computes them from records.jsonl.

Distributed: workers ``take_wire()`` (to_wire + reset) in ``report_to_master``, the master
``merge_wire``s; counts and histogram buckets merge exactly. The wire holds only
dicts/lists/str/int/float; (level, scenario) keys travel as ``[level, scenario, group]``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np

from fourfold.measure.histogram import DEFAULT_ALPHA, LogHistogram
from fourfold.measure.metrics import (
    SLO_METRICS,
    answer_tps,
    check_slo,
    end_s,
    is_interrupted,
    is_stall,
    jitter_ms,
    jitter_ms_of_gaps,
    meets_slo,
    pulse_hz,
    pulse_hz_of_gaps,
    ratio,
    reasoning_ms,
    reasoning_tps,
    request_tps,
    tokens_by_second,
    tpot_ms,
    wall_s,
)
from fourfold.measure.record import (
    INPUT_TOKENS_SOURCE,
    INPUT_USAGE_IMPLAUSIBLE,
    NO_TERMINAL_EVENT,
    UNSOLICITED,
    UNSOLICITED_BEFORE,
    USAGE_IMPLAUSIBLE,
    RequestRecord,
)
from fourfold.measure.rhythm import stall_count
from fourfold.measure.tokentiming import add_token_timing, token_rates
from fourfold.measure.toolcalls import add_tool_calls, tool_rates

__all__ = ["COUNTERS", "HISTOGRAMS", "QUANTILES", "SLO_METRICS", "GroupStats", "LLMStats", "check_slo",
           "end_s", "is_interrupted", "meets_slo", "tokens_by_second"]

HISTOGRAMS = ("ttfb_ms", "ttft_ms", "ttfo_ms", "itl_ms", "tpot_ms", "e2e_ms", "output_tokens", "queue_ms",
              "request_tps", "jitter_ms", "reasoning_ms", "reasoning_tokens", "answer_tps", "itl_token_ms",
              "reasoning_tps")
PULSE_HIST = "pulse_hz"      # pulse frequency of each pulsing request; the summary shows its p50 as pulse_hz
COUNTERS = ("requests", "ok", "failures", "interrupted", "stalls", "requests_with_stall", "good",
            "output_tokens_total", "prompt_tokens_total", "output_tokens_estimated",
            "output_tokens_tokenizer", "input_tokens_usage", "input_tokens_tokenizer", "conn_reused",
            "conn_new", "conn_reconnects", "usage_implausible", "no_terminal_event", "unsolicited_responses",
            "requests_pulsing", "requests_rhythm", "requests_reasoning", "reasoning_tokens_total",
            "cached_tokens_total", "cache_input_tokens", "content_chunks", "multi_token_chunks",
            "tokens_compared", "tokens_discrepant", "tokens_server_total", "tokens_client_total",
            "tool_calls", "requests_tool_calls", "tool_calls_judged", "tool_calls_invalid",
            "tool_calls_valid")
QUANTILES = (("p50", 0.50), ("p90", 0.90), ("p95", 0.95), ("p99", 0.99))
DEFAULT_STALL_THRESHOLD_MS = 150.0
TOTAL_LEVEL, TOTAL_SCENARIO = "Aggregated", ""
WIRE_VERSION = 1
# per-second slot: [output_tokens, finished, failures, ttft_count, ttft_sum_ms, ttft_max_ms, stalls]
_TOKENS, _FINISHED, _FAILURES, _TTFT_N, _TTFT_SUM, _TTFT_MAX, _STALLS = range(7)
_EMPTY_SLOT = (0, 0, 0, 0, 0.0, 0.0, 0)
K = TypeVar("K")
_ARRAY_MIN = 32      # a record with this many chunk offsets has its gaps taken as an array


@dataclass
class GroupStats:
    """Every aggregate for one (level, scenario); see the module docstring for definitions."""

    alpha: float = DEFAULT_ALPHA
    hists: dict[str, LogHistogram] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNTERS, 0))
    errors: dict[str, int] = field(default_factory=dict)
    statuses: dict[int, int] = field(default_factory=dict)
    first_start: float | None = None
    last_end: float | None = None
    per_second: dict[int, list[float]] = field(default_factory=dict)
    # server-side stage -> time (ok requests)
    server_ms: dict[str, LogHistogram] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in (*HISTOGRAMS, PULSE_HIST):
            self.hists.setdefault(name, LogHistogram(self.alpha))

    def _slot(self, sec: int) -> list[float]:
        slot = self.per_second.get(sec)
        if slot is None:
            slot = self.per_second[sec] = list(_EMPTY_SLOT)
        return slot

    def add(self, record: RequestRecord, stall_threshold_ms: float, slo_ms: dict[str, float]) -> None:
        c, h = self.counts, self.hists
        ok = record.ok
        gaps: list[float] | np.ndarray
        if len(record.chunk_offsets_ms) >= _ARRAY_MIN:    # a long stream: its gaps as one array
            offsets = np.asarray(record.chunk_offsets_ms, dtype=np.float64)
            gaps = offsets[1:] - offsets[:-1]
            stalls = int(np.count_nonzero(gaps > stall_threshold_ms))
        else:
            gaps = record.itl_ms
            stalls = stall_count(gaps, stall_threshold_ms)
        c["requests"] += 1
        c["ok" if ok else "failures"] += 1
        self.errors[record.error_class] = self.errors.get(record.error_class, 0) + 1
        self.statuses[record.status] = self.statuses.get(record.status, 0) + 1
        c["interrupted"] += is_interrupted(record)
        c["stalls"] += stalls
        c["requests_with_stall"] += stalls > 0
        if stalls:
            chunk_ms = record.chunk_offsets_ms
            for j, gap in enumerate(gaps):
                if is_stall(gap, stall_threshold_ms):
                    self._slot(math.floor(record.started_at + chunk_ms[j + 1] / 1000))[_STALLS] += 1
        c["output_tokens_total"] += record.output_tokens
        c["prompt_tokens_total"] += record.input_tokens or 0
        c["reasoning_tokens_total"] += record.reasoning_tokens
        if record.cached_tokens is not None and record.input_tokens:     # the server said what it cached
            c["cached_tokens_total"] += record.cached_tokens
            c["cache_input_tokens"] += record.input_tokens
        c["output_tokens_estimated"] += record.output_tokens > 0 and record.output_tokens_source != "usage"
        c["output_tokens_tokenizer"] += record.output_tokens_source == "tokenizer"
        if record.input_tokens is not None:     # counted by --tokenizer, else the server's usage
            by_tokenizer = record.extra.get(INPUT_TOKENS_SOURCE) == "tokenizer"
            c["input_tokens_tokenizer" if by_tokenizer else "input_tokens_usage"] += 1
        if record.conn_reused is not None:
            c["conn_reused" if record.conn_reused else "conn_new"] += 1
        c["conn_reconnects"] += record.conn_reconnected
        extra = record.extra
        if extra:      # what the target got wrong beside the class (measure.record's extra keys)
            c["usage_implausible"] += USAGE_IMPLAUSIBLE in extra or INPUT_USAGE_IMPLAUSIBLE in extra
            c["no_terminal_event"] += NO_TERMINAL_EVENT in extra
            c["unsolicited_responses"] += UNSOLICITED in extra or UNSOLICITED_BEFORE in extra
        c["good"] += meets_slo(record, slo_ms)
        h["queue_ms"].add(record.queue_ms)
        if ok:
            for name, value in (("ttfb_ms", record.ttfb_ms), ("ttft_ms", record.ttft_ms),
                                ("ttfo_ms", record.ttfo_ms), ("e2e_ms", record.e2e_ms),
                                ("reasoning_ms", reasoning_ms(record)), ("answer_tps", answer_tps(record)),
                                ("reasoning_tps", reasoning_tps(record))):
                if value is not None:
                    h[name].add(value)
            if record.reasoning_tokens:
                c["requests_reasoning"] += 1
                h["reasoning_tokens"].add(record.reasoning_tokens)
            tpot = tpot_ms(record)
            if tpot is not None:
                h["tpot_ms"].add(tpot)
                speed = request_tps(tpot)
                if speed is not None:
                    h["request_tps"].add(speed)
            h["output_tokens"].add(record.output_tokens)
            h["itl_ms"].add_all(gaps)
            add_token_timing(c, h["itl_token_ms"], record, gaps)
            add_tool_calls(c, record)
            jitter = jitter_ms(record) if isinstance(gaps, list) else jitter_ms_of_gaps(gaps)
            if jitter is not None:
                h["jitter_ms"].add(jitter)
                # pulse_hz(record), from the gaps in hand (float32, as the report keeps them)
                pulse = (pulse_hz(record) if isinstance(gaps, list)
                         else pulse_hz_of_gaps(gaps.astype(np.float32)))
                if pulse is not None:
                    c["requests_rhythm"] += 1
                    if pulse > 0:
                        h[PULSE_HIST].add(pulse)
                        c["requests_pulsing"] += 1
            for stage, ms in record.server_timing.items():     # Server-Timing, Triton's inference_time
                self.server_ms.setdefault(stage, LogHistogram(self.alpha)).add(ms)
        ended = end_s(record)
        start = record.started_at
        self.first_start = start if self.first_start is None else min(self.first_start, start)
        self.last_end = ended if self.last_end is None else max(self.last_end, ended)
        for sec, n in tokens_by_second(record).items():
            self._slot(sec)[_TOKENS] += n
        slot = self._slot(math.floor(ended))
        slot[_FINISHED] += 1
        slot[_FAILURES] += not ok
        if ok and record.ttft_ms is not None:
            slot = self._slot(math.floor(record.started_at + record.ttft_ms / 1000))
            slot[_TTFT_N] += 1
            slot[_TTFT_SUM] += record.ttft_ms
            slot[_TTFT_MAX] = max(slot[_TTFT_MAX], record.ttft_ms)

    def merge(self, other: GroupStats) -> None:
        for name, hist in other.hists.items():
            self.hists.setdefault(name, LogHistogram(self.alpha)).merge(hist)
        _add_counts(self.counts, other.counts)
        _add_counts(self.errors, other.errors)
        _add_counts(self.statuses, other.statuses)
        for stage, hist in other.server_ms.items():
            self.server_ms.setdefault(stage, LogHistogram(self.alpha)).merge(hist)
        starts = [t for t in (self.first_start, other.first_start) if t is not None]
        ends = [t for t in (self.last_end, other.last_end) if t is not None]
        self.first_start, self.last_end = min(starts, default=None), max(ends, default=None)
        for sec, theirs in other.per_second.items():
            mine = self._slot(sec)
            for i in (_TOKENS, _FINISHED, _FAILURES, _TTFT_N, _TTFT_SUM, _STALLS):
                mine[i] += theirs[i]
            mine[_TTFT_MAX] = max(mine[_TTFT_MAX], theirs[_TTFT_MAX])

    def to_wire(self) -> dict[str, Any]:
        hists = {name: hist.to_wire() for name, hist in self.hists.items() if hist.count or hist.invalid}
        return {"h": hists,
                "c": {k: v for k, v in self.counts.items() if v}, "e": dict(self.errors),
                "st": dict(self.statuses), "t0": self.first_start, "t1": self.last_end,
                "ps": {sec: list(slot) for sec, slot in self.per_second.items()},
                "sv": {stage: hist.to_wire() for stage, hist in self.server_ms.items()}}

    @classmethod
    def from_wire(cls, data: dict[str, Any], alpha: float = DEFAULT_ALPHA) -> GroupStats:
        group = cls(alpha=alpha)
        for name, hist in data.get("h", {}).items():
            group.hists[name] = LogHistogram.from_wire(hist)
        group.counts.update({k: int(v) for k, v in data.get("c", {}).items()})
        group.errors = {str(k): int(v) for k, v in data.get("e", {}).items()}
        group.statuses = {int(k): int(v) for k, v in data.get("st", {}).items()}
        group.first_start, group.last_end = data.get("t0"), data.get("t1")
        group.per_second = {int(k): [*v, *_EMPTY_SLOT[len(v):]] for k, v in data.get("ps", {}).items()}
        group.server_ms = {str(k): LogHistogram.from_wire(v) for k, v in data.get("sv", {}).items()}
        return group

    @property
    def wall_s(self) -> float | None:
        return wall_s(self.first_start, self.last_end)

    def series(self) -> dict[str, list[Any]]:
        """Columnar per-second series from the first to the last second seen (gaps filled with 0)."""
        cols: dict[str, list[Any]] = {k: [] for k in ("t_s", "output_tokens", "finished", "failures",
                                                      "ttft_count", "ttft_mean_ms", "ttft_max_ms",
                                                      "stalls")}
        if not self.per_second:
            return cols
        for sec in range(min(self.per_second), max(self.per_second) + 1):
            slot = self.per_second.get(sec, _EMPTY_SLOT)
            n = int(slot[_TTFT_N])
            cols["t_s"].append(sec)
            cols["output_tokens"].append(int(slot[_TOKENS]))
            cols["finished"].append(int(slot[_FINISHED]))
            cols["failures"].append(int(slot[_FAILURES]))
            cols["ttft_count"].append(n)
            cols["ttft_mean_ms"].append(slot[_TTFT_SUM] / n if n else None)
            cols["ttft_max_ms"].append(slot[_TTFT_MAX] if n else None)
            cols["stalls"].append(int(slot[_STALLS]))
        return cols

    def summary(self, level: str, scenario: str) -> dict[str, Any]:
        """JSON-friendly: counters, rates, and count/mean/min/max/p50/p90/p95/p99 per histogram."""
        c, wall_s = self.counts, self.wall_s
        known_conn = c["conn_reused"] + c["conn_new"]
        out: dict[str, Any] = {"level": level, "scenario": scenario, **c,
                               "errors": dict(sorted(self.errors.items())),
                               "statuses": {str(k): v for k, v in sorted(self.statuses.items())},
                               "first_start_s": self.first_start, "last_end_s": self.last_end,
                               "wall_s": wall_s,
                               "request_rps": ratio(c["requests"], wall_s),
                               "output_tps": ratio(c["output_tokens_total"], wall_s),
                               "goodput_rps": ratio(c["good"], wall_s),
                               "goodput_ratio": ratio(c["good"], c["requests"]),
                               "error_rate": ratio(c["failures"], c["requests"]),
                               "interruption_rate": ratio(c["interrupted"], c["requests"]),
                               "stall_rate": ratio(c["requests_with_stall"], c["requests"]),
                               "conn_reuse": ratio(c["conn_reused"], known_conn),
                               "reasoning_share": ratio(c["requests_reasoning"], c["ok"]),
                               "cache_hit_share": ratio(c["cached_tokens_total"], c["cache_input_tokens"]),
                               **token_rates(c), **tool_rates(c)}
        for name in HISTOGRAMS:
            out[name] = _hist_summary(self.hists[name])
        pulse = self.hists[PULSE_HIST]
        # the median pulsing stream's frequency (0 when none pulses), and the share of streams that pulse
        out["pulse_hz"] = (pulse.quantiles([0.5])[0] if pulse.count
                           else (0.0 if c["requests_rhythm"] else None))
        out["pulse_share"] = ratio(c["requests_pulsing"], c["requests_rhythm"])
        if self.server_ms:     # server-side time per stage, as the server reported it (ok requests)
            out["server_timing_ms"] = {stage: _hist_summary(hist)
                                       for stage, hist in sorted(self.server_ms.items())}
        return out


def _hist_summary(hist: LogHistogram) -> dict[str, Any]:
    quantiles = hist.quantiles(q for _, q in QUANTILES)
    return {"count": hist.count, "mean": hist.mean, "min": hist.min, "max": hist.max,
            **{label: value for (label, _), value in zip(QUANTILES, quantiles, strict=True)}}


def _add_counts(target: dict[K, int], source: dict[K, int]) -> None:
    for key, n in source.items():
        target[key] = target.get(key, 0) + n


class LLMStats:
    """GroupStats per (level, scenario), with Locust delta shipping (``take_wire``/``merge_wire``).

    Records are aggregated in batches of up to :data:`BATCH`: the load generator's per-record
    numpy work runs faster back to back than between other streams' reads, which evict its code
    and data from the caches (in a 64-stream run, thread time, 371 -> 256 us per record with
    batches of 16). ``groups``, and so every reading method, first aggregates what is pending, so
    nothing read is ever behind. The batch is small because aggregating it holds the hub (16 long
    records held it ~4 ms, and an open-loop replay's p99 dispatch lateness crossed 5 ms once in
    CI); at saturation 4 and 16 measured the same CPU per token within the noise (docs/benchmarks.md)."""

    BATCH = 4

    def __init__(self, stall_threshold_ms: float = DEFAULT_STALL_THRESHOLD_MS,
                 slo_ms: dict[str, float] | None = None, alpha: float = DEFAULT_ALPHA) -> None:
        self.stall_threshold_ms = float(stall_threshold_ms)
        self.slo_ms = check_slo(slo_ms)
        self.alpha = alpha
        self._groups: dict[tuple[str, str], GroupStats] = {}
        self._pending: list[RequestRecord] = []

    @property
    def groups(self) -> dict[tuple[str, str], GroupStats]:
        if self._pending:
            self.flush()
        return self._groups

    @groups.setter
    def groups(self, groups: dict[tuple[str, str], GroupStats]) -> None:
        self._pending = []
        self._groups = groups

    def group(self, level: str, scenario: str) -> GroupStats:
        if self._pending:
            self.flush()
        return self._group(level, scenario)

    def _group(self, level: str, scenario: str) -> GroupStats:
        key = (level, scenario)
        found = self._groups.get(key)
        if found is None:
            found = self._groups[key] = GroupStats(alpha=self.alpha)
        return found

    def add_record(self, record: RequestRecord) -> None:
        """Aggregate one record (warm-up and cancelled records are skipped): at the latest when
        :data:`BATCH` are pending or the aggregates are read."""
        if not record.warmup and record.error_class != "cancelled":
            self._pending.append(record)
            if len(self._pending) >= self.BATCH:
                self.flush()

    def flush(self) -> None:
        """Aggregate the pending records now, in the order they came."""
        pending, self._pending = self._pending, []
        for record in pending:
            self._group(record.level, record.scenario).add(record, self.stall_threshold_ms, self.slo_ms)

    def total(self) -> GroupStats:
        """Every key merged into one GroupStats (exact)."""
        total = GroupStats(alpha=self.alpha)
        for group in self.groups.values():
            total.merge(group)
        return total

    def reset(self) -> None:
        self.groups = {}

    # ---- worker -> master ----
    def to_wire(self) -> dict[str, Any]:
        return {"v": WIRE_VERSION, "stall_ms": self.stall_threshold_ms, "slo": dict(self.slo_ms),
                "g": [[level, scenario, group.to_wire()] for (level, scenario), group in self.groups.items()]}

    def take_wire(self) -> dict[str, Any]:
        """``to_wire()`` then ``reset()``: the delta a worker ships in ``report_to_master``."""
        wire = self.to_wire()
        self.reset()
        return wire

    def merge_wire(self, data: dict[str, Any]) -> None:
        """Merge another process's wire (a worker's delta) into these aggregates, exactly. An empty
        delta (an idle worker's report, whatever thresholds it was started with) merges trivially."""
        if not data or not data.get("g"):
            return
        if data.get("v", WIRE_VERSION) > WIRE_VERSION:
            raise ValueError(f"LLMStats wire version {data['v']} is newer than {WIRE_VERSION}: "
                             "upgrade fourfold on the master")
        if float(data.get("stall_ms", self.stall_threshold_ms)) != self.stall_threshold_ms or \
                check_slo(data.get("slo", self.slo_ms)) != self.slo_ms:
            raise ValueError(f"cannot merge stats counted with stall threshold {data.get('stall_ms')} and "
                             f"SLO {data.get('slo')} into {self.stall_threshold_ms} / {self.slo_ms}")
        for level, scenario, group in data.get("g", []):
            self.group(level, scenario).merge(GroupStats.from_wire(group, self.alpha))

    # ---- reading ----
    def summary(self) -> dict[str, Any]:
        """``{"stall_threshold_ms", "slo_ms", "histogram_alpha", "groups": [per-key summary...],
        "total": summary}``."""
        return {"stall_threshold_ms": self.stall_threshold_ms, "slo_ms": dict(self.slo_ms),
                "histogram_alpha": self.alpha,
                "groups": [group.summary(level, scenario)
                           for (level, scenario), group in sorted(self.groups.items())],
                "total": self.total().summary(TOTAL_LEVEL, TOTAL_SCENARIO)}

    def series(self, level: str | None = None, scenario: str | None = None) -> dict[str, list[Any]]:
        """Per-second series for one key, or across all keys when ``level`` is None."""
        if level is None:
            return self.total().series()
        group = self.groups.get((level, scenario or ""))
        return group.series() if group else GroupStats().series()

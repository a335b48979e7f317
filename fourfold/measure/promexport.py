"""fourfold's own figures in the Prometheus text exposition format (``--prometheus-port``), pure.

What a scrape of ``/metrics`` returns (the server is :mod:`fourfold.levels.prometheus`), rendered
from the live :class:`~fourfold.measure.stats.LLMStats` (a master's: its workers' merged) and the
levels' live blocks. Every family is in :data:`FAMILIES` (name -> type, help): the one list the
docs (docs/prometheus.md) and the Grafana dashboard's test read.

- **Histograms** (``fourfold_ttft_seconds`` ...: TTFT, ITL, TPOT, E2E, open-loop queueing), in
  seconds, labelled ``level``, ``scenario``, ``variant``, from the report's own log buckets. The
  ``le`` bounds are every :data:`BOUND_STEP`-th boundary of those buckets, ``gamma**K`` ms for
  ``K = 0, 20, 40, ...`` (1 ms to ~11 min, 68 bounds and ``+Inf``): each exported bucket is an exact
  union of internal buckets, so its cumulative count is exact, not re-binned. Neighbouring bounds
  differ by a factor ``gamma**20`` = 1.221: ``histogram_quantile`` interpolates inside the bucket
  that holds the quantile's rank, the same bucket that holds the summary's percentile, so the two
  agree within that bucket (at most 22 % apart; the summary's own is within 0.5 % of exact).
  Values below 1 ms are in the first bucket; ``_sum`` and ``_count`` are the histogram's.
- **Counters**: requests by ``class`` (``ok`` or the error class), failed requests (the classes that
  count as failures: ``truncated`` is a class but no failure), responses by HTTP ``status``,
  output / input / reasoning tokens, stalls, requests with a stall, interrupted requests, requests
  meeting the SLO (goodput), reconnects; L4 sessions started, ended by outcome, and cut.
- **Gauges**: users running, the ladder's step and knee (L2), recall@k, precision@k and the
  conflict rate (L3), session completion rate (L4), and ``fourfold_test_finished`` (1 once the
  test's summary.json is written: what a final scrape shows is that summary's data).

A scenario of L4's sticky A/B (``chat@B``) is ``scenario="chat", variant="B"``; every other
scenario has ``variant=""`` (a ladder step's ``ladder@32`` stays the scenario). Counters and
histograms restart from 0 when a web-UI test begins anew (Prometheus treats it as a counter reset).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from fourfold.measure.histogram import LogHistogram
from fourfold.measure.stats import LLMStats

__all__ = ["BOUND_STEP", "CONTENT_TYPE", "FAMILIES", "HISTOGRAMS", "Gauge", "bounds_ms", "escape",
           "level_gauges", "render", "split_variant"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
BOUND_STEP = 20                # internal log buckets per exported bucket (gamma**20 = 1.221 at alpha 0.005)
_TOP_MS = 600_000.0            # the last finite bound is the first at or above 10 minutes
_VARIANTS = ("A", "B")         # L4's sticky A/B (levels/l4_ab.py): "chat@B" -> chat, B

# exported histogram -> LLMStats' histogram (ms)
HISTOGRAMS: dict[str, str] = {
    "fourfold_ttft_seconds": "ttft_ms",
    "fourfold_itl_seconds": "itl_ms",
    "fourfold_tpot_seconds": "tpot_ms",
    "fourfold_e2e_seconds": "e2e_ms",
    "fourfold_queue_seconds": "queue_ms",
}
# exported counter -> LLMStats' counter (the per-group ones without another label)
_COUNTERS: dict[str, str] = {
    "fourfold_failed_requests_total": "failures",
    "fourfold_output_tokens_total": "output_tokens_total",
    "fourfold_input_tokens_total": "prompt_tokens_total",
    "fourfold_reasoning_tokens_total": "reasoning_tokens_total",
    "fourfold_stalls_total": "stalls",
    "fourfold_requests_with_stall_total": "requests_with_stall",
    "fourfold_interrupted_requests_total": "interrupted",
    "fourfold_good_requests_total": "good",
    "fourfold_reconnects_total": "conn_reconnects",
}
FAMILIES: dict[str, tuple[str, str]] = {
    "fourfold_ttft_seconds": ("histogram", "Time to first token of ok requests"),
    "fourfold_itl_seconds": ("histogram", "Gaps between consecutive content chunks of ok requests"),
    "fourfold_tpot_seconds": ("histogram",
                              "Time per output token after the first: (E2E - TTFT) / (tokens - 1)"),
    "fourfold_e2e_seconds": ("histogram", "End-to-end latency of ok requests"),
    "fourfold_queue_seconds": ("histogram", "Open-loop client queueing, intended arrival to send"),
    "fourfold_requests_total": ("counter", "Requests measured, by class (ok or the error class)"),
    "fourfold_responses_total": ("counter", "Requests measured, by HTTP status (0: no response)"),
    "fourfold_failed_requests_total": ("counter", "Requests that failed (a class that counts as failure)"),
    "fourfold_output_tokens_total": ("counter", "Output tokens received (failed streams too)"),
    "fourfold_input_tokens_total": ("counter", "Prompt tokens sent (the server's usage or --tokenizer)"),
    "fourfold_reasoning_tokens_total": ("counter", "Reasoning tokens received"),
    "fourfold_stalls_total": ("counter", "Gaps between content chunks above --stall-ms"),
    "fourfold_requests_with_stall_total": ("counter", "Requests with at least one stall"),
    "fourfold_interrupted_requests_total": ("counter", "Requests whose answer started and did not end"),
    "fourfold_good_requests_total": ("counter", "Ok requests meeting every SLO threshold (goodput)"),
    "fourfold_reconnects_total": ("counter", "Requests whose idle pooled connection had been closed"),
    "fourfold_users": ("gauge", "Locust users running"),
    "fourfold_test_finished": ("gauge", "1 once the test's summary.json is written, else 0"),
    "fourfold_ladder_step_users": ("gauge", "L2 ladder: the users of the step running now"),
    "fourfold_ladder_knee_users": ("gauge", "L2 ladder: the highest step meeting the TTFT SLO so far"),
    "fourfold_rag_recall_at_k": ("gauge", "L3: mean recall@k of the retrieved documents"),
    "fourfold_rag_precision_at_k": ("gauge", "L3: mean precision@k of the retrieved documents"),
    "fourfold_rag_conflict_ratio": ("gauge", "L3: share of answers that took a side of a conflict"),
    "fourfold_sessions_started_total": ("counter", "L4: sessions started"),
    "fourfold_sessions_ended_total": ("counter", "L4: sessions ended, by outcome"),
    "fourfold_sessions_cut_total": ("counter", "L4: sessions still going when the run stopped"),
    "fourfold_session_completion_ratio": ("gauge", "L4: completed sessions / ended sessions"),
}
_SESSION_OUTCOMES = ("completed", "abandoned", "max_turns")


@dataclass(frozen=True)
class Gauge:
    """One sample of a family that is not read from LLMStats (a level figure, the users)."""

    family: str
    labels: tuple[tuple[str, str], ...]
    value: float


def escape(value: str) -> str:
    """A label value as the exposition format quotes it: backslash, double quote and newline escaped."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def split_variant(scenario: str) -> tuple[str, str]:
    """``"chat@B"`` -> ``("chat", "B")``; any other scenario -> ``(scenario, "")``."""
    base, at, variant = scenario.rpartition("@")
    return (base, variant) if at and base and variant in _VARIANTS else (scenario, "")


@lru_cache(maxsize=8)
def bounds_ms(alpha: float) -> tuple[tuple[int, float], ...]:
    """The exported buckets' (internal key, upper bound in ms): keys 0, BOUND_STEP, ... up to the
    first bound at or above 10 minutes; bound = ``gamma**key``, the upper edge of internal bucket key."""
    gamma = (1.0 + alpha) / (1.0 - alpha)
    step = max(1, round(BOUND_STEP * math.log((1.0 + 0.005) / (1.0 - 0.005)) / math.log(gamma)))
    out: list[tuple[int, float]] = []
    key = 0
    while True:
        bound = gamma**key
        out.append((key, bound))
        if bound >= _TOP_MS:
            return tuple(out)
        key += step


@lru_cache(maxsize=8)
def _le_values(alpha: float) -> tuple[str, ...]:
    """The ``le`` label values of :func:`bounds_ms` (seconds), formatted once."""
    return tuple(_number(bound / 1000.0) for _, bound in bounds_ms(alpha))


def _number(value: float) -> str:
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def _labels(pairs: Iterable[tuple[str, str]]) -> str:
    body = ",".join(f'{name}="{escape(value)}"' for name, value in pairs)
    return "{" + body + "}" if body else ""


def _histogram_lines(name: str, labels: str, hist: LogHistogram, out: list[str]) -> None:
    """Cumulative ``le`` buckets (seconds), ``_sum`` (s) and ``_count`` of one histogram."""
    bounds = bounds_ms(hist.alpha)
    last, step = len(bounds), bounds[1][0] - bounds[0][0]
    per_bound = [0] * (last + 1)            # the internal buckets each exported one unites; +Inf last
    per_bound[0] = hist.zero_count          # values below ZERO_CUTOFF (0.001 ms): under every bound
    for key, count in hist.buckets.items():
        index = -(-key // step) if key > 0 else 0      # the first bound key at or above this key
        per_bound[index if index < last else last] += count
    prefix = labels[:-1] + "," if labels else "{"
    cumulative = 0
    head = f"{name}_bucket{prefix}le="
    for le, count in zip(_le_values(hist.alpha), per_bound, strict=False):
        cumulative += count
        out.append(f'{head}"{le}"}} {cumulative}')
    out.append(f'{name}_bucket{prefix}le="+Inf"}} {hist.count}')
    out.append(f"{name}_sum{labels} {_number(hist.sum / 1000.0)}")
    out.append(f"{name}_count{labels} {hist.count}")


def render(stats: LLMStats, gauges: Iterable[Gauge] = ()) -> str:
    """The exposition text of ``stats`` (every group) and ``gauges``: each family's HELP and TYPE
    once, then its samples; families with no sample are left out."""
    lines: dict[str, list[str]] = {family: [] for family in FAMILIES}
    for (level, scenario), group in sorted(stats.groups.items()):
        base, variant = split_variant(scenario)
        pairs = (("level", level), ("scenario", base), ("variant", variant))
        labels = _labels(pairs)
        for family, source in HISTOGRAMS.items():
            _histogram_lines(family, labels, group.hists[source], lines[family])
        for error_class, count in sorted(group.errors.items()):
            lines["fourfold_requests_total"].append(
                f"fourfold_requests_total{_labels((*pairs, ('class', error_class)))} {count}")
        for status, count in sorted(group.statuses.items()):
            lines["fourfold_responses_total"].append(
                f"fourfold_responses_total{_labels((*pairs, ('status', str(status))))} {count}")
        for family, counter in _COUNTERS.items():
            lines[family].append(f"{family}{labels} {group.counts[counter]}")
    for gauge in gauges:
        if gauge.family not in lines:
            raise ValueError(f"{gauge.family} is no family of fourfold's exposition")
        lines[gauge.family].append(f"{gauge.family}{_labels(gauge.labels)} {_number(gauge.value)}")
    text: list[str] = []
    for family, samples in lines.items():
        if samples:
            kind, help_text = FAMILIES[family]
            text.append(f"# HELP {family} {help_text}")
            text.append(f"# TYPE {family} {kind}")
            text.extend(samples)
    return "\n".join(text) + "\n"


def level_gauges(blocks: Mapping[str, Any], *, users: int | None = None, ladder_step: int | None = None,
                 finished: bool = False) -> list[Gauge]:
    """The level figures from the levels' live blocks (:func:`fourfold.levels.runtime.live_blocks`:
    ``l2``, ``rag``, ``sessions``), the users running and the ladder's current step."""
    out = [Gauge("fourfold_test_finished", (), 1 if finished else 0)]
    if users is not None:
        out.append(Gauge("fourfold_users", (), users))
    if ladder_step is not None:
        out.append(Gauge("fourfold_ladder_step_users", (("level", "l2"),), ladder_step))
    knee = (blocks.get("l2") or {}).get("knee_users")
    if isinstance(knee, (int, float)):
        out.append(Gauge("fourfold_ladder_knee_users", (("level", "l2"),), knee))
    rag = blocks.get("rag") or {}
    for family, key in (("fourfold_rag_recall_at_k", "recall_at_k"), ("fourfold_rag_precision_at_k",
                                                                     "precision_at_k"),
                        ("fourfold_rag_conflict_ratio", "conflict_rate")):
        value = rag.get(key)
        if isinstance(value, (int, float)):
            labels = (("level", "l3"), ("k", str(rag.get("k", "")))) if key != "conflict_rate" else \
                (("level", "l3"),)
            out.append(Gauge(family, labels, value))
    sessions = blocks.get("sessions") or {}
    by_variant = sessions.get("by_variant") or {}
    for variant, block in (by_variant.items() if by_variant else (("", sessions.get("total") or {}),)):
        if not block:
            continue
        labels = (("level", "l4"), ("variant", variant))
        out.append(Gauge("fourfold_sessions_started_total", labels, block.get("started", 0)))
        for outcome in _SESSION_OUTCOMES:
            out.append(Gauge("fourfold_sessions_ended_total", (*labels, ("outcome", outcome)),
                             block.get(outcome, 0)))
        out.append(Gauge("fourfold_sessions_cut_total", labels, block.get("cut", 0)))
        if isinstance(block.get("completion_rate"), (int, float)):
            out.append(Gauge("fourfold_session_completion_ratio", labels, block["completion_rate"]))
    return out

"""The data of a comparison: one side of a group (:class:`GroupSample`), the settings, an
estimate and a row of the table (:class:`Row`). :mod:`reports.compare` turns them into rows."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from fourfold.measure.cost import Prices
from fourfold.measure.histogram import bucket_quantiles
from fourfold.reports.replication import Spread
from fourfold.reports.verdict import (
    BETTER,
    EQUIVALENT,
    INCONCLUSIVE,
    NA,
    NO_CHANGE,
    TOO_FEW,
    WORSE,
    MinEffect,
)

__all__ = ["BETTER", "DEFAULT_GATE", "DEFAULT_SETTINGS", "EQUIVALENT", "INCONCLUSIVE", "NA", "NO_CHANGE",
           "TOO_FEW", "WORSE", "GroupSample", "ItlSample", "Metric", "PairedItems", "PairedMeasure", "Row",
           "CompareSettings", "SideMeasure", "Spread"]

MIN_PAIRED_ITEMS = 5
ITL_QUANTILES = (0.50, 0.95, 0.99)
ITL_BOOTSTRAP_RECORDS = 1000     # requests per side resampled for the ITL intervals
# the rows --fail-on-worse decides on (fnmatch patterns of row keys): Holm's family; every other row is
# corrected by Benjamini-Hochberg and shown, but does not fail the gate (``--gate`` replaces the list)
DEFAULT_GATE = ("ttft_p50", "ttft_p95", "ttft_p99", "e2e_p50", "e2e_p95", "e2e_p99", "itl_p95", "tpot_p50",
                "output_tps", "goodput_rps", "error_rate", "interruption_rate", "similarity_mean",
                "completion_rate", "recall_at_k")


@dataclass
class ItlSample:
    """Pooled ITL gaps of a group's ok requests: full log-bucket counts and a sample of requests."""

    keys: np.ndarray            # sorted bucket keys (measure.histogram.bucket_keys)
    counts: np.ndarray
    min: float
    max: float
    records: int                # ok requests with at least one gap (the population of ``sample``)
    sample: list[np.ndarray]    # the gaps of an evenly spread sample of those requests

    @property
    def count(self) -> int:
        return int(self.counts.sum())

    def quantiles(self, qs: tuple[float, ...]) -> list[float | None]:
        """Nearest-rank quantiles, as LogHistogram gives them (:func:`measure.histogram.bucket_quantiles`)."""
        return bucket_quantiles(self.keys, self.counts, qs, self.min, self.max)


@dataclass
class GroupSample:
    """One side of one group: plain arrays and counts (see reports.load.group_samples). A count or
    rate has the name summary.json gives the same metric (:mod:`fourfold.measure.metric_names`)."""

    requests: int = 0
    ok: int = 0
    failures: int = 0
    interrupted: int = 0
    requests_with_stall: int = 0
    conn_known: int = 0
    conn_reused: int = 0
    ttft_ms: np.ndarray = field(default_factory=lambda: np.zeros(0))     # ok requests, ascending
    ttfo_ms: np.ndarray = field(default_factory=lambda: np.zeros(0))     # ok requests with an answer token
    reasoning_ms: np.ndarray = field(default_factory=lambda: np.zeros(0))   # ok requests that reasoned first
    answer_tps: np.ndarray = field(default_factory=lambda: np.zeros(0))
    reasoning_tps: np.ndarray = field(default_factory=lambda: np.zeros(0))
    requests_reasoning: int = 0                   # ok requests with reasoning tokens
    cached_tokens_total: float = 0.0              # prompt tokens the server said its prefix cache served ...
    cache_input_tokens: float = 0.0               # ... of the prompts of the requests it said it for
    cache_hit_planned: float | None = None        # the share the workload was built for (workloads.cacheplan)
    e2e_ms: np.ndarray = field(default_factory=lambda: np.zeros(0))
    tpot_ms: np.ndarray = field(default_factory=lambda: np.zeros(0))
    ttft_plain_ms: np.ndarray | None = None       # ok requests by prompt kind (None: kind unknown)
    ttft_structured_ms: np.ndarray | None = None
    itl: ItlSample | None = None
    itl_token: ItlSample | None = None            # the same per token (measure.tokentiming)
    content_chunks: float = 0.0                   # of the ok requests; those that carried several tokens:
    multi_token_chunks: float = 0.0
    tokens_compared: int = 0                      # ok streamed requests counted by the server and the client
    tokens_discrepant: int = 0
    tokens_server_total: float = 0.0
    tokens_client_total: float = 0.0
    tool_calls: float = 0.0                       # calls of ok answers (measure.toolcalls) ...
    requests_tool_calls: int = 0
    tool_calls_judged: float = 0.0                # ... judged against the tools the request offered
    tool_calls_invalid: float = 0.0
    tool_calls_valid: float = 0.0
    output_tokens_total: float = 0.0
    prompt_tokens_total: float = 0.0              # input tokens of every request whose count is known
    prices: Prices | None = None                  # the side's --price-* (measure.cost; reports.costrows)
    wall_s: float | None = None
    tokens_per_s: np.ndarray = field(default_factory=lambda: np.zeros(0))   # per 1-s interval
    good: int | None = None                       # None: no SLO known
    good_per_s: np.ndarray | None = None
    sessions_ended: int = 0
    sessions_completed: int = 0
    rounds: np.ndarray = field(default_factory=lambda: np.zeros(0))
    inputs_total: float = 0.0                     # embeddings / rerank (reports.embedrows): the ok requests'
    input_tokens_total: float = 0.0               # inputs and input tokens, and by the second they ended
    inputs_series: np.ndarray | None = None
    input_tokens_series: np.ndarray | None = None
    tool_calls_per_session: np.ndarray = field(default_factory=lambda: np.zeros(0))   # ended agentic sessions
    dns_ms: np.ndarray = field(default_factory=lambda: np.zeros(0))   # request phases (reports.phaserows), L2
    tcp_ms: np.ndarray = field(default_factory=lambda: np.zeros(0))
    tls_ms: np.ndarray = field(default_factory=lambda: np.zeros(0))
    send_ms: np.ndarray = field(default_factory=lambda: np.zeros(0))
    wait_ms: np.ndarray = field(default_factory=lambda: np.zeros(0))
    phase_means: dict[str, dict[str, float]] = field(default_factory=dict)   # "new"/"reused" -> phase -> ms
    recall: np.ndarray = field(default_factory=lambda: np.zeros(0))          # L3 recall@k per request
    recall_items: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=object))
    precision: np.ndarray = field(default_factory=lambda: np.zeros(0))       # L3 context precision@k
    precision_items: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=object))
    # L3: 1.0 / 0.0 per ok request with ids
    conflict: np.ndarray = field(default_factory=lambda: np.zeros(0))
    similarity: np.ndarray = field(default_factory=lambda: np.zeros(0))
    similarity_items: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=object))
    groundedness: np.ndarray = field(default_factory=lambda: np.zeros(0))
    compliant: np.ndarray = field(default_factory=lambda: np.zeros(0))      # 1.0 / 0.0 per judged answer
    compliant_items: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=object))
    # L3: 1.0 / 0.0 per fact-checked answer
    fact_error: np.ndarray = field(default_factory=lambda: np.zeros(0))
    fact_error_items: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=object))
    # 1.0 / 0.0 per answer with a similarity
    low_confidence: np.ndarray = field(default_factory=lambda: np.zeros(0))
    char_f1: np.ndarray = field(default_factory=lambda: np.zeros(0))        # per answer with a char-bigram F1
    char_f1_items: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=object))
    users: int | None = None                      # an A/B arm's users (None: not an arm)
    error_classes: dict[str, int] = field(default_factory=dict)   # failed requests per error class
    jitter_ms: np.ndarray = field(default_factory=lambda: np.zeros(0))      # per ok request (measure.metrics)
    pulse_hz: np.ndarray = field(default_factory=lambda: np.zeros(0))       # per ok request, 0 = smooth
    # server telemetry of the group's runs, "server.mem_bw_util_pct" -> samples (reports.telemetry)
    telemetry: dict[str, np.ndarray] = field(default_factory=dict)
    # the within-run blocks (reports.replication.block_ids): per sorted per-request array ("ttft_ms",
    # "e2e_ms", "tpot_ms") the block of each value, in the array's order; per count ("requests",
    # "failures", "error.<class>", ...) its sum per block. Absent (a sample built by hand): each value
    # is its own block, each count a binomial one.
    blocks_of: dict[str, np.ndarray] = field(default_factory=dict)
    block_counts: dict[str, np.ndarray] = field(default_factory=dict)
    unit: str = "run"                             # "run": one run; "arm": an A/B arm of one run (see compare)


@dataclass(frozen=True)
class CompareSettings:
    resamples: int = 2000
    seed: int = 0
    confidence: float = 0.95
    alpha: float = 0.05
    min_effects: tuple[tuple[str, MinEffect], ...] = ()     # --min-effect overrides (reports.verdict)
    gate: tuple[str, ...] = DEFAULT_GATE                   # Holm's family (fnmatch patterns of row keys)


DEFAULT_SETTINGS = CompareSettings()


@dataclass(frozen=True)
class Row:
    group: str
    metric: str
    label: str
    unit: str
    better: str                 # "lower" or "higher"
    baseline: float | None
    candidate: float | None
    delta: float | None
    delta_pct: float | None
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    verdict: str
    test: str
    n_baseline: int
    n_candidate: int
    paired: bool = False
    band: float | None = None             # the minimum effect that matters, in the row's unit
    p_adjusted: float | None = None       # Holm (gated rows) or Benjamini-Hochberg (the others)
    gated: bool = False                   # in --fail-on-worse's family
    runs_baseline: int = 0                # replicates behind each side (runs; an A/B arm: 1)
    runs_candidate: int = 0
    why: str = ""                         # what the verdict rests on, or why there is none
    per_run_var: float | None = None      # a run's variance (between + within) for this row, this data's
    runs_needed: int | None = None        # runs a side that decide DETECT_BANDS x band (80 % power;
                                          # compare.adjust)


@dataclass
class PairedItems:
    """A per-item comparison (the same items answered on both sides): item means and the differences."""

    baseline: float
    candidate: float
    diffs: np.ndarray


SideMeasure = Callable[[GroupSample, np.random.Generator, CompareSettings], "Spread | None"]
PairedMeasure = Callable[[GroupSample, GroupSample], "PairedItems | None"]


@dataclass(frozen=True)
class Metric:
    """A row of the table: its statistic on one run (``side``: value and within-run replicates), and,
    for per-item quality, the paired form used when the same items were answered on both sides."""

    key: str
    label: str
    unit: str
    better: str
    side: SideMeasure
    paired: PairedMeasure | None = None
    descriptive: bool = False             # values only: never a verdict (telemetry max)


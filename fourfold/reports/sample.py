"""The data of a comparison: one side of a group (:class:`GroupSample`), the settings, an
estimate and a row of the table (:class:`Row`). :mod:`reports.compare` turns them into rows."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from fourfold.measure.histogram import bucket_quantiles

__all__ = ["BETTER", "DEFAULT_SETTINGS", "NA", "SAME", "WORSE", "Estimate", "GroupSample", "ItlSample", "Measure",
           "Metric", "Row", "Settings"]

MIN_PAIRED_ITEMS = 5
ITL_QUANTILES = (0.50, 0.95, 0.99)
ITL_BOOTSTRAP_RECORDS = 1000     # requests per side resampled for the ITL intervals
BETTER, WORSE, SAME, NA = "better", "worse", "no significant change", "n/a"


@dataclass
class ItlSample:
    """Pooled ITL gaps of a group's ok requests: full log-bucket counts and a sample of requests."""

    keys: np.ndarray            # sorted bucket keys (measure.histogram.bucket_keys)
    counts: np.ndarray
    min: float
    max: float
    records: int                # ok requests with at least one gap (the population of ``sample``)
    sample: list[np.ndarray]    # the gaps of an evenly spread sample of those requests
    replicates: dict[tuple[int, int], np.ndarray] = field(default_factory=dict)   # cache of _itl_spread

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
    e2e_ms: np.ndarray = field(default_factory=lambda: np.zeros(0))
    tpot_ms: np.ndarray = field(default_factory=lambda: np.zeros(0))
    ttft_plain_ms: np.ndarray | None = None       # ok requests by prompt kind (None: kind unknown)
    ttft_structured_ms: np.ndarray | None = None
    itl: ItlSample | None = None
    output_tokens_total: float = 0.0
    wall_s: float | None = None
    tokens_per_s: np.ndarray = field(default_factory=lambda: np.zeros(0))   # per 1-s interval
    good: int | None = None                       # None: no SLO known
    good_per_s: np.ndarray | None = None
    sessions_ended: int = 0
    sessions_completed: int = 0
    rounds: np.ndarray = field(default_factory=lambda: np.zeros(0))
    recall: np.ndarray = field(default_factory=lambda: np.zeros(0))          # L3 recall@k per request
    recall_items: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=object))
    precision: np.ndarray = field(default_factory=lambda: np.zeros(0))       # L3 context precision@k
    precision_items: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=object))
    conflict: np.ndarray = field(default_factory=lambda: np.zeros(0))        # L3: 1.0 / 0.0 per ok request with ids
    similarity: np.ndarray = field(default_factory=lambda: np.zeros(0))
    similarity_items: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=object))
    groundedness: np.ndarray = field(default_factory=lambda: np.zeros(0))
    compliant: np.ndarray = field(default_factory=lambda: np.zeros(0))      # 1.0 / 0.0 per judged answer
    compliant_items: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=object))
    fact_error: np.ndarray = field(default_factory=lambda: np.zeros(0))     # L3: 1.0 / 0.0 per fact-checked answer
    fact_error_items: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=object))
    low_confidence: np.ndarray = field(default_factory=lambda: np.zeros(0))  # 1.0 / 0.0 per answer with a similarity
    char_f1: np.ndarray = field(default_factory=lambda: np.zeros(0))        # per answer with a char-bigram F1
    char_f1_items: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=object))
    users: int | None = None                      # an A/B arm's users (None: not an arm)
    error_classes: dict[str, int] = field(default_factory=dict)   # failed requests per error class
    jitter_ms: np.ndarray = field(default_factory=lambda: np.zeros(0))      # per ok request (measure.metrics)
    pulse_hz: np.ndarray = field(default_factory=lambda: np.zeros(0))       # per ok request, 0 = smooth
    # server telemetry of the group's runs, "server.mem_bw_util_pct" -> samples (reports.telemetry)
    telemetry: dict[str, np.ndarray] = field(default_factory=dict)


@dataclass(frozen=True)
class Settings:
    resamples: int = 2000
    seed: int = 0
    confidence: float = 0.95
    alpha: float = 0.05


DEFAULT_SETTINGS = Settings()


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


@dataclass
class Estimate:
    baseline: float | None
    candidate: float | None
    test: str
    n_baseline: int
    n_candidate: int
    deltas: np.ndarray | None = None      # bootstrap replicates of the difference
    p_value: float | None = None          # when the test is not the bootstrap's
    paired: bool = False
    label: str = ""                       # the row's label when it is not the metric's


Measure = Callable[[GroupSample, GroupSample, np.random.Generator, Settings], "Estimate | None"]


@dataclass(frozen=True)
class Metric:
    key: str
    label: str
    unit: str
    better: str
    measure: Measure


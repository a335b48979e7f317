"""Open-loop arrival processes: when the next request is due (pure, seeded).

An open-loop generator sends each request at its *intended* arrival time whatever happened to
the previous ones, so a slow target cannot slow the offered load down (no coordinated omission).
The gaps between arrivals, in seconds, for a rate ``r`` per second:

    constant   1 / r                                               CV 0
    poisson    Exponential(r)                                      CV 1
    gamma      Gamma(shape=b, scale=1 / (r * b)), b = burstiness   CV 1 / sqrt(b)

``burstiness`` follows vLLM's ``bench serve --burstiness``: 1 is Poisson, below 1 burstier
(clumps and long silences), above 1 more regular. ``CV`` is the coefficient of variation of the
gaps (standard deviation / mean). :class:`GapStats` accumulates gaps mergeably, so the CV of the
sends a dispatcher actually made can be checked against the process it drew from.

A trace replay has no process: :func:`trace_share` gives one dispatcher its entries (in turn, by
arrival) and :func:`trace_gaps` the gaps between them; :func:`trace_offered` its report facts.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

PROCESSES = ("constant", "poisson", "gamma")


@dataclass(frozen=True)
class ArrivalProcess:
    kind: str = "poisson"
    rate_rps: float = 1.0
    burstiness: float = 1.0

    def __post_init__(self) -> None:
        if self.kind not in PROCESSES:
            raise ValueError(f"unknown arrival process {self.kind!r}; valid: {', '.join(PROCESSES)}")
        if not self.rate_rps > 0 or math.isinf(self.rate_rps):
            raise ValueError("the arrival rate must be a positive number of requests per second, "
                             f"got {self.rate_rps}")
        if not 0 < self.burstiness < math.inf:
            raise ValueError(f"burstiness must be > 0 (1 = Poisson), got {self.burstiness}")

    @property
    def cv(self) -> float:
        """The coefficient of variation of the gaps this process draws."""
        if self.kind == "constant":
            return 0.0
        if self.kind == "poisson":
            return 1.0
        return 1.0 / math.sqrt(self.burstiness)

    def share(self, parts: int) -> ArrivalProcess:
        """The same process at ``1/parts`` of the rate (one of ``parts`` dispatchers)."""
        return ArrivalProcess(self.kind, self.rate_rps / max(parts, 1), self.burstiness)

    def gaps(self, seed: int = 0) -> Iterator[float]:
        """An endless, seeded sequence of gaps in seconds."""
        rng = random.Random(seed)
        rate = self.rate_rps
        if self.kind == "constant":
            while True:
                yield 1.0 / rate
        elif self.kind == "poisson":
            while True:
                yield rng.expovariate(rate)
        else:
            shape = self.burstiness
            scale = 1.0 / (rate * shape)
            while True:
                yield rng.gammavariate(shape, scale)

    def describe(self) -> str:
        extra = f", burstiness {self.burstiness:g}" if self.kind == "gamma" else ""
        return f"{self.kind} {self.rate_rps:g}/s{extra}"


def arrival_offsets(process: ArrivalProcess, duration_s: float, seed: int = 0) -> list[float]:
    """Intended arrival times (seconds from the start, first gap included) up to ``duration_s``."""
    offsets: list[float] = []
    t = 0.0
    for gap in process.gaps(seed):
        t += gap
        if t > duration_s:
            return offsets
        offsets.append(t)
    return offsets  # pragma: no cover - gaps() never ends


def arrivals_until(gaps: Iterator[float], due_ns: int, stop_ns: int, rate_rps: float,
                   limit: int = 1_000_000) -> int:
    """How many further arrivals of ``gaps`` (after the one due at ``due_ns``) fall at or before
    ``stop_ns`` (a trace's share may end first). Counted one by one up to ``limit``; a dispatcher
    further behind than that gets the rest at ``rate_rps``, so the stop takes bounded time."""
    counted = 0
    for gap_s in gaps:
        due_ns += int(gap_s * 1e9)
        if due_ns > stop_ns:
            break
        counted += 1
        if counted >= limit:
            return counted + int((stop_ns - due_ns) / 1e9 * rate_rps)
    return counted


def trace_share(offsets_s: list[float], parts: int, index: int) -> list[tuple[float, int]]:
    """One dispatcher's part of a trace replay: ``(offset_s, entry index)`` of every ``parts``-th entry
    in arrival order, starting at the ``index``-th (entries 0, D, 2D... for dispatcher 0 of D), each
    at its own time: the D shares together are the whole trace on one schedule."""
    order = sorted(range(len(offsets_s)), key=lambda i: offsets_s[i])
    return [(offsets_s[i], i) for i in order[index % max(parts, 1)::max(parts, 1)]]


def trace_gaps(share: list[tuple[float, int]]) -> Iterator[float]:
    """The gaps of a trace share, the first from the replay's start (0 s); ends with the share."""
    previous = 0.0
    for offset_s, _ in share:
        yield offset_s - previous
        previous = offset_s


def trace_offered(offsets_s: list[float], speed: float) -> dict[str, Any]:
    """The open-loop report's configured facts of a trace replay: the offered rate is the entries
    over the trace's span (at ``speed``)."""
    span_s = max(offsets_s, default=0.0)
    return {"process": "trace", "offered_rps": len(offsets_s) / span_s if span_s > 0 else None,
            "trace_entries": len(offsets_s), "trace_span_s": round(span_s, 3), "trace_speed": speed}


def dispatcher_seed(seed: int, index: int) -> int:
    """Each dispatcher of a distributed run draws its own stream (worker ``index``)."""
    return seed * 1_000_003 + index


@dataclass
class GapStats:
    """Count, sum and sum of squares of gaps (seconds): mean and CV, exactly mergeable."""

    n: int = 0
    total: float = 0.0
    total_sq: float = 0.0

    def add(self, gap_s: float) -> None:
        self.n += 1
        self.total += gap_s
        self.total_sq += gap_s * gap_s

    def add_all(self, gaps: Iterable[float]) -> None:
        for gap in gaps:
            self.add(gap)

    def merge(self, other: GapStats) -> None:
        self.n += other.n
        self.total += other.total
        self.total_sq += other.total_sq

    @property
    def mean(self) -> float | None:
        return self.total / self.n if self.n else None

    @property
    def cv(self) -> float | None:
        """Sample standard deviation / mean (None below two gaps)."""
        if self.n < 2 or self.total <= 0:
            return None
        mean = self.total / self.n
        variance = max(0.0, (self.total_sq - self.n * mean * mean) / (self.n - 1))
        return math.sqrt(variance) / mean

    def to_wire(self) -> list[float]:
        return [self.n, self.total, self.total_sq]

    @classmethod
    def from_wire(cls, data: list[float]) -> GapStats:
        n, total, total_sq = data
        return cls(int(n), float(total), float(total_sq))


def gaps_of(times: Iterable[float]) -> list[float]:
    """Gaps between consecutive times (sorted first)."""
    ordered = sorted(times)
    return [b - a for a, b in zip(ordered, ordered[1:])]


__all__ = ["PROCESSES", "ArrivalProcess", "GapStats", "arrival_offsets", "dispatcher_seed", "gaps_of",
           "trace_gaps", "trace_offered", "trace_share"]

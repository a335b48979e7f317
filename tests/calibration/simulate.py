"""Simulated runs with a known between-run and within-run variance, for calibrating the verdicts.

A *version* (:class:`Version`) is a distribution of runs. Each run draws its own shift of the
log-latencies (``between_cv``: the ordinary difference between two runs of one version: request
mix, machine state, neighbours), then its requests in start order, whose log-latencies follow an
AR(1) process (``coupling``: a queue couples neighbouring requests) around that shift. Errors come
in bursts (a request fails with ``error_rate``, more often next to a failed one). Each answer has
a similarity to its reference: the item's own level plus noise.

:func:`simulate_run` returns the :class:`GroupSample` that :mod:`fourfold.reports.load` builds
from a run directory (sorted arrays with their blocks, counts per block, the 1-s token series), so
:func:`compare_versions` runs the comparison exactly as ``fourfold compare`` does.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from fourfold.reports.compare import CompareSettings, GroupSample, Row, adjust, compare_groups
from fourfold.reports.replication import block_ids
from fourfold.reports.verdict import BETTER, WORSE

ITEMS = 60
# matched pairs: the share of the between-run variance both runs of a pair have in common
PAIR_SHARE = 0.95


@dataclass(frozen=True)
class Version:
    ttft_ms: float = 80.0         # median TTFT
    tpot_ms: float = 12.0         # median time per output token
    tokens: int = 64              # output tokens per answer
    error_rate: float = 0.01
    between_cv: float = 0.03      # sd of a run's log-shift (3 %: two runs differ by ~4 %)
    within_sd: float = 0.25       # sd of one request's log-latency
    coupling: float = 0.8         # AR(1) correlation of neighbouring requests
    in_flight: int = 8            # users (closed loop)
    requests: int = 600           # per run
    similarity: float = 0.0       # shift of every answer's similarity

    def slower(self, factor: float) -> Version:
        return dataclasses.replace(self, ttft_ms=self.ttft_ms * factor)


# two regimes of noise: NOISY (the default: two runs of one version differ by ~4 % in TTFT p50) and
# QUIET (a dedicated, steady server: ~1.5 %)
NOISY = Version()
QUIET = Version(between_cv=0.01, within_sd=0.15, coupling=0.5)
# DRIFTING: runs differ mostly by what a pair shares (its requests' mix, the machine's state):
# ~7 % between runs
DRIFTING = Version(between_cv=0.05, within_sd=0.15, coupling=0.5)


def _ar1(n: int, rho: float, rng: np.random.Generator) -> np.ndarray:
    noise = rng.standard_normal(n)
    out = np.empty(n)
    out[0] = noise[0]
    scale = math.sqrt(1 - rho * rho)
    for i in range(1, n):
        out[i] = rho * out[i - 1] + scale * noise[i]
    return out


def simulate_run(v: Version, rng: np.random.Generator, item_levels: np.ndarray,
                 shared_shift: float | None = None) -> GroupSample:
    """One run; ``shared_shift``: the part of its shift it shares with its pair (the same requests, run
    back to back), the rest drawn for this run alone."""
    n = v.requests
    shift = (rng.normal(0.0, v.between_cv) if shared_shift is None
             else shared_shift + rng.normal(0.0, v.between_cv * math.sqrt(1 - PAIR_SHARE)))
    ttft = v.ttft_ms * np.exp(shift + v.within_sd * _ar1(n, v.coupling, rng))
    tpot = v.tpot_ms * np.exp(shift + 0.5 * v.within_sd * _ar1(n, v.coupling, rng))
    e2e = ttft + (v.tokens - 1) * tpot
    # closed loop: each user starts its next request when the last one ends
    user_clock = np.zeros(v.in_flight)
    started = np.empty(n)
    for i in range(n):
        u = int(np.argmin(user_clock))
        started[i] = user_clock[u]
        user_clock[u] += e2e[i] / 1000
    failed = np.zeros(n, dtype=bool)
    for i in range(n):
        p = v.error_rate * (5 if i and failed[i - 1] else 1)
        failed[i] = rng.random() < p
    ok = ~failed
    blocks = block_ids(started, e2e)
    g = GroupSample(requests=n, ok=int(ok.sum()), failures=int(failed.sum()), conn_known=n, conn_reused=n)
    for name, values in (("ttft_ms", ttft[ok]), ("e2e_ms", e2e[ok]), ("tpot_ms", tpot[ok])):
        order = np.argsort(values, kind="stable")
        setattr(g, name, values[order])
        g.blocks_of[name] = blocks[ok][order]
    size = int(blocks.max()) + 1
    for name, flags in (("requests", np.ones(n, bool)), ("ok", ok), ("failures", failed),
                        ("interrupted", np.zeros(n, bool)), ("requests_with_stall", np.zeros(n, bool)),
                        ("conn_known", np.ones(n, bool)), ("conn_reused", np.ones(n, bool))):
        g.block_counts[name] = np.bincount(blocks, weights=flags.astype(float), minlength=size)
    ends = started + e2e / 1000
    g.wall_s = float(ends.max() - started.min())
    g.output_tokens_total = float(v.tokens * ok.sum())
    seconds = max(1, math.ceil(g.wall_s))
    g.tokens_per_s = np.bincount(np.clip(np.floor(ends[ok]).astype(int), 0, seconds - 1),
                                 minlength=seconds) * float(v.tokens)
    items = rng.integers(0, ITEMS, size=int(ok.sum()))
    g.similarity = np.clip(item_levels[items] + v.similarity + rng.normal(0, 0.05, items.size), -1, 1)
    g.similarity_items = np.array([f"item-{i:03d}" for i in items], dtype=object)
    return g


def compare_versions(baseline: Version, candidate: Version, runs: int, rng: np.random.Generator,
                     settings: CompareSettings, *, runs_candidate: int | None = None,
                     matched: bool = False) -> list[Row]:
    """One comparison, as fourfold compare makes it: ``runs`` simulated runs a side, the rows adjusted;
    ``matched``: run in pairs that share most of their shift (fourfold repeat's seed-matched ABBA pairs),
    compared pair by pair."""
    item_levels = rng.uniform(0.6, 0.9, ITEMS)     # the dataset: the same items on both sides
    if matched:
        shared = [rng.normal(0.0, baseline.between_cv * np.sqrt(PAIR_SHARE)) for _ in range(runs)]
        base = [simulate_run(baseline, rng, item_levels, shift) for shift in shared]
        cand = [simulate_run(candidate, rng, item_levels, shift) for shift in shared]
        return adjust(compare_groups("l1:sim", base, cand, settings, matched=True), settings.alpha)
    base = [simulate_run(baseline, rng, item_levels) for _ in range(runs)]
    cand = [simulate_run(candidate, rng, item_levels) for _ in range(runs_candidate or runs)]
    return adjust(compare_groups("l1:sim", base, cand, settings), settings.alpha)


def decided(rows: list[Row], gated_only: bool = True) -> list[Row]:
    """The rows with a better / worse verdict (the gate's: gated rows only)."""
    return [r for r in rows if r.verdict in (BETTER, WORSE) and (r.gated or not gated_only)]

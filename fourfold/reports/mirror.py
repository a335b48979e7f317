"""Mirrored pairs of one run: the same request to the primary and to the mirror (gray release).

Every pair (same ``pair_id``: the original and its ``variant == "mirror"`` copy, sent at the same
moment) gives paired differences, so load and timing noise cancel out:

- TTFT and E2E: mean of mirror − primary per pair, with a seeded bootstrap 95 % interval;
- output token lengths: the two distributions compared with a two-sample Kolmogorov–Smirnov
  test (asymptotic p-value);
- error classes: the share of each class on either side;
- answer similarity: cosine of the two answers' embeddings (when an embedder is given).

Pure over records; the embedder is passed in (``fingerprint``), so reports never load a model
themselves.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fourfold.measure.histogram import exact_quantile
from fourfold.measure.record import RequestRecord


@dataclass
class MirroredPair:
    metric: str
    n: int
    primary_mean: float | None
    mirror_mean: float | None
    delta_mean: float | None
    ci_low: float | None
    ci_high: float | None


@dataclass
class MirrorReport:
    pairs: int
    unpaired: int
    paired: list[MirroredPair] = field(default_factory=list)
    ks_statistic: float | None = None
    ks_p_value: float | None = None
    primary_tokens_mean: float | None = None
    mirror_tokens_mean: float | None = None
    error_shares: dict[str, tuple[float, float]] = field(default_factory=dict)
    similarity_mean: float | None = None
    similarity_p5: float | None = None


def pair_records(records: Iterable[RequestRecord]) -> tuple[list[tuple[RequestRecord, RequestRecord]], int]:
    """(primary, mirror) pairs by pair_id, and how many records with a pair_id found no partner."""
    by_pair: dict[str, dict[str, RequestRecord]] = {}
    for record in records:
        if record.pair_id and not record.warmup:
            side = "mirror" if record.variant == "mirror" else "primary"
            by_pair.setdefault(record.pair_id, {})[side] = record
    pairs = [(sides["primary"], sides["mirror"]) for sides in by_pair.values() if len(sides) == 2]
    unpaired = sum(len(sides) for sides in by_pair.values() if len(sides) != 2)
    return pairs, unpaired


def bootstrap_mean_ci(values: np.ndarray, resamples: int = 2000, seed: int = 0,
                      confidence: float = 0.95) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    means = rng.choice(values, size=(resamples, len(values)), replace=True).mean(axis=1)
    tail = (1 - confidence) / 2 * 100
    return float(np.percentile(means, tail)), float(np.percentile(means, 100 - tail))


def ks_two_sample(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """Two-sample Kolmogorov–Smirnov statistic and its asymptotic p-value."""
    a, b = np.sort(a), np.sort(b)
    grid = np.concatenate([a, b])
    cdf_a = np.searchsorted(a, grid, side="right") / len(a)
    cdf_b = np.searchsorted(b, grid, side="right") / len(b)
    d = float(np.max(np.abs(cdf_a - cdf_b)))
    en = math.sqrt(len(a) * len(b) / (len(a) + len(b)))
    lam = (en + 0.12 + 0.11 / en) * d
    return round(d, 4), round(_kolmogorov_q(lam), 4)


def _kolmogorov_q(lam: float) -> float:
    """Q_KS(λ) = 2 Σ (-1)^(k-1) exp(-2 k² λ²); 1 where the series does not converge (λ small)."""
    total, sign, previous = 0.0, 2.0, 0.0
    for k in range(1, 101):
        term = sign * math.exp(-2 * k * k * lam * lam)
        total += term
        if abs(term) <= 1e-3 * abs(previous) or abs(term) <= 1e-8 * total:
            return min(max(total, 0.0), 1.0)
        sign, previous = -sign, term
    return 1.0


def _usable(record: RequestRecord) -> bool:
    return record.ok and record.error_class != "cancelled"


def _paired(metric: str, pairs: list[tuple[RequestRecord, RequestRecord]], seed: int) -> MirroredPair:
    both = [(getattr(p, metric), getattr(m, metric)) for p, m in pairs
            if _usable(p) and _usable(m)
            and getattr(p, metric) is not None and getattr(m, metric) is not None]
    if not both:
        return MirroredPair(metric, 0, None, None, None, None, None)
    primary = np.array([x for x, _ in both], dtype=float)
    mirror = np.array([y for _, y in both], dtype=float)
    delta = mirror - primary
    low, high = bootstrap_mean_ci(delta, seed=seed) if len(delta) > 1 else (float(delta[0]), float(delta[0]))
    return MirroredPair(metric, len(both), round(float(primary.mean()), 2), round(float(mirror.mean()), 2),
                  round(float(delta.mean()), 2), round(low, 2), round(high, 2))


def compare_mirror(records: Iterable[RequestRecord], embed: Any = None, seed: int = 0) -> MirrorReport:
    """The paired comparison; ``embed(texts) -> unit vectors`` adds answer similarity."""
    pairs, unpaired = pair_records(records)
    report = MirrorReport(pairs=len(pairs), unpaired=unpaired)
    if not pairs:
        return report
    report.paired = [_paired("ttft_ms", pairs, seed), _paired("e2e_ms", pairs, seed)]
    ok_pairs = [(p, m) for p, m in pairs if _usable(p) and _usable(m)]
    if len(ok_pairs) >= 2:
        a = np.array([p.output_tokens for p, _ in ok_pairs], dtype=float)
        b = np.array([m.output_tokens for _, m in ok_pairs], dtype=float)
        report.ks_statistic, report.ks_p_value = ks_two_sample(a, b)
        report.primary_tokens_mean, report.mirror_tokens_mean = (round(float(a.mean()), 2),
                                                                 round(float(b.mean()), 2))
    primary_classes = Counter(p.error_class for p, _ in pairs)
    mirror_classes = Counter(m.error_class for _, m in pairs)
    n = len(pairs)
    report.error_shares = {cls: (round(primary_classes[cls] / n, 4), round(mirror_classes[cls] / n, 4))
                           for cls in sorted(set(primary_classes) | set(mirror_classes))}
    texts = [(p.text, m.text) for p, m in ok_pairs if p.text and m.text]
    if embed is not None and texts:
        vectors_a = np.asarray(embed([a for a, _ in texts]))
        vectors_b = np.asarray(embed([b for _, b in texts]))
        similarity = np.sum(vectors_a * vectors_b, axis=1)
        report.similarity_mean = round(float(similarity.mean()), 4)
        report.similarity_p5 = round(exact_quantile(np.sort(similarity), 0.05), 4)
    return report


def _fmt(value: float | None) -> str:
    return "–" if value is None else f"{value:g}"


def format_markdown(report: MirrorReport) -> str:
    lines = ["## Mirrored pairs (primary vs mirror, same request at the same moment)", "",
             f"{report.pairs} pairs; {report.unpaired} records without their partner.", ""]
    if not report.pairs:
        return "\n".join(lines)
    lines += ["| metric | pairs | primary mean | mirror mean | Δ mean (mirror − primary) | 95% CI of Δ |",
              "|---|---|---|---|---|---|"]
    for row in report.paired:
        lines.append(f"| {row.metric} | {row.n} | {_fmt(row.primary_mean)} | {_fmt(row.mirror_mean)} | "
                     f"{_fmt(row.delta_mean)} | [{_fmt(row.ci_low)}, {_fmt(row.ci_high)}] |")
    lines += ["", f"Output tokens: primary mean {_fmt(report.primary_tokens_mean)}, mirror mean "
              f"{_fmt(report.mirror_tokens_mean)}; two-sample KS D = {_fmt(report.ks_statistic)}, "
              f"p = {_fmt(report.ks_p_value)}.", "", "| error class | primary share | mirror share |",
              "|---|---|---|"]
    for cls, (a, b) in report.error_shares.items():
        lines.append(f"| {cls} | {a:.2%} | {b:.2%} |")
    if report.similarity_mean is not None:
        lines += ["", f"Answer similarity (cosine of MiniLM embeddings, primary vs mirror): mean "
                  f"{report.similarity_mean:g}, p5 {report.similarity_p5:g}."]
    return "\n".join(lines) + "\n"

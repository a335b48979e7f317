"""The report's request-phase rows (L2 groups): a new connection's name lookup, TCP connect and TLS
handshake, the request written and the wait for the response head (:data:`fourfold.measure.metrics.PHASES`,
measured by the transport: :meth:`fourfold.client.transport.ConnFacts.phases`), each a nearest-rank
quantile with the within-run block bootstrap of every latency row. The lookup, connect and handshake
rows are of the requests that opened a connection; send and wait of every request that was sent."""

from __future__ import annotations

import numpy as np
import pandas as pd

from fourfold.measure.metrics import PHASES
from fourfold.reports.estimators import quantile_of
from fourfold.reports.replication import sorted_with_blocks
from fourfold.reports.rows import GroupSample, Metric

__all__ = ["PHASE_LEVELS", "PHASE_METRICS", "PHASE_ROWS", "add_phases", "phase_means"]

PHASE_LEVELS = ("l2",)        # the groups that show them: the gateway level (every level records them)
_LABELS = {"dns_ms": "DNS lookup", "tcp_ms": "TCP connect", "tls_ms": "TLS handshake",
           "send_ms": "request written", "wait_ms": "waiting for the response head"}

PHASE_METRICS = (
    *(Metric(f"{name.removesuffix('_ms')}_p95", f"{_LABELS[name]} p95", "ms", "lower",
             quantile_of(name, 0.95)) for name in ("dns_ms", "tcp_ms", "tls_ms", "send_ms")),
    Metric("wait_p50", f"{_LABELS['wait_ms']} p50", "ms", "lower", quantile_of("wait_ms", 0.5)),
    Metric("wait_p95", f"{_LABELS['wait_ms']} p95", "ms", "lower", quantile_of("wait_ms", 0.95)),
)
PHASE_ROWS = tuple(metric.key for metric in PHASE_METRICS)


def add_phases(sample: GroupSample, frame: pd.DataFrame, blocks: np.ndarray) -> None:
    """The group's phase arrays (sorted, with their blocks), where its level shows them."""
    if frame.empty or str(frame["level"].iloc[0]) not in PHASE_LEVELS:
        return
    for name in PHASES:
        if name in frame:
            values, sample.blocks_of[name] = sorted_with_blocks(frame[name].to_numpy(dtype=float), blocks)
            setattr(sample, name, values)
    sample.phase_means = phase_means(frame)


def phase_means(frame: pd.DataFrame) -> dict[str, dict[str, float]]:
    """``{"new": {"dns_ms": mean, ...}, "reused": {...}}`` over the requests with each phase (the HTML
    report's stacked bars)."""
    out: dict[str, dict[str, float]] = {}
    reused = frame["conn_reused"].to_numpy(dtype=float)
    for kind, mask in (("new", reused == 0), ("reused", reused == 1)):
        means = {}
        for name in PHASES:
            if name in frame:
                values = frame[name].to_numpy(dtype=float)[mask]
                values = values[np.isfinite(values)]
                if values.size:
                    means[name] = float(values.mean())
        if means:
            out[kind] = means
    return out

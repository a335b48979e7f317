"""What the history keeps of a run: its facts, and per group every report row's value with what a
verdict needs, so a later run is tested against it without the records.

A run directory is read as ``fourfold compare`` reads it (:func:`fourfold.reports.load.load_run`),
and each of its groups (``level:scenario``; an L4 A/B run's variants apart, ``level:scenario@A``)
goes through the comparison's own statistics (:data:`fourfold.reports.compare.METRICS`, the error
classes, the server telemetry): per row, the run's value, the variance of its within-run block
bootstrap and the number of blocks behind it, ``n``, and why the value is not fit for a test
(``too_few``). That is what :func:`fourfold.reports.replication.combine` takes of a run, so
``fourfold history check`` builds its sides exactly as ``fourfold compare`` builds a side of several
runs. Beside them, the log-bucket histograms (0.5 %) of TTFT, TTFO, E2E, TPOT and ITL, for any
quantile the rows do not hold. The paired per-item rows (similarity, recall...) keep their
unpaired form: releases may answer different items.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from fourfold.measure.histogram import ZERO_KEY, LogHistogram, bucket_values
from fourfold.reports import bootstrap as bs
from fourfold.reports.compare import (
    DEFAULT_SETTINGS,
    METRICS,
    CompareSettings,
    GroupSample,
    Metric,
    error_class_metrics,
    group_flags,
    telemetry_metrics,
)
from fourfold.reports.load import RunData, group_samples, load_run, run_variants

__all__ = ["HISTOGRAMS", "Entry", "build_entry", "entry_of_samples", "figure_of", "histogram_of",
           "run_facts"]

# per-request arrays kept as histograms: the name in a metric key (ttft_p90) -> the GroupSample array
HISTOGRAMS = {"ttft": "ttft_ms", "ttfo": "ttfo_ms", "e2e": "e2e_ms", "tpot": "tpot_ms", "itl": "itl"}


@dataclass
class Entry:
    """A run as the history keeps it (the columns of :mod:`fourfold.history.store`)."""

    run: dict[str, Any]
    groups: dict[str, dict[str, Any]] = field(default_factory=dict)
    figures: list[dict[str, Any]] = field(default_factory=list)
    histograms: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)


def _machine(meta: dict[str, Any]) -> str | None:
    client = meta.get("client")
    if not isinstance(client, dict):
        return None
    cpu = ", ".join(str(x) for x in (client.get("cpu_model"), client.get("cpu_count") and
                                     f"{client['cpu_count']} CPUs") if x)
    return f"{client.get('hostname', '?')} ({cpu})" if cpu else str(client.get("hostname", "?"))


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def run_facts(run: RunData, release: str, tags: dict[str, str]) -> dict[str, Any]:
    meta = run.meta
    versions: dict[str, Any] = meta["versions"] if isinstance(meta.get("versions"), dict) else {}
    return {"release": release, "run_id": _text(meta.get("run_id")) or run.path.resolve().name,
            "run_path": str(run.path.resolve()),
            "added_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "started_at": _text(meta.get("started_at")), "level": _text(meta.get("level")) or "?",
            "fourfold_version": _text(versions.get("fourfold")),
            "dataset_hash": _text(meta.get("dataset_sha256")), "target": _text(meta.get("target")),
            "model": _text(meta.get("model")), "machine": _machine(meta), "tags": dict(tags), "meta": meta,
            "summary": run.summary or {}}


def figure_of(group: str, metric: Metric, sample: GroupSample,
              settings: CompareSettings) -> dict[str, Any] | None:
    """One row's figures of one run (None: the run has no data for it), with the rng ``fourfold compare``
    gives the row."""
    spread = metric.side(sample, bs.row_rng(settings.seed, group, metric.key), settings)
    if spread is None:
        return None
    value = spread.value
    return {"grp": group, "metric": metric.key, "label": metric.label, "unit": metric.unit,
            "better": metric.better, "descriptive": int(metric.descriptive),
            "value": value if value is not None and math.isfinite(value) else None, "n": int(spread.n),
            "within_var": spread.within_var, "blocks": int(spread.blocks), "too_few": spread.too_few,
            "no_interval": spread.no_interval}


def histogram_of(sample: GroupSample, array: str) -> dict[str, Any] | None:
    """The wire form of a per-request array's log-bucket histogram (ITL: its pooled gaps' buckets)."""
    if array == "itl":
        itl = sample.itl
        if itl is None or not itl.count:
            return None
        zero = itl.keys == ZERO_KEY
        return {"a": LogHistogram().alpha, "n": itl.count, "z": int(itl.counts[zero].sum()),
                "s": float((bucket_values(itl.keys[~zero]) * itl.counts[~zero]).sum()),   # from the buckets
                "b": {str(k): int(c) for k, c in zip(itl.keys[~zero].tolist(), itl.counts[~zero].tolist(),
                                                     strict=True)},
                "lo": itl.min, "hi": itl.max}
    values = np.asarray(getattr(sample, array), dtype=np.float64)
    if not values.size:
        return None
    hist = LogHistogram()
    hist.add_all(values)
    return hist.to_wire()


def _groups(run: RunData) -> dict[str, GroupSample]:
    variants = run_variants(run)
    if not variants:
        return group_samples([run])
    out = {}
    for variant in variants:
        out.update({f"{name}@{variant}": g for name, g in group_samples([run], variant=variant).items()})
    return out


def build_entry(path: str | os.PathLike[str], release: str, tags: dict[str, str] | None = None,
                settings: CompareSettings = DEFAULT_SETTINGS) -> Entry:
    """Read a run directory and reduce it to what the history keeps (module docstring)."""
    run = load_run(Path(path))
    return entry_of_samples(run_facts(run, release, tags or {}), _groups(run), settings)


def entry_of_samples(facts: dict[str, Any], samples: dict[str, GroupSample],
                     settings: CompareSettings = DEFAULT_SETTINGS) -> Entry:
    """The entry of a run's facts and its groups' samples (as :func:`fourfold.reports.load.group_samples`
    builds them)."""
    entry = Entry(facts)
    for name, sample in samples.items():
        flags = group_flags((sample,))
        entry.groups[name] = {"flags": flags, "requests": sample.requests}
        metrics = (*METRICS, *error_class_metrics([sample], []), *telemetry_metrics([sample], []))
        for metric in metrics:          # every row with data: which are shown depends on the other side
            figure = figure_of(name, metric, sample, settings)
            if figure is not None:
                entry.figures.append(figure)
        for key, array in HISTOGRAMS.items():
            wire = histogram_of(sample, array)
            if wire is not None:
                entry.histograms.append((name, key, wire))
    return entry

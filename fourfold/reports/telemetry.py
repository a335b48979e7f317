"""Server telemetry of a run (``server_metrics.json``, written by L1's sampler) as per-metric series.

The file is a list of samples, one per ``--sample-interval``: ``{"t_s": unix seconds,
"server.mem_bw_util_pct": 88.0, "nvidia_smi.gpu_util_pct": 97.0, ...}`` (``server.`` from
``--metrics-url``, ``nvidia_smi.`` from the local nvidia-smi; :mod:`fourfold.measure.prom` names
the canonical metrics). It is read beside the compare cache, never through it: a small file, read
whole on every load, so the cache cannot hold a stale copy.

A run without the file, or with one that is damaged (a warning says which), has no telemetry.
Every group of a run gets the run's series (the server is shared by all its groups); a side of
several runs joins their series in the order given.
"""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import numpy as np

__all__ = ["SERVER_METRICS_FILE", "SOURCES", "better_of", "gauge_names", "join", "label_of", "read_telemetry",
           "unit_of"]

SERVER_METRICS_FILE = "server_metrics.json"
SOURCES = ("server", "nvidia_smi")          # the report's order: the target's /metrics, then nvidia-smi
NOT_GAUGES = ("gpus",)                      # how many GPUs nvidia-smi saw: a count, not a reading


def read_telemetry(run_dir: Path) -> dict[str, np.ndarray]:
    """``"server.mem_bw_util_pct"`` -> its samples in time order (finite numbers only)."""
    path = Path(run_dir) / SERVER_METRICS_FILE
    if not path.is_file():
        return {}
    try:
        rows = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as exc:
        warnings.warn(f"{path}: not readable JSON ({exc}); the run's telemetry is left out", RuntimeWarning,
                      stacklevel=2)
        return {}
    if not isinstance(rows, list):
        warnings.warn(f"{path}: expected a list of samples; the run's telemetry is left out", RuntimeWarning,
                      stacklevel=2)
        return {}
    rows = [r for r in rows if isinstance(r, dict)]
    rows.sort(key=lambda r: r.get("t_s") if isinstance(r.get("t_s"), (int, float)) else 0.0)
    series: dict[str, list[float]] = {}
    for row in rows:
        for name, value in row.items():
            if (name != "t_s" and isinstance(value, (int, float)) and not isinstance(value, bool)
                    and math.isfinite(value)):
                series.setdefault(str(name), []).append(float(value))
    return {name: np.asarray(values, dtype=float) for name, values in series.items()}


def join(runs: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """One side's series over several runs, each run's samples in turn."""
    names = {name for series in runs for name in series}
    return {name: np.concatenate([s[name] for s in runs if name in s]) for name in sorted(names)}


def gauge_names(*sides: dict[str, np.ndarray]) -> list[str]:
    """The series the report shows: gauges only (a ``*_total`` counter's level says nothing about
    the run; its rate is summary.json's ``rate_per_s``), ``server.`` ones before ``nvidia_smi.``."""
    names = {n for side in sides for n in side
             if not n.endswith("_total") and n.rpartition(".")[2] not in NOT_GAUGES}

    def order(name: str) -> tuple[int, str]:
        source = name.partition(".")[0]
        return (SOURCES.index(source) if source in SOURCES else len(SOURCES), name)
    return sorted(names, key=order)


_WORDS = {"mem_bw_util_pct": "memory-bandwidth util", "gpu_util_pct": "GPU util",
          "kv_cache_usage_pct": "KV-cache usage", "running": "requests running",
          "waiting": "requests waiting", "gpu_mem_used_mib": "GPU memory used",
          "gpu_mem_total_mib": "GPU memory total", "power_w": "GPU power"}
_SOURCE_WORDS = {"server": "server", "nvidia_smi": "nvidia-smi"}


def label_of(name: str, stat: str) -> str:
    """``"server.mem_bw_util_pct", "mean"`` -> ``"server: memory-bandwidth util mean"``."""
    source, _, canonical = name.partition(".")
    return f"{_SOURCE_WORDS.get(source, source)}: {_WORDS.get(canonical, canonical)} {stat}"


def unit_of(name: str) -> str:
    canonical = name.partition(".")[2]
    return "%" if canonical.endswith("_pct") else "MiB" if canonical.endswith("_mib") else \
        "W" if canonical.endswith("_w") else "requests" if canonical in ("running", "waiting") else ""


def better_of(name: str) -> str:
    """The direction a verdict reads: descriptive only (the server's load, not a quality of the
    answer). Higher for utilisation and the rest (the article reads more memory bandwidth used as
    better use of the GPU), lower for requests waiting and KV-cache usage (headroom before the engine
    has to preempt or evict)."""
    return "lower" if name.endswith((".waiting", ".kv_cache_usage_pct", ".power_w")) else "higher"

"""What a run's meta.json says about what it sent and where it ran, beyond its options.

Two sides of a comparison are only comparable when they sent the same workload from similar
machines (``fourfold.reports.comparability`` reads these facts back):

- :func:`items_sha256`: a content hash of the items a run sends, after loading, filtering and
  sampling. Each item is written in one canonical form (fourfold's own JSONL line,
  :meth:`~fourfold.workloads.items.Item.to_dict`, keys sorted, no spaces) and the lines are sorted
  before they are hashed, so the hash is that of the *set* of items (duplicates counted): the
  same file read twice, or a dataset sent in another order (``--shuffle``, another ``--seed``),
  gives the same hash; another file, another ``--dataset-filter`` or a ``--dataset-sample`` of
  other items gives another. ``--max-tokens`` and the other per-run knobs are options, not items:
  meta.json's ``settings`` holds them.
- :func:`dataset_facts`: meta.json's ``dataset_name``, ``dataset_items``, ``dataset_sha256`` and
  ``dataset_cache_hit_share`` (the prefix-cache share the items were built for,
  :mod:`fourfold.workloads.cacheplan`; null for most datasets).
- :func:`client_facts`: meta.json's ``client`` block (hostname, platform, CPU model and count,
  Python version) of the machine that writes the run directory (a distributed run's master).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import socket
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from fourfold.workloads.cacheplan import planned_cache_hit_share
from fourfold.workloads.items import Item

CPUINFO = Path("/proc/cpuinfo")


def canonical_line(item: Item) -> str:
    """``item`` as one canonical JSON line: its fourfold JSONL form, keys sorted, no spaces."""
    return json.dumps(item.to_dict(), sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


def items_sha256(items: Iterable[Item]) -> str:
    """The sha256 (hex) of the set of ``items``, whatever their order (module docstring)."""
    digest = hashlib.sha256()
    for line in sorted(canonical_line(item) for item in items):
        digest.update(line.encode("utf-8"))
        digest.update(b"\n")
    return digest.hexdigest()


def dataset_facts(sources: Mapping[str, Sequence[Item]]) -> dict[str, Any]:
    """meta.json's dataset facts for the items of each source a run sends (name -> items): the
    names joined with `` + ``, the number of items, the hash of them all (:func:`items_sha256`) and the
    prefix-cache share they were built for (None: none planned)."""
    everything = [item for items in sources.values() for item in items]
    return {"dataset_name": " + ".join(sources), "dataset_items": len(everything),
            "dataset_sha256": items_sha256(everything),
            "dataset_cache_hit_share": planned_cache_hit_share(everything)}


def cpu_model(cpuinfo: Path = CPUINFO) -> str:
    """The CPU's model name (Linux: /proc/cpuinfo), else what :func:`platform.processor` says."""
    try:
        for line in cpuinfo.read_text(encoding="utf-8", errors="replace").splitlines():
            key, sep, value = line.partition(":")
            if sep and key.strip() in ("model name", "Model", "cpu model", "Processor"):
                return " ".join(value.split())
    except OSError:
        pass
    return platform.processor() or platform.machine()


def client_facts() -> dict[str, Any]:
    """meta.json's ``client`` block: the load generator's machine."""
    return {"hostname": socket.gethostname(), "platform": platform.platform(), "machine": platform.machine(),
            "cpu_model": cpu_model(), "cpu_count": os.cpu_count(), "python": platform.python_version()}


__all__ = ["canonical_line", "client_facts", "cpu_model", "dataset_facts", "items_sha256"]

"""Per-tenant and per-model figures of a ``--mix`` run, and fairness between tenants (pure).

:class:`MixStats` keeps one :class:`~fourfold.measure.stats.GroupStats` per tenant (``record.tenant``,
the entry's alias), fed every measured record the run directory takes (on a master: every worker's,
so it needs no shipping of its own), with the same stall threshold and SLO as ``LLMStats``: each
figure is the same formula as the run's own rows. :func:`mix_block` turns them into summary.json's
``mix`` block:

- ``tenants``: per entry its ``weight`` (the asked share), ``requests`` and ``share`` (of all the
  mix's measured requests), ``ok``, ``good`` (ok and meeting the SLO; every ok request without an
  SLO), ``goodput_rps``, ``goodput_share`` (of all good requests), ``rate_limited`` (429 answers),
  ``error_rate``, ``output_tps``, TTFT and E2E p50/p95/p99 (ms, ok requests), ``retry_after``: the
  throttled answers (429, 503) that named a ``Retry-After``, and ``retry_after_s``: the seconds they
  asked for (a closed-loop L2 user waits them before its next request with ``--honour-retry-after``);
- ``models``: the same per model (an entry without a model sends ``--model``), tenants of one model
  merged;
- ``fairness``: Jain's index over the tenants of ``x_i = goodput_share_i / weight_i``,
  ``(sum x)^2 / (n * sum x^2)``: 1 when each tenant's goodput is in proportion to its weight, towards
  1/n as one tenant takes it all. Descriptive: no test stands behind it.
"""

from __future__ import annotations

from typing import Any

from fourfold.measure.record import RequestRecord
from fourfold.measure.stats import GroupStats, LLMStats

__all__ = ["ROW_FIELDS", "MixStats", "jain_index", "mix_block"]

# the figures of a tenant's or model's row, as GroupStats.summary names them
ROW_FIELDS = ("requests", "ok", "failures", "good", "goodput_rps", "request_rps", "output_tps", "error_rate")
_PERCENTILES = ("p50", "p95", "p99")


def jain_index(values: list[float]) -> float | None:
    """Jain's fairness index ``(sum x)^2 / (n * sum x^2)``: 1 when all are equal, 1/n when one takes
    everything; None for no values or all zero."""
    squares = sum(v * v for v in values)
    if not values or squares <= 0:
        return None
    return sum(values) ** 2 / (len(values) * squares)


class MixStats:
    """GroupStats per tenant, over the measured records (warm-up and cancelled ones left out)."""

    def __init__(self, stall_threshold_ms: float, slo_ms: dict[str, float]) -> None:
        self.stall_threshold_ms = stall_threshold_ms
        self.slo_ms = dict(slo_ms)
        self.tenants: dict[str, GroupStats] = {}
        self.retry_after: dict[str, list[float]] = {}     # per tenant: [answers, seconds asked]

    @classmethod
    def like(cls, stats: LLMStats) -> MixStats:
        """Counted as ``stats`` counts (its stall threshold and SLO)."""
        return cls(stats.stall_threshold_ms, stats.slo_ms)

    def add(self, record: RequestRecord) -> None:
        if record.warmup or record.error_class == "cancelled" or not record.tenant:
            return
        group = self.tenants.get(record.tenant)
        if group is None:
            group = self.tenants[record.tenant] = GroupStats()
        group.add(record, self.stall_threshold_ms, self.slo_ms)
        asked = record.extra.get("retry_after_s")
        if asked is not None and record.status in (429, 503):
            facts = self.retry_after.setdefault(record.tenant, [0, 0.0])
            facts[0] += 1
            facts[1] += max(float(asked), 0.0)


def _row(group: GroupStats) -> dict[str, Any]:
    summary = group.summary("", "")
    row: dict[str, Any] = {name: summary[name] for name in ROW_FIELDS}
    row["rate_limited"] = group.statuses.get(429, 0)
    for metric in ("ttft_ms", "e2e_ms"):
        row[metric] = {label: summary[metric][label] for label in _PERCENTILES}
    return row


def mix_block(stats: MixStats, weights: dict[str, float], models: dict[str, str],
              sticky: str) -> dict[str, Any]:
    """summary.json's ``mix`` block (module docstring); ``weights`` and ``models`` per entry name, in
    the mix's order (an entry that sent nothing has a row of zeros)."""
    groups = {name: stats.tenants.get(name) or GroupStats() for name in weights}
    requests = sum(g.counts["requests"] for g in groups.values())
    good = sum(g.counts["good"] for g in groups.values())
    tenants = []
    for name, weight in weights.items():
        row = _row(groups[name])
        answers, asked_s = stats.retry_after.get(name, (0, 0.0))
        row.update(retry_after=int(answers), retry_after_s=round(asked_s, 3))
        tenants.append({"name": name, "model": models.get(name) or None, "weight": round(weight, 6),
                        "share": row["requests"] / requests if requests else None,
                        "goodput_share": row["good"] / good if good else None, **row})
    by_model: dict[str, GroupStats] = {}
    for name, group in groups.items():
        by_model.setdefault(models.get(name, ""), GroupStats()).merge(group)
    model_rows = []
    for model, group in by_model.items():
        row = _row(group)
        members = [n for n in weights if models.get(n, "") == model]
        model_rows.append({"model": model or None, "tenants": members,
                           "weight": round(sum(weights[n] for n in members), 6),
                           "share": row["requests"] / requests if requests else None,
                           "goodput_share": row["good"] / good if good else None, **row})
    ratios = [t["goodput_share"] / t["weight"] for t in tenants] if good else []
    return {"sticky": sticky, "requests": requests, "tenants": tenants, "models": model_rows,
            "fairness": {"jain_index": jain_index(ratios), "of": "goodput share / weight"}}

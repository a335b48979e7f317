"""Embeddings and rerank figures (pure): inputs and input tokens per second, per batch size.

A record of the embeddings level (:mod:`fourfold.levels.embed_batches`) carries in ``record.extra`` the
inputs it sent (``inputs``: texts embedded, or documents to rank) and what came back (``outputs``:
vectors or results); :class:`EmbedStats` keeps, per scenario (``embeddings@b8``: one per batch
size), the measured requests, their inputs and input tokens and the wall time they span, and
:meth:`EmbedStats.summary` is summary.json's ``embed`` block. The latency by batch size is the
group's own ``e2e_ms`` (``embed:embeddings@b8`` in summary.json).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fourfold.measure.metrics import end_s, ratio, wall_s
from fourfold.measure.record import FAILURE_CLASSES, RequestRecord

__all__ = ["INPUTS", "OUTPUTS", "EmbedGroup", "EmbedStats", "count_mismatch", "format_embed"]

INPUTS = "inputs"        # record.extra: texts embedded / documents ranked, as sent
OUTPUTS = "outputs"      # record.extra: vectors / results the response held
MAX_INDEX = "max_index"  # record.extra: the largest result index a rerank response named


def count_mismatch(record: RequestRecord, top_n: int | None = None) -> str:
    """Why the response's count does not fit what was sent ("" when it does or nothing is known):
    an embeddings answer holds one vector per input; a rerank answer ``min(top_n, inputs)`` results
    (all without ``top_n``), each naming a sent document."""
    sent, got = record.extra.get(INPUTS), record.extra.get(OUTPUTS)
    if not isinstance(sent, int) or not isinstance(got, int):
        return ""
    expected = min(top_n, sent) if top_n else sent
    if got != expected:
        what = "results" if MAX_INDEX in record.extra else "vectors"
        return f"sent {sent} inputs, the response held {got} {what} (expected {expected})"
    top = record.extra.get(MAX_INDEX)
    if isinstance(top, int) and top >= sent:
        return f"a result names document {top} of the {sent} sent"
    return ""


@dataclass
class EmbedGroup:
    batch: int | None = None
    requests: int = 0
    ok: int = 0
    inputs_total: int = 0
    input_tokens_total: int = 0
    first_start: float | None = None
    last_end: float | None = None

    def add(self, record: RequestRecord) -> None:
        self.requests += 1
        ended, start = end_s(record), record.started_at
        self.first_start = start if self.first_start is None else min(self.first_start, start)
        self.last_end = ended if self.last_end is None else max(self.last_end, ended)
        if record.error_class in FAILURE_CLASSES:
            return
        self.ok += 1
        inputs = record.extra.get(INPUTS)
        self.inputs_total += inputs if isinstance(inputs, int) else 0
        self.input_tokens_total += record.input_tokens or 0

    def summary(self) -> dict[str, Any]:
        wall = wall_s(self.first_start, self.last_end)
        return {"batch": self.batch, "requests": self.requests, "ok": self.ok,
                "inputs_total": self.inputs_total,
                "input_tokens_total": self.input_tokens_total, "wall_s": wall,
                "request_rps": ratio(self.requests, wall),
                "inputs_per_request": ratio(self.inputs_total, self.ok),
                "inputs_per_s": ratio(self.inputs_total, wall),
                "input_tokens_per_s": ratio(self.input_tokens_total, wall)}


class EmbedStats:
    """Per scenario: the measured embeddings / rerank requests (warm-up and cancelled ones left out)."""

    def __init__(self) -> None:
        self.groups: dict[str, EmbedGroup] = {}

    def add(self, record: RequestRecord) -> None:
        if record.warmup or record.error_class == "cancelled":
            return
        group = self.groups.get(record.scenario)
        if group is None:
            batch = record.extra.get("batch")
            group = self.groups[record.scenario] = EmbedGroup(batch if isinstance(batch, int) else None)
        group.add(record)

    def summary(self) -> dict[str, Any]:
        return {scenario: group.summary() for scenario, group in sorted(
            self.groups.items(), key=lambda kv: (kv[1].batch or 0, kv[0]))}


def format_embed(block: dict[str, Any]) -> str:
    """The console's lines: one per batch size."""
    lines = ["Embeddings / rerank by batch size:"]
    for scenario, g in block.items():
        lines.append(f"  {scenario:<24} requests {g['requests']:>6}  req/s {_num(g['request_rps'])}  "
                     f"inputs/s {_num(g['inputs_per_s'])}  input tok/s {_num(g['input_tokens_per_s'])}")
    return "\n".join(lines)


def _num(value: float | None) -> str:
    return f"{value:>9.1f}" if value is not None else f"{'-':>9}"

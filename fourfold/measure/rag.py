"""RAG measurements (pure): retrieval quality per request, stage breakdown, and their aggregate.

Per request (``record.extra`` of an L3 record, filled by :func:`annotate`):

- ``retrieved_ids``: the document ids the service says it used, in rank order;
- ``gold_ids``: the dataset's relevant ids for the question;
- ``recall_at_k`` = |first k retrieved ∩ gold| / |gold| (absent without gold ids);
- ``precision_at_k`` ("context precision") = |first k retrieved ∩ gold| / |first k retrieved|
  (absent when nothing was retrieved);
- ``conflict``: True when two retrieved documents of one conflict group state different values
  (``conflict_groups`` names them); the groups come from the corpus documents' ``claims``;
- ``effective_tps`` = answer tokens / end-to-end seconds (the rate a user sees, retrieval included);
- ``other_ms`` = e2e − the sum of the service's stage timings (every ``server_timing`` entry but
  ``total``): network, HTTP and the service's own overhead, i.e. what no stage accounts for.

:class:`RagStats` aggregates ok, measured records (warm-up and cancelled ones are skipped) into
the ``rag`` block of ``summary.json``; it is fed on the process that writes the run directory
(the local runner, or the master from the records the workers ship). Each number of the block is
a metric of :mod:`fourfold.measure.metric_names` (``where`` ``rag``), under the same name as
everywhere else (``recall_at_k`` and ``precision_at_k`` are also the records' and the report's).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from fourfold.measure.histogram import LogHistogram
from fourfold.measure.record import RequestRecord

__all__ = ["CorpusDoc", "RagStats", "annotate", "conflict_groups", "format_rag", "precision_at_k",
           "recall_at_k", "stage_timings"]

TOTAL_STAGES = frozenset({"total", "e2e", "overall"})     # server_timing entries that are not stages
STAGE_ORDER = ("retrieve", "rerank", "llm_ttft", "generate")


@dataclass(frozen=True)
class CorpusDoc:
    id: str
    title: str
    text: str
    claims: dict[str, str] = field(default_factory=dict)

    @property
    def chunk_text(self) -> str:
        """The text a model saw for this document (title and text)."""
        return f"{self.title}: {self.text}" if self.title else self.text


# ---- per-request metrics ----
def recall_at_k(retrieved: Sequence[str], gold: Iterable[str], k: int) -> float | None:
    gold_set = set(gold)
    if not gold_set:
        return None
    return len(gold_set.intersection(retrieved[:k])) / len(gold_set)


def precision_at_k(retrieved: Sequence[str], gold: Iterable[str], k: int) -> float | None:
    top = list(dict.fromkeys(retrieved[:k]))
    if not top:
        return None
    gold_set = set(gold)
    return sum(1 for doc in top if doc in gold_set) / len(top)


def conflict_groups(retrieved: Iterable[str], claims: dict[str, dict[str, str]]) -> list[str]:
    """Groups in which two retrieved documents state different values (sorted)."""
    seen: dict[str, set[str]] = {}
    for doc in dict.fromkeys(retrieved):
        for group, value in claims.get(doc, {}).items():
            seen.setdefault(group, set()).add(value)
    return sorted(group for group, values in seen.items() if len(values) > 1)


def stage_timings(server_timing: dict[str, float]) -> dict[str, float]:
    """The service's stages (every entry but a total), in ms."""
    return {name: value for name, value in server_timing.items() if name.lower() not in TOTAL_STAGES}


def annotate(record: RequestRecord, retrieved: Sequence[str], gold: Sequence[str], k: int,
             claims: dict[str, dict[str, str]]) -> None:
    """Fill the RAG facts of one record into ``record.extra`` (see module docstring)."""
    extra = record.extra
    extra["k"] = k
    if retrieved:
        extra["retrieved_ids"] = list(retrieved)
    if gold:
        extra["gold_ids"] = list(gold)
    if not record.ok:
        return
    recall = recall_at_k(retrieved, gold, k)
    if recall is not None:
        extra["recall_at_k"] = round(recall, 6)
    precision = precision_at_k(retrieved, gold, k)
    if precision is not None and gold:
        extra["precision_at_k"] = round(precision, 6)
    if retrieved:
        groups = conflict_groups(retrieved, claims)
        extra["conflict"] = bool(groups)
        if groups:
            extra["conflict_groups"] = groups
    if record.e2e_ms and record.e2e_ms > 0:
        extra["effective_tps"] = round(record.output_tokens / (record.e2e_ms / 1000), 3)
        stages = stage_timings(record.server_timing)
        if stages:
            extra["other_ms"] = round(record.e2e_ms - math.fsum(stages.values()), 3)


# ---- aggregate ----
def _hist_summary(hist: LogHistogram) -> dict[str, Any]:
    p50, p95, p99 = hist.quantiles((0.5, 0.95, 0.99))
    return {"count": hist.count, "mean": hist.mean, "p50": p50, "p95": p95, "p99": p99, "max": hist.max,
            **({"invalid": hist.invalid} if hist.invalid else {})}


class RagStats:
    """The ``rag`` block of a run's summary (see module docstring)."""

    def __init__(self, k: int = 3) -> None:
        self.k = k
        self.requests = 0
        self.ok = 0
        self.with_ids = 0
        self.with_stages = 0
        self.recall_sum = 0.0
        self.recall_n = 0
        self.precision_sum = 0.0
        self.precision_n = 0
        self.conflicts = 0
        self.conflict_n = 0
        self.by_question: dict[str, float] = {}
        self.inconsistent_questions: set[str] = set()
        self.tokens = 0
        self.e2e_s = 0.0
        self.stages: dict[str, LogHistogram] = {}
        self.e2e_ms = LogHistogram()
        self.ttft_ms = LogHistogram()
        self.other_ms = LogHistogram()
        self.server_total_ms = LogHistogram()
        self.effective_tps = LogHistogram()

    def add(self, record: RequestRecord) -> None:
        if record.warmup or record.error_class == "cancelled" or record.level != "l3":
            return
        self.requests += 1
        if not record.ok:
            return
        self.ok += 1
        extra = record.extra
        if extra.get("retrieved_ids"):
            self.with_ids += 1
        recall = extra.get("recall_at_k")
        if recall is not None:
            self.recall_sum += recall
            self.recall_n += 1
            known = self.by_question.setdefault(record.item_id, recall)
            if abs(known - recall) > 1e-9:
                self.inconsistent_questions.add(record.item_id)
        precision = extra.get("precision_at_k")
        if precision is not None:
            self.precision_sum += precision
            self.precision_n += 1
        if "conflict" in extra:
            self.conflict_n += 1
            self.conflicts += bool(extra["conflict"])
        if record.e2e_ms:
            self.e2e_ms.add(record.e2e_ms)
            self.tokens += record.output_tokens
            self.e2e_s += record.e2e_ms / 1000
        if record.ttft_ms is not None:
            self.ttft_ms.add(record.ttft_ms)
        if "effective_tps" in extra:
            self.effective_tps.add(extra["effective_tps"])
        stages = stage_timings(record.server_timing)
        if stages:
            self.with_stages += 1
            for name, value in stages.items():
                self.stages.setdefault(name, LogHistogram()).add(value)
            if "total" in record.server_timing:
                self.server_total_ms.add(record.server_timing["total"])
        if "other_ms" in extra:
            self.other_ms.add(extra["other_ms"])

    def add_all(self, records: Iterable[RequestRecord]) -> None:
        for record in records:
            self.add(record)

    def summary(self) -> dict[str, Any]:
        k = self.k
        recall = self.recall_sum / self.recall_n if self.recall_n else None
        by_question = ((math.fsum(self.by_question.values()) / len(self.by_question)) if self.by_question
                       else None)
        ordered = sorted(self.stages,
                         key=lambda s: (STAGE_ORDER.index(s) if s in STAGE_ORDER else len(STAGE_ORDER), s))
        return {
            "k": k,
            "requests": self.requests,
            "ok": self.ok,
            "with_retrieved_ids": self.with_ids,
            "with_stage_timings": self.with_stages,
            "timing_source": "stages" if self.with_stages else "end_to_end_only",
            "recall_at_k": recall,
            "recall_at_k_by_question": by_question,
            "questions": len(self.by_question),
            "inconsistent_questions": sorted(self.inconsistent_questions),
            "recall_by_question": dict(sorted(self.by_question.items())),
            "precision_at_k": self.precision_sum / self.precision_n if self.precision_n else None,
            "conflict_rate": self.conflicts / self.conflict_n if self.conflict_n else None,
            "conflicts": self.conflicts,
            "effective_tps": self.tokens / self.e2e_s if self.e2e_s else None,
            "effective_tps_per_request": _hist_summary(self.effective_tps),
            "e2e_ms": _hist_summary(self.e2e_ms),
            "ttft_ms": _hist_summary(self.ttft_ms),
            "stages_ms": {name: _hist_summary(self.stages[name]) for name in ordered},
            "other_ms": _hist_summary(self.other_ms),
            "server_total_ms": _hist_summary(self.server_total_ms),
        }


def _fmt(value: float | None, pattern: str = "{:.1f}") -> str:
    return "-" if value is None else pattern.format(value)


def format_rag(rag: dict[str, Any]) -> str:
    """The RAG block printed at the end of an L3 run (plain text)."""
    k = rag["k"]
    lines = [f"fourfold RAG summary ({rag['ok']} ok of {rag['requests']} requests; "
             f"{rag['with_retrieved_ids']} with retrieved ids, "
             f"{rag['with_stage_timings']} with stage timings)"]
    lines.append(f"recall@{k} {_fmt(rag['recall_at_k'], '{:.3f}')} "
                 f"(over {rag['questions']} questions: {_fmt(rag['recall_at_k_by_question'], '{:.3f}')})  "
                 f"context precision@{k} {_fmt(rag['precision_at_k'], '{:.3f}')}  "
                 f"conflict rate {_fmt(rag['conflict_rate'], '{:.1%}')}  "
                 f"effective tok/s {_fmt(rag['effective_tps'])}")
    rows = [("stage (ms)", "mean", "p50", "p95")]
    for name, block in rag["stages_ms"].items():
        rows.append((name, _fmt(block["mean"]), _fmt(block["p50"]), _fmt(block["p95"])))
    if rag["stages_ms"]:
        block = rag["other_ms"]
        rows.append(("other (e2e - stages)", _fmt(block["mean"]), _fmt(block["p50"]), _fmt(block["p95"])))
    else:
        lines.append("the service exposed no stage timings: end-to-end timing only")
    for name in ("ttft_ms", "e2e_ms"):
        block = rag[name]
        rows.append((name.removesuffix("_ms").upper() + " (client)", _fmt(block["mean"]), _fmt(block["p50"]),
                     _fmt(block["p95"])))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for row in rows:
        lines.append("  " + "  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                                      for i, (c, w) in enumerate(zip(row, widths))))
    if rag["inconsistent_questions"]:
        lines.append(f"note: {len(rag['inconsistent_questions'])} questions got different retrievals across "
                     "requests")
    return "\n".join(lines)

"""L3 after the run: groundedness of each answer in the chunks its RAG service retrieved.

For every scored L3 record with ``extra["retrieved_ids"]``, the chunk texts are looked up in the
run's corpus (``meta.json`` ``rag.corpus``, else the bundled ``data/rag/corpus.jsonl``): records
keep ids, not texts. ``groundedness`` = :func:`fourfold.fingerprint.score.groundedness` of the answer's
embedding to the chunks' (max cosine by default): a low value means the answer says something
its context does not, the hallucination signal. The ``rag`` block of ``quality``:

- ``groundedness_mean`` / ``_p5`` / ``_p50`` over the records with chunks;
- ``low_groundedness_rate``: share below ``LOW_GROUNDEDNESS`` (0.6: on the bundled data, answers
  whose gold document was retrieved have a median of 0.72, answers without it 0.56, and an
  off-topic sentence in the answer pulls it down);
- the same mean split by retrieval hit (``recall_at_k`` > 0) vs miss, and by conflict flag;
- ``unknown_ids``: retrieved ids missing from the corpus (a corpus that does not match the service).

Fact errors (:func:`check_facts`, before the quality block is summarised): each L3 row gets
``fact_checked`` / ``fact_errors`` / ``fact_error`` from :func:`fourfold.fingerprint.facts.check_answer`
against the ``facts`` of the record's gold documents (``extra["gold_ids"]``) and retrieved ones;
the quality block's ``fact_error_rate`` is over the rows with a checked fact. A corpus without
``facts`` leaves every row unchecked: ``fact_error_rate`` is None, "not measured", and the ``rag``
block's ``fact_check`` says why.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from fourfold.data import DATA_DIR, find
from fourfold.errors import UsageError
from fourfold.fingerprint.embedder import Embedder
from fourfold.fingerprint.facts import Fact, check_answer, load_facts
from fourfold.fingerprint.score import ScoreRow, distribution, groundedness
from fourfold.measure.console import counted
from fourfold.measure.rag import CorpusDoc
from fourfold.measure.record import RequestRecord
from fourfold.workloads.corpus import corpus_by_id

__all__ = ["LOW_GROUNDEDNESS", "check_facts", "rag_dataset", "rag_quality", "run_corpus"]

LOW_GROUNDEDNESS = 0.6
DEFAULT_CORPUS = DATA_DIR / "rag" / "corpus.jsonl"
DEFAULT_QUESTIONS = DATA_DIR / "rag" / "questions.jsonl"


def _existing(value: Any, run_dir: Path | None = None) -> Path | None:
    if not value:
        return None
    return find(value, run_dir)


def rag_dataset(meta: dict[str, Any] | None, run_dir: Path | None = None) -> Path | None:
    """An L3 run's questions file (its ``--dataset`` when given, else meta's ``rag.questions``)."""
    if not meta or meta.get("level") != "l3" or (meta.get("settings") or {}).get("dataset"):
        return None
    return _existing((meta.get("rag") or {}).get("questions"), run_dir) or DEFAULT_QUESTIONS


def run_corpus(meta: dict[str, Any] | None, run_dir: Path | None = None) -> Path:
    return _existing(((meta or {}).get("rag") or {}).get("corpus"), run_dir) or DEFAULT_CORPUS


def check_facts(rows: Sequence[ScoreRow], records: Sequence[RequestRecord],
                facts: dict[str, list[Fact]] | str | Path) -> str:
    """Set the fact fields of the L3 rows (module docstring); returns the ``fact_check`` note."""
    try:
        by_doc = load_facts(facts) if isinstance(facts, (str, Path)) else facts
    except ValueError as exc:
        raise UsageError(f"cannot read the corpus's facts: {exc} (docs/l3-rag.md)") from None
    if not by_doc:
        return "not measured: the corpus has no facts (docs/l3-rag.md)"
    by_id = {r.request_id: r for r in records}
    for row in rows:
        record = by_id.get(row.request_id)
        if record is None or record.level != "l3":
            continue
        gold = [f for i in record.extra.get("gold_ids") or [] for f in by_doc.get(str(i), ())]
        retrieved = [f for i in record.extra.get("retrieved_ids") or [] for f in by_doc.get(str(i), ())]
        result = check_answer(record.text, gold, retrieved)
        row.fact_checked, row.fact_errors = result.checked, result.errors
        row.fact_error = result.errors > 0 if result.checked else None
    return f"measured: {sum(len(v) for v in by_doc.values())} facts in {len(by_doc)} documents"


def _mean(values: list[float]) -> float | None:
    return round(sum(values) / len(values), 4) if values else None


def rag_quality(rows: Sequence[ScoreRow], records: Sequence[RequestRecord], embedder: Embedder,
                corpus: dict[str, CorpusDoc] | str | Path, how: str = "max") -> dict[str, Any]:
    """Set ``row.groundedness`` for the L3 rows and return the ``rag`` quality block."""
    docs = corpus_by_id(corpus) if isinstance(corpus, (str, Path)) else corpus
    by_id = {r.request_id: r for r in records}
    unknown: set[str] = set()
    jobs: list[tuple[ScoreRow, RequestRecord, list[str]]] = []
    for row in rows:
        record = by_id.get(row.request_id)
        if record is None or record.level != "l3":
            continue
        ids = [str(i) for i in record.extra.get("retrieved_ids") or []]
        unknown.update(i for i in ids if i not in docs)
        chunks = [docs[i].chunk_text for i in ids if i in docs]
        if chunks:
            jobs.append((row, record, chunks))
    texts = sorted({t for _, record, chunks in jobs for t in (record.text, *chunks)}, key=len, reverse=True)
    vectors = dict(zip(texts, embedder.encode(texts))) if texts else {}
    hit: list[float] = []
    miss: list[float] = []
    conflict: list[float] = []
    clean: list[float] = []
    values: list[float] = []
    for row, record, chunks in jobs:
        value = groundedness(vectors[record.text], np.stack([vectors[c] for c in chunks]), how=how)
        if value is None:
            continue
        row.groundedness = value
        values.append(value)
        recall = record.extra.get("recall_at_k")
        if recall is not None:
            (hit if recall > 0 else miss).append(value)
        if "conflict" in record.extra:
            (conflict if record.extra["conflict"] else clean).append(value)
    dist = distribution(values)
    return {
        "n": dist.n,
        "how": how,
        "groundedness_mean": None if dist.mean is None else round(dist.mean, 4),
        "groundedness_p5": None if dist.p5 is None else round(dist.p5, 4),
        "groundedness_p50": None if dist.p50 is None else round(dist.p50, 4),
        "low_groundedness_threshold": LOW_GROUNDEDNESS,
        "low_groundedness_rate": (round(sum(v < LOW_GROUNDEDNESS for v in values) / len(values), 4) if values
                                  else None),
        "groundedness_retrieval_hit": _mean(hit),
        "groundedness_retrieval_miss": _mean(miss),
        "groundedness_conflict": _mean(conflict),
        "groundedness_no_conflict": _mean(clean),
        "unknown_ids": len(unknown),
    }


def format_rag_quality(block: dict[str, Any]) -> str:
    """One line for ``fourfold score``'s output."""
    def f(value: float | None) -> str:
        return "-" if value is None else f"{value:.3f}"
    rate = block["low_groundedness_rate"]
    return (f"groundedness (answer vs retrieved chunks, {counted(block['n'], 'answer')}): "
            f"mean {f(block['groundedness_mean'])}, "
            f"p5 {f(block['groundedness_p5'])}; below {block['low_groundedness_threshold']}: "
            f"{'-' if rate is None else f'{rate:.1%}'}; retrieval hit "
            f"{f(block['groundedness_retrieval_hit'])} vs miss {f(block['groundedness_retrieval_miss'])}")

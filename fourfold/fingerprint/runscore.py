"""Score a finished run directory: ``scores.jsonl`` and the ``quality`` block of ``summary.json``.

Which records: every non-warm-up record that succeeded (``record.ok``, and not ``cancelled``,
whose text stops where the load generator did) with non-empty text and an ``item_id`` found in
the run's dataset (``meta.json`` ``settings.dataset``, resolved against the current directory,
the directory above ``runs/`` and the repository; the bundled prompts when the run used them).
Skipped records are counted by reason in ``quality.skipped``. L4 session turns other than a
session's last (``extra["final"]`` false) are skipped as ``session_turn``: the final answer is
scored against the session script's reference (the goal's final answer).

For each scored record (a :class:`fourfold.fingerprint.score.ScoreRow`, one line of ``scores.jsonl``):

- ``similarity``: the best cosine of the answer's embedding to the item's reference answers;
- ``requested_items`` (the item's ``requested_items`` field, else read from its prompt),
  ``delivered_items`` and ``compliant``;
- ``fullwidth_share`` with its counts, for Chinese answers;
- ``unk_share``: the share of the answer's word pieces the model's tokenizer maps to ``[UNK]``;
  above ``unk_threshold`` (default 0.2, ``--unk-threshold``) the row is ``low_confidence``: the
  model did not see most of the answer, so its similarity is kept in the row but left out of
  the similarity mean/p5/p50 (``quality`` ``low_confidence_n`` counts them);
- ``char_f1``: the best character-bigram F1 to a reference (:mod:`fourfold.fingerprint.lexical`),
  which works for scripts the model barely knows.

``quality.embedder`` records what scored: the model's name, the sha256 of its weights, the
backend (``torch-fp32``/``torch-bf16``) and the cache id; ``fourfold compare`` warns when two runs
were scored by different ones.

A record sent with ``ignore_eos`` (L1 against the embedded simulator, or ``--ignore-eos``) has an
answer padded to ``max_tokens`` (the simulator repeats the reference; a real engine keeps
generating past its end-of-sequence token): it is flagged ``forced_length``, its similarity is
computed on the padded text, and it is left out of structure compliance (a repeated list
delivers too many items). One that still ended by ``finish_reason: "stop"`` was not padded (a
server that ignores ``ignore_eos``, as llama-cpp-python's does) and is scored as sent. Score runs
that do not force the length for quality. An answer the server cut at ``max_tokens`` (error
class ``truncated``) is flagged ``truncated`` and left out of structure compliance too (it
cannot deliver the items it had not reached): ``quality`` ``truncated_n`` counts them.

Every distinct text (answers and references) is embedded once, longest first, with a progress
bar on stderr. This module runs after the load test, never on the gevent hub of a running one:
a model forward pass would block every stream's timing.
"""

from __future__ import annotations

import json
import os
import sys
import time
import warnings
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from fourfold.data import DATA_DIR, candidates, find
from fourfold.errors import RunDirError, UsageError
from fourfold.fingerprint.embedder import (
    DEFAULT_BATCH_SIZE,
    CachedEmbedder,
    Embedder,
    EmbeddingCache,
    MiniLMEmbedder,
    default_cache_path,
)
from fourfold.fingerprint.lexical import best_char_f1
from fourfold.fingerprint.rag import check_facts, format_rag_quality, rag_dataset, rag_quality, run_corpus
from fourfold.fingerprint.score import ScoreRow, groundedness, max_similarity, quality_block
from fourfold.fingerprint.structure import (
    asks_for_table,
    count_items,
    is_chinese,
    judged_compliance,
    punctuation_counts,
    requested_items,
)
from fourfold.measure.console import counted
from fourfold.measure.record import RequestRecord
from fourfold.rundir.runlog import RECORDS_FILE, SUMMARY_FILE, write_json_atomic
from fourfold.rundir.runread import read_meta, read_records, read_summary
from fourfold.workloads.formats import load_run_dataset
from fourfold.workloads.items import Item

__all__ = ["SCORES_FILE", "RunScore", "format_quality", "make_embedder", "resolve_dataset", "score_records",
           "score_run", "text_groundedness"]

SCORES_FILE = "scores.jsonl"
DEFAULT_DATASET = DATA_DIR / "prompts" / "prompts.jsonl"
DEFAULT_UNK_THRESHOLD = 0.2


@dataclass
class RunScore:
    """What :func:`score_run` found and wrote."""

    run_dir: Path
    dataset: Path
    rows: list[ScoreRow]
    quality: dict[str, Any]
    skipped: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    written: bool = False


def make_embedder(batch_size: int = DEFAULT_BATCH_SIZE, threads: int | None = None, use_cache: bool = True,
                  cache_dir: str | os.PathLike[str] | None = None, backend: str | None = None,
                  model_path: str | os.PathLike[str] | None = None) -> Embedder:
    """The MiniLM embedder (or the model at ``model_path``) on ``backend`` (default: ``auto`` or
    ``$FOURFOLD_EMBED_BACKEND``), behind the disk cache unless ``use_cache`` is False."""
    embedder = MiniLMEmbedder(batch_size=batch_size, threads=threads, backend=backend, model_path=model_path)
    if not use_cache:
        return embedder
    return CachedEmbedder(embedder, EmbeddingCache(default_cache_path(cache_dir)))


def text_groundedness(embedder: Embedder, answer: str, chunks: Sequence[str],
                      how: str = "max") -> float | None:
    """Groundedness of an L3 answer in its retrieved chunks (texts): the max (default) or mean
    cosine of the answer to the chunks; see :func:`fourfold.fingerprint.score.groundedness`."""
    if not chunks:
        return None
    vectors = embedder.encode([answer, *chunks])
    return groundedness(vectors[0], vectors[1:], how=how)


def resolve_dataset(run_dir: Path, meta: dict[str, Any] | None,
                    override: str | os.PathLike[str] | None = None) -> Path:
    """The dataset file whose items the run sent (see module docstring)."""
    if override:
        path = Path(override)
        if not path.is_file():
            raise UsageError(f"dataset {str(path)!r} not found")
        return path
    settings = (meta or {}).get("settings") or {}
    name = settings.get("dataset") or ""
    if not name:
        return DEFAULT_DATASET
    found = find(name, run_dir)
    if found is not None:
        return found
    tried = ", ".join(str(c) for c in candidates(name, run_dir))
    raise UsageError(f"the run's dataset {name!r} was not found (tried {tried}); pass --dataset PATH")


def select_records(records: Iterable[RequestRecord],
                   items: dict[str, Item]) -> tuple[list[RequestRecord], Counter[str]]:
    """The records to score and the count of skipped ones by reason."""
    chosen: list[RequestRecord] = []
    skipped: Counter[str] = Counter()
    for record in records:
        if record.warmup:
            skipped["warmup"] += 1
        elif record.error_class == "cancelled":
            skipped["cancelled"] += 1
        elif record.extra.get("final") is False:     # L4: only a session's final answer meets its goal
            skipped["session_turn"] += 1
        elif not record.ok:
            skipped["failed"] += 1
        elif not record.text.strip():
            skipped["no_text"] += 1
        elif record.item_id not in items:
            skipped["unknown_item"] += 1
        else:
            chosen.append(record)
    return chosen, skipped


class _Progress:
    """tqdm on stderr when it is installed, else a plain counter line."""

    def __init__(self, total: int, enabled: bool | None) -> None:
        self.total, self.done, self._bar = total, 0, None
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        if self.enabled:
            try:
                from tqdm import tqdm
                self._bar = tqdm(total=total, desc="fingerprint", unit="text", file=sys.stderr, leave=False)
            except ImportError:
                pass

    def update(self, n: int) -> None:
        self.done += n
        if self._bar is not None:
            self._bar.update(n)
        elif self.enabled:
            print(f"\rfingerprint: {self.done}/{self.total} texts", end="", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
        elif self.enabled:
            print(file=sys.stderr)


def embed_texts(embedder: Embedder, texts: Iterable[str], chunk_size: int = DEFAULT_BATCH_SIZE,
                progress: bool | None = None) -> dict[str, np.ndarray]:
    """Each distinct text's vector, encoded longest first in chunks (one progress step each)."""
    unique = sorted(set(texts), key=len, reverse=True)
    vectors: dict[str, np.ndarray] = {}
    bar = _Progress(len(unique), progress)
    try:
        for start in range(0, len(unique), chunk_size):
            chunk = unique[start:start + chunk_size]
            vectors.update(zip(chunk, embedder.encode(chunk)))
            bar.update(len(chunk))
    finally:
        bar.close()
    return vectors


def score_records(records: Sequence[RequestRecord], items: dict[str, Item], embedder: Embedder, *,
                  chunk_size: int = DEFAULT_BATCH_SIZE, progress: bool | None = None,
                  unk_threshold: float = DEFAULT_UNK_THRESHOLD) -> list[ScoreRow]:
    """One :class:`ScoreRow` per record (records must have a known ``item_id``: see select_records)."""
    texts = [r.text for r in records]
    for record in records:
        texts.extend(items[record.item_id].references)
    vectors = embed_texts(embedder, texts, chunk_size=chunk_size, progress=progress)
    unk_shares = getattr(embedder, "unk_shares", None)
    unks = unk_shares([r.text for r in records]) if unk_shares is not None else [None] * len(records)
    rows = []
    for record, unk in zip(records, unks):
        item = items[record.item_id]
        refs = [vectors[ref] for ref in item.references]
        similarity = max_similarity(vectors[record.text], np.stack(refs)) if refs else None
        field_count = item.meta.get("requested_items")
        requested: int | None
        if isinstance(field_count, int) and not isinstance(field_count, bool):
            requested, source = field_count, "item"
        else:
            requested = requested_items(item.prompt)
            source = "prompt" if requested is not None else ""
        delivered = count_items(record.text, prefer_table=asks_for_table(item.prompt))
        # a server that does not honour ignore_eos (llama.cpp's Python server) ends some answers by "stop":
        # those were not padded, so they are scored like any other answer
        forced = bool(record.extra.get("ignore_eos")) and record.finish_reason != "stop"
        cut = record.error_class == "truncated"
        chinese = is_chinese(record.text)
        punct = punctuation_counts(record.text) if chinese else None
        rows.append(ScoreRow(
            request_id=record.request_id, item_id=record.item_id, level=record.level,
            scenario=record.scenario, variant=record.variant, similarity=similarity,
            requested_items=requested, requested_source=source,
            delivered_items=delivered.n, delivered_kind=delivered.kind,
            compliant=judged_compliance(requested, delivered.n, forced=forced, truncated=cut),
            chinese=chinese, fullwidth_punct=punct.fullwidth if punct else 0,
            halfwidth_punct=punct.halfwidth if punct else 0, fullwidth_share=punct.share if punct else None,
            forced_length=forced, truncated=cut, unk_share=unk,
            low_confidence=similarity is not None and unk is not None and unk > unk_threshold,
            char_f1=best_char_f1(record.text, item.references),
        ))
    return rows


def _write_scores(path: Path, rows: Sequence[ScoreRow]) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            for row in rows:
                fh.write(json.dumps(row.to_dict(), ensure_ascii=False, separators=(",", ":")) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def score_run(run_dir: str | os.PathLike[str], embedder: Embedder, *,
              dataset: str | os.PathLike[str] | None = None, chunk_size: int = DEFAULT_BATCH_SIZE,
              progress: bool | None = None, write: bool = True,
              unk_threshold: float = DEFAULT_UNK_THRESHOLD) -> RunScore:
    """Score ``run_dir`` (see module docstring); with ``write``, write scores.jsonl and summary.json."""
    started = time.perf_counter()
    path = Path(run_dir)
    if not path.exists():
        raise RunDirError(f"{path}: no such directory")
    if not (path / RECORDS_FILE).is_file():
        raise RunDirError(f"{str(path)!r} is not a run directory (no {RECORDS_FILE}); "
                          "pass a directory under runs/")
    summary = read_summary(path)
    if summary is None and time.time() - (path / RECORDS_FILE).stat().st_mtime < 5.0:
        warnings.warn(f"{path} has no {SUMMARY_FILE} and its records changed seconds ago: is the run still "
                      "going? Score after it ends.", RuntimeWarning, stacklevel=2)
    meta = read_meta(path)
    dataset_path = resolve_dataset(path, meta, dataset or rag_dataset(meta, path))
    try:
        items = {item.id: item for item in load_run_dataset(dataset_path, (meta or {}).get("settings"))}
    except ValueError as exc:
        raise UsageError(f"cannot read the run's dataset: {exc}") from None
    records, skipped = select_records(read_records(path), items)     # RecordsFormatError, SchemaError
    rows = score_records(records, items, embedder, chunk_size=chunk_size, progress=progress,
                         unk_threshold=unk_threshold)
    is_l3 = (meta or {}).get("level") == "l3"
    fact_check = check_facts(rows, records, run_corpus(meta, path)) if is_l3 else ""   # before quality_block
    quality = {
        **quality_block(rows),
        "skipped": dict(sorted(skipped.items())),
        "model": getattr(embedder, "model_id", type(embedder).__qualname__),
        "embedder": describe_embedder(embedder),
        "unk_threshold": unk_threshold,
        "dataset": str(dataset_path),
        "scores_file": SCORES_FILE,
        "scored_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    if is_l3:      # L3: groundedness in the retrieved chunks, fact errors (fingerprint.rag)
        quality["rag"] = {**rag_quality(rows, records, embedder, run_corpus(meta, path)),
                          "fact_check": fact_check}
    if write:
        _write_scores(path / SCORES_FILE, rows)
        write_json_atomic(path / SUMMARY_FILE, {**(summary or {}), "quality": quality})
    return RunScore(path, dataset_path, rows, quality, dict(skipped), time.perf_counter() - started, write)


def describe_embedder(embedder: Embedder) -> dict[str, str]:
    """The embedder's name, weights sha256, backend and id (an embedder without ``describe``: its id)."""
    describe = getattr(embedder, "describe", None)
    if describe is not None:
        return dict(describe())
    name = getattr(embedder, "model_id", type(embedder).__qualname__)
    return {"name": name, "weights_sha256": "", "backend": "", "id": name}


def _fmt(value: float | None, pattern: str = "{:.3f}") -> str:
    return "-" if value is None else pattern.format(value)


def format_quality(result: RunScore) -> str:
    """A plain-text table of the quality block, for the terminal."""
    quality = result.quality
    skipped = ", ".join(f"{n} {reason}" for reason, n in sorted(result.skipped.items())) or "none"
    lines = [f"{result.run_dir}: {counted(quality['total']['n'], 'answer')} scored in {result.seconds:.1f} s "
             f"(skipped: {skipped})"]
    about = quality.get("embedder") or {}
    if about:
        lines.append(f"embedder: {about.get('name')} (weights sha256 "
                     f"{str(about.get('weights_sha256'))[:12]}), backend {about.get('backend') or '-'}")
    lines.append("")
    header = ("group", "answers", "sim mean", "sim p5", "sim p50", "low-conf", "char F1", "structure",
              "full-width")
    table = [header]
    groups = {**quality["by_scenario"], "total": quality["total"]}
    for name, block in groups.items():
        structure = "-" if not block["structure_n"] else \
            f"{_fmt(block['structure_compliance'], '{:.1%}')} of {block['structure_n']}"
        fullwidth = "-" if not block["chinese_n"] else \
            f"{_fmt(block['fullwidth_punct_share'], '{:.1%}')} ({block['chinese_n']} zh)"
        table.append((name, str(block["n"]), _fmt(block["similarity_mean"]), _fmt(block["similarity_p5"]),
                      _fmt(block["similarity_p50"]), str(block.get("low_confidence_n", 0)),
                      _fmt(block.get("char_f1_mean")), structure, fullwidth))
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for row in table:
        lines.append("  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in
                               enumerate(zip(row, widths))).rstrip())
    total = quality["total"]
    low = total.get("low_confidence_n", 0)
    lines += ["", f"low-confidence: {low} of {counted(total['n'], 'answer')} had more than "
                  f"{quality.get('unk_threshold', DEFAULT_UNK_THRESHOLD):.0%} [UNK] word pieces: "
                  "their similarity is left out of sim mean/p5/p50 (the model cannot read them)"
                  + (f"; char-bigram F1 mean {total['char_f1_mean']:.3f} over "
                     f"{counted(total['char_f1_n'], 'answer')}"
                     if total.get("char_f1_mean") is not None else "")]
    forced = quality["total"]["forced_length_n"]
    if forced:
        lines += ["", f"note: {counted(forced, 'answer')} {'was' if forced == 1 else 'were'} forced to "
                      "max_tokens (ignore_eos): their similarity is "
                      "computed on the padded text and they are left out of structure compliance."]
    truncated = quality["total"].get("truncated_n", 0)
    if truncated:
        lines += ["", f"note: {counted(truncated, 'answer')} {'was' if truncated == 1 else 'were'} cut at "
                      "max_tokens by the server (truncated): they are left "
                      "out of structure compliance (a cut list cannot deliver its items)."]
    if "rag" in quality:
        lines += ["", format_rag_quality(quality["rag"])]
        rate, checked = quality["total"].get("fact_error_rate"), quality["total"].get("fact_checked_n", 0)
        lines.append(f"fact errors: {rate:.1%} of {counted(checked, 'answer')} stating a labelled fact"
                     if rate is not None
                     else f"fact errors: {quality['rag'].get('fact_check') or 'not measured'}")
    if result.written:
        lines += ["", f"wrote {result.run_dir / SCORES_FILE} and the \"quality\" block of "
                      f"{result.run_dir / SUMMARY_FILE}"]
    return "\n".join(lines)

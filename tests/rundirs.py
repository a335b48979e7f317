"""Hand-made run directories (meta.json, records.jsonl, summary.json, scores.jsonl) with known
effects, written through fourfold's own RunWriter: what the report and records-reader tests read."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path

from fourfold.measure.record import RequestRecord
from fourfold.rundir.runlog import RunWriter

T0 = 1_700_000_000.0
ITEMS = [(f"item-{i}", "structured" if i >= 5 else "plain") for i in range(10)]


@dataclass
class RunSpec:
    """What one synthetic run looks like (all draws from ``seed``)."""

    label: str
    seed: int
    n: int = 200
    ttft_plain: tuple[float, float] = (100.0, 8.0)          # mean, sd (ms)
    ttft_structured: tuple[float, float] = (160.0, 8.0)
    itl: tuple[float, float] = (20.0, 1.0)
    chunks: int = 20
    similarity: tuple[float, float] = (0.90, 0.03)
    pause_every: int = 0                                   # a 200 ms pause every N-th request (stalls)
    failure_every: int = 0
    text: str = "an answer"
    variant_of: list[str] = field(default_factory=list)    # cycle these variants (A/B in one run)
    char_f1: tuple[float, float] | None = None             # with it, scores have char_f1 and low_confidence
    low_confidence_every: int = 0                          # every N-th scored answer is low-confidence


def write_dataset(path: Path) -> Path:
    with open(path, "w", encoding="utf-8") as fh:
        for item_id, kind in ITEMS:
            tags = ["en", "structured", "points"] if kind == "structured" else ["en", "open"]
            fh.write(json.dumps({"id": item_id, "prompt": f"question {item_id}", "reference": "ref",
                                 "tags": tags}) + "\n")
    return path


def write_run(base: Path, spec: RunSpec, *, dataset: Path | None = None, scores: bool = True,
              now_s: float = T0) -> Path:
    """A run directory with meta.json, records.jsonl, summary.json and (optionally) scores.jsonl."""
    rng = random.Random(spec.seed)
    writer = RunWriter(spec.label, base, now_s=now_s)
    writer.write_meta({"label": spec.label, "level": "l1",
                       "settings": {"dataset": str(dataset) if dataset else "", "stall_ms": 150.0}})
    score_rows = []
    lexical = random.Random(spec.seed + 1)                # its own draws: the other columns stay as they were
    for i in range(spec.n):
        item_id, kind = ITEMS[i % len(ITEMS)]
        mean, sd = spec.ttft_structured if kind == "structured" else spec.ttft_plain
        ttft = round(max(1.0, rng.gauss(mean, sd)), 3)
        offsets = [ttft]
        for j in range(spec.chunks - 1):
            gap = max(0.5, rng.gauss(*spec.itl))
            if spec.pause_every and i % spec.pause_every == 0 and j == 5:
                gap += 200.0
            offsets.append(round(offsets[-1] + gap, 3))
        variant = spec.variant_of[i % len(spec.variant_of)] if spec.variant_of else ""
        failed = bool(spec.failure_every) and i % spec.failure_every == 0
        record = RequestRecord(
            level="l1", scenario=f"saturation@{variant}" if variant else "saturation", item_id=item_id,
            request_id=f"{spec.label}-{i}", variant=variant, started_at=T0 + i * 0.1,
            status=500 if failed else 200, error_class="http_5xx" if failed else "ok", ttfb_ms=2.0,
            ttft_ms=None if failed else ttft, e2e_ms=None if failed else offsets[-1],
            chunk_offsets_ms=[] if failed else offsets,
            output_tokens=0 if failed else spec.chunks, output_tokens_source="usage", terminal=not failed,
            text="" if failed else spec.text, conn_reused=i > 0)
        writer.append(record)
        if scores and not failed:
            score_rows.append({"request_id": record.request_id, "item_id": item_id, "level": "l1",
                               "scenario": record.scenario, "variant": variant,
                               "similarity": round(min(1.0, rng.gauss(*spec.similarity)), 6),
                               "compliant": None if kind == "plain" else rng.random() > 0.05})
            if spec.char_f1 is not None:
                score_rows[-1].update(
                    char_f1=round(min(1.0, lexical.gauss(*spec.char_f1)), 6),
                    low_confidence=bool(spec.low_confidence_every
                                        and len(score_rows) % spec.low_confidence_every == 0))
    writer.close()
    writer.write_summary({"records": spec.n, "slo_ms": {}})
    if scores:
        with open(writer.run_dir / "scores.jsonl", "w", encoding="utf-8") as fh:
            for row in score_rows:
                fh.write(json.dumps(row) + "\n")
    return writer.run_dir

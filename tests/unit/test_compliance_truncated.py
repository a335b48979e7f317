"""Structure compliance leaves out answers cut at max_tokens (issue #18: ``--quick`` scored 0.00 -> 0.00
because every cut list was judged) and counts them apart."""

from __future__ import annotations

import numpy as np
import pytest

from fourfold.data import DATA_DIR
from fourfold.fingerprint.runscore import score_records
from fourfold.fingerprint.score import quality_block
from fourfold.fingerprint.structure import judged_compliance
from fourfold.measure.record import RequestRecord
from fourfold.workloads.items import load_items

ITEMS = {item.id: item for item in load_items(DATA_DIR / "prompts" / "prompts.jsonl")}
THREE = "1. one\n2. two\n3. three"


class ConstantEmbedder:
    def encode(self, texts: list[str]) -> np.ndarray:
        return np.ones((len(texts), 4)) / 2.0


@pytest.mark.parametrize(("requested", "delivered", "forced", "truncated", "expected"), [
    (3, 3, False, False, True),
    (3, 2, False, False, False),
    (None, 2, False, False, None),
    (3, 2, False, True, None),       # cut at max_tokens: cannot deliver what it had not reached
    (3, 6, True, False, None),       # padded to max_tokens (ignore_eos)
])
def test_judged_compliance(requested, delivered, forced, truncated, expected):
    assert judged_compliance(requested, delivered, forced=forced, truncated=truncated) is expected


def test_truncated_answers_are_counted_apart_not_judged():
    records = [RequestRecord(item_id="qa-three-points", request_id="r1", text=THREE, level="l1",
                             scenario="s"),
               RequestRecord(item_id="qa-three-points", request_id="r2", text="1. one\n2. tw", level="l1",
                             scenario="s", error_class="truncated", finish_reason="length")]
    rows = score_records(records, ITEMS, ConstantEmbedder(), progress=False)
    assert [(r.compliant, r.truncated) for r in rows] == [(True, False), (None, True)]
    total = quality_block(rows)["total"]
    assert (total["structure_n"], total["structure_compliance"], total["truncated_n"]) == (1, 1.0, 1)

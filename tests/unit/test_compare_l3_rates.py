"""L3's low-groundedness and conflict rates in the comparison: the rows from known per-answer arrays
(two-proportion test, lower is better), and the records' ``extra.conflict`` through both readers."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from fourfold.fingerprint.rag import LOW_GROUNDEDNESS
from fourfold.reports.compare import BETTER, INCONCLUSIVE, WORSE, GroupSample, compare_groups
from fourfold.reports.records import read_record_table


def _rows(baseline: GroupSample, candidate: GroupSample) -> dict:
    """The rows of two A/B arms of one run (within-run variance is the basis of their verdicts)."""
    baseline.unit = candidate.unit = "arm"
    return {row.metric: row for row in compare_groups("l3:rag", baseline, candidate)}


def test_low_groundedness_rate_is_the_share_below_the_quality_block_s_threshold():
    assert LOW_GROUNDEDNESS == 0.6
    # baseline: 12 of 40 below 0.6 (0.6 itself is not below); candidate: 2 of 40
    base = GroupSample(groundedness=np.array([0.3] * 6 + [0.59] * 6 + [0.6] * 8 + [0.8] * 20))
    cand = GroupSample(groundedness=np.array([0.5, 0.599] + [0.75] * 38))
    row = _rows(base, cand)["low_groundedness_rate"]
    assert (row.baseline, row.candidate) == (pytest.approx(30.0), pytest.approx(5.0))
    assert row.delta == pytest.approx(-25.0) and row.unit == "%" and row.better == "lower"
    assert row.p_value < 0.05 and row.band == 0.5       # percentage points
    assert row.verdict == BETTER and (row.n_baseline, row.n_candidate) == (40, 40)
    assert row.ci_low < -25.0 < row.ci_high < 0          # percentage points
    assert _rows(cand, base)["low_groundedness_rate"].verdict == WORSE
    # the groundedness mean row is still there beside it
    assert _rows(base, cand)["groundedness_mean"].baseline == pytest.approx(base.groundedness.mean())


def test_conflict_rate_compares_the_share_of_requests_with_a_conflicting_context():
    base = GroupSample(conflict=np.array([1.0] * 10 + [0.0] * 30))
    cand = GroupSample(conflict=np.array([1.0] * 9 + [0.0] * 31))
    row = _rows(base, cand)["conflict_rate"]
    assert (row.baseline, row.candidate) == (pytest.approx(25.0), pytest.approx(22.5))
    assert row.verdict == INCONCLUSIVE and row.ci_low < -0.5 and row.ci_high > 0.5
    worse = _rows(base, GroupSample(conflict=np.array([1.0] * 30 + [0.0] * 10)))["conflict_rate"]
    assert worse.candidate == pytest.approx(75.0) and worse.verdict == WORSE and worse.better == "lower"
    one_side = _rows(base, GroupSample())["conflict_rate"]
    assert one_side.candidate is None and one_side.verdict == "n/a"


def test_no_rows_without_l3_data():
    plain = GroupSample(requests=3, ok=3, ttft_ms=np.array([1.0, 2.0, 3.0]))
    assert not {"conflict_rate", "low_groundedness_rate"} & set(_rows(plain, plain))


def _record(i: int, extra: dict) -> dict:
    return {"schema": 1, "level": "l3", "scenario": "rag", "variant": "", "item_id": f"q-{i:03d}",
            "warmup": False, "started_at": 1_700_000_000.0 + i, "status": 200, "error_class": "ok",
            "ttfb_ms": 5.0, "ttft_ms": 10.0, "e2e_ms": 50.0, "queue_ms": None, "output_tokens": 3,
            "terminal": True, "conn_reused": True, "chunk_offsets_ms": [10.0, 20.0, 50.0], "extra": extra}


@pytest.mark.parametrize("native", [True, False])
def test_both_readers_read_the_conflict_flag(tmp_path, native):
    extras = [{"conflict": True, "conflict_groups": ["cg-1"], "retrieved_ids": ["d1", "d2"]},
              {"retrieved_ids": ["d3"], "conflict": False}, {}, {"conflict": "yes"}, {"k": 3, "conflict": 1}]
    path = tmp_path / "records.jsonl"
    path.write_text("".join(json.dumps(_record(i, e)) + "\n" for i, e in enumerate(extras)))
    table = read_record_table(path, native=native)
    got = table.frame["conflict"].tolist()
    assert got[:2] == [1.0, 0.0] and math.isnan(got[2]) and math.isnan(got[3]) and got[4] == 1.0

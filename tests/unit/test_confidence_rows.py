"""Low-confidence answers and the character-bigram F1 as metrics: the quality block's share, the
comparison's rows (direction, verdict), scores.jsonl's columns as the report reads them, and
their SLO names (issue #23, part 4: "the console, the report and the SLO gate")."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from fourfold.errors import SLOSpecError
from fourfold.fingerprint.score import ScoreRow, summarize
from fourfold.gates.slo import metric_kind, parse_spec, parse_table
from fourfold.gates.slo_verdict import evaluate
from fourfold.measure.metric_names import by_name, markdown_table, resolve
from fourfold.reports.compare import BETTER, NA, NO_CHANGE, WORSE, GroupSample, compare_groups
from fourfold.reports.scores import confidence_columns, read_scores

ITEMS = np.array([f"item-{i % 10}" for i in range(40)], dtype=object)


def _rows(similarities: list[float | None], low: list[bool], f1: list[float | None]) -> list[ScoreRow]:
    return [ScoreRow(request_id=f"r{i}", item_id="x", similarity=s, low_confidence=lc, char_f1=f)
            for i, (s, lc, f) in enumerate(zip(similarities, low, f1))]


@pytest.mark.parametrize(("similarities", "low", "share", "n"), [
    ([0.9, 0.8, 0.7, 0.6], [False, False, False, True], 0.25, 1),
    ([0.9, None, 0.7, 0.6], [True, False, True, False], 0.6667, 2),    # 2 of the 3 answers with a similarity
    ([0.9, 0.8], [False, False], 0.0, 0),
    ([None, None], [False, False], None, 0),                            # no reference: no share
])
def test_quality_block_share(similarities: list[float | None], low: list[bool], share: float | None,
                             n: int) -> None:
    block = summarize(_rows(similarities, low, [0.5] * len(low)))
    assert (block["low_confidence_share"], block["low_confidence_n"]) == (share, n)
    assert block["char_f1_mean"] == 0.5


def _side(low: int, f1: float, answers: int = 40) -> GroupSample:
    rng = np.random.default_rng(int(f1 * 100) + low)
    return GroupSample(low_confidence=np.array([1.0] * low + [0.0] * (answers - low)),
                       char_f1=np.clip(rng.normal(f1, 0.03, answers), 0, 1), char_f1_items=ITEMS[:answers],
                       unit="arm")     # two A/B arms of one run: within-run variance is the basis


def _rows_of(baseline: GroupSample, candidate: GroupSample) -> dict[str, object]:
    return {row.metric: row for row in compare_groups("l1:saturation", baseline, candidate)}


def test_report_rows_direction_and_verdicts() -> None:
    rows = _rows_of(_side(0, 0.60), _side(20, 0.40))
    low, f1 = rows["low_confidence_share"], rows["char_f1_mean"]
    assert (low.unit, low.better, low.baseline, low.candidate) == ("%", "lower", 0.0, 50.0)
    assert low.verdict == WORSE                                   # more answers the model cannot read
    assert (f1.unit, f1.better, f1.paired) == ("F1", "higher", True)
    assert f1.candidate < f1.baseline and f1.verdict == WORSE
    better = _rows_of(_side(20, 0.40), _side(0, 0.60))
    assert better["low_confidence_share"].verdict == BETTER and better["char_f1_mean"].verdict == BETTER
    same = _rows_of(_side(1, 0.60), _side(1, 0.60))
    assert same["low_confidence_share"].verdict == NO_CHANGE


def test_no_rows_without_data_and_na_for_one_side() -> None:
    rows = _rows_of(GroupSample(), GroupSample())
    assert "low_confidence_share" not in rows and "char_f1_mean" not in rows
    rows = _rows_of(_side(5, 0.5), GroupSample())
    assert rows["low_confidence_share"].verdict == NA and rows["low_confidence_share"].baseline == 12.5
    assert rows["char_f1_mean"].verdict == NA


def test_scores_file_columns(tmp_path: Path) -> None:
    rows = [
        {"item_id": "a", "similarity": 0.9, "low_confidence": True, "char_f1": 0.7},
        {"item_id": "b", "similarity": 0.8, "low_confidence": False, "char_f1": 0.6},
        {"item_id": "c", "similarity": 0.7},                        # scored before the flag existed
        {"item_id": "d", "similarity": None, "low_confidence": False, "char_f1": None},
    ]
    path = tmp_path / "scores.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    frame = read_scores(path).frame
    assert frame is not None
    low = frame["low_confidence"].tolist()
    assert low[:2] == [1.0, 0.0] and math.isnan(low[2]) and math.isnan(low[3])
    assert math.isnan(frame["similarity"][0]) and frame["similarity"][1] == 0.8     # left out of the figures
    shares, f1, items = confidence_columns(frame)
    assert shares.tolist() == [1.0, 0.0] and f1.tolist() == [0.7, 0.6] and items.tolist() == ["a", "b"]


def test_registry_names_and_doc_rows() -> None:
    assert resolve("char_f1_mean") == (by_name("char_f1"), "mean")
    assert resolve("low_confidence_share") == (by_name("low_confidence_share"), None)
    table = markdown_table()
    assert "| `low_confidence_share` | fraction (report: %) |" in table
    assert "| `low_confidence_n` | answers |" in table \
        and "quality (mean; 4 decimals), report (`char_f1_mean`)" in table


def test_slo_names() -> None:
    assert metric_kind("low_confidence_share") == metric_kind("char_f1_mean") == "quality"
    slos = parse_spec("low_confidence_share<=10%, char_f1_mean>=0.5")
    assert [(s.metric, s.op, s.threshold) for s in slos] == [("low_confidence_share", "<=", 0.1),
                                                           ("char_f1_mean", ">=", 0.5)]
    # a bare number in a file: the share is a ceiling, the F1 a floor
    table = parse_table({"low_confidence_share": 0.1, "char_f1_mean": 0.5}, where="slo.toml")
    assert [s.op for s in table] == ["<=", ">="]
    with pytest.raises(SLOSpecError, match="low_confidence_n"):       # a count is no SLO name
        parse_spec("low_confidence_n<=1")


def test_slo_verdicts() -> None:
    quality = {"total": {"n": 4, "similarity_n": 3, "low_confidence_n": 1, "low_confidence_share": 0.25,
                         "char_f1_n": 4, "char_f1_mean": 0.62}, "by_scenario": {}}
    verdicts = evaluate(parse_spec("low_confidence_share<=0.1, char_f1_mean>=0.5, char_f1_mean>0.7"),
                        {"quality": quality})
    assert [(v.status, v.measured) for v in verdicts] == [("miss", 0.25), ("pass", 0.62), ("miss", 0.62)]
    assert evaluate(parse_spec("low_confidence_share<=30%"), {"quality": quality})[0].status == "pass"
    empty = {"total": {"n": 2, "similarity_n": 0, "low_confidence_n": 0, "low_confidence_share": None,
                       "char_f1_n": 0, "char_f1_mean": None}, "by_scenario": {}}
    verdicts = evaluate(parse_spec("low_confidence_share<=0.1, char_f1_mean>=0.5"), {"quality": empty})
    assert [v.status for v in verdicts] == ["no_data", "no_data"]
    assert all("no scored answer had a reference answer" in v.message for v in verdicts)

"""Cosine scoring and aggregation with hand-made vectors (pure, no model)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fourfold.fingerprint.score import (
    ScoreRow,
    cosine,
    cosine_matrix,
    distribution,
    groundedness,
    max_similarity,
    percentile,
    quality_block,
    summarize,
)

E1, E2, E3 = np.eye(3)
DIAG = np.array([1.0, 1.0, 0.0]) / math.sqrt(2)


@pytest.mark.parametrize(("a", "b", "expected"), [
    (E1, E1, 1.0),
    (E1, E2, 0.0),
    (E1, -E1, -1.0),
    (E1, DIAG, 1 / math.sqrt(2)),
    (np.array([3.0, 0, 0]), np.array([0.5, 0, 0]), 1.0),      # length does not matter
    (np.zeros(3), E1, 0.0),                                    # a zero vector scores 0
])
def test_cosine(a: np.ndarray, b: np.ndarray, expected: float) -> None:
    assert cosine(a, b) == pytest.approx(expected)


def test_cosine_matrix_shape_and_dimension_check() -> None:
    m = cosine_matrix(np.stack([E1, E2]), np.stack([E1, E2, E3]))
    assert m.shape == (2, 3)
    np.testing.assert_allclose(m, [[1, 0, 0], [0, 1, 0]])
    with pytest.raises(ValueError, match="dimension"):
        cosine_matrix(np.ones(3), np.ones(4))


def test_max_similarity_takes_the_best_reference() -> None:
    assert max_similarity(E1, np.stack([E2, DIAG, E3])) == pytest.approx(1 / math.sqrt(2))
    assert max_similarity(E1, np.stack([E2, E1])) == pytest.approx(1.0)
    assert max_similarity(E1, np.zeros((0, 3))) is None


def test_groundedness_max_and_mean() -> None:
    chunks = np.stack([E1, E2, E3])
    assert groundedness(E1, chunks) == pytest.approx(1.0)
    assert groundedness(E1, chunks, how="mean") == pytest.approx(1 / 3)
    assert groundedness(E1, np.zeros((0, 3))) is None
    with pytest.raises(ValueError, match="max"):
        groundedness(E1, chunks, how="median")


@pytest.mark.parametrize(("values", "pct", "expected"), [
    ([], 50, None),
    ([0.7], 5, 0.7),
    ([1, 2, 3, 4, 5], 50, 3),
    ([1, 2, 3, 4], 50, 2),
    ([5, 1, 4, 2, 3], 0, 1),
    ([5, 1, 4, 2, 3], 100, 5),
    (list(range(21)), 5, 1),
    ([0, 10], 5, 0),
])
def test_percentile_is_the_nearest_rank(values: list[float], pct: float, expected: float | None) -> None:
    got = percentile(values, pct)
    assert got == expected
    if values:       # the report's rule (numpy's inverted_cdf)
        assert got == float(np.percentile(values, pct, method="inverted_cdf"))


def test_distribution() -> None:
    dist = distribution([0.9, 0.8, 1.0, 0.7])
    assert dist.n == 4
    assert dist.mean == pytest.approx(0.85)
    assert dist.p50 == 0.8 and dist.p5 == 0.7
    assert distribution([]).mean is None


def _row(i: int, level: str, scenario: str, similarity: float | None, compliant: bool | None = None,
         chinese: bool = False, full: int = 0, half: int = 0, forced: bool = False) -> ScoreRow:
    return ScoreRow(request_id=f"r{i}", item_id="x", level=level, scenario=scenario, similarity=similarity,
                    requested_items=None if compliant is None else 5, compliant=compliant, chinese=chinese,
                    fullwidth_punct=full, halfwidth_punct=half, forced_length=forced)


def test_summarize_and_quality_block() -> None:
    rows = [
        _row(0, "l1", "saturation", 0.9, compliant=True),
        _row(1, "l1", "saturation", 0.8, compliant=False),
        _row(2, "l1", "saturation", 1.0, chinese=True, full=9, half=1),
        _row(3, "l3", "rag", 0.6, chinese=True, full=1, half=1, forced=True),
        _row(4, "l3", "rag", None),
    ]
    block = quality_block(rows)
    assert list(block["by_scenario"]) == ["l1:saturation", "l3:rag"]
    l1 = block["by_scenario"]["l1:saturation"]
    assert l1["n"] == 3 and l1["similarity_n"] == 3
    assert l1["similarity_mean"] == pytest.approx(0.9)
    assert l1["similarity_p50"] == pytest.approx(0.9)
    assert l1["structure_n"] == 2 and l1["structure_compliance"] == 0.5
    assert l1["chinese_n"] == 1 and l1["fullwidth_punct_share"] == 0.9
    l3 = block["by_scenario"]["l3:rag"]
    assert l3["n"] == 2 and l3["similarity_n"] == 1 and l3["similarity_mean"] == 0.6
    assert l3["structure_n"] == 0 and l3["structure_compliance"] is None
    assert l3["forced_length_n"] == 1
    total = block["total"]
    assert total["n"] == 5 and total["similarity_n"] == 4
    assert total["similarity_mean"] == pytest.approx(0.825)
    # pooled marks, not mean of shares
    assert total["fullwidth_punct_share"] == pytest.approx(10 / 12, abs=1e-4)
    assert summarize([])["similarity_mean"] is None


def test_score_row_serialises_rounded() -> None:
    row = ScoreRow(request_id="r", item_id="i", similarity=0.123456789, fullwidth_share=2 / 3)
    data = row.to_dict()
    assert data["similarity"] == 0.123457 and data["fullwidth_share"] == 0.666667
    assert row.group == ":"

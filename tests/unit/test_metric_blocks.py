"""measure.metric_names against the blocks of summary.json it describes: every number of the L4
``sessions`` block and the L3 ``rag`` block is a registered metric of that block (one name
everywhere; a block's own key only where the block's name says the rest), and the report's rows
carry the registry's kinds (a ratio is a percentage there)."""

from __future__ import annotations

import pytest

from fourfold.levels.l4_stats import SessionStats
from fourfold.measure.metric_names import (
    METRICS,
    WHERE,
    by_name,
    in_block,
    markdown_table,
    resolve,
    summary_value,
)
from fourfold.measure.rag import RagStats, annotate
from fourfold.measure.record import RequestRecord
from fourfold.reports.compare import METRICS as ROWS


def _sessions() -> dict:
    stats = SessionStats()
    for variant in ("A", "B"):
        one = stats.variant(variant)
        for _ in range(4):
            one.started()
        one.ended("completed", 3, 5000.0)
        one.ended("max_turns", 6, 9000.0)
        one.ended("abandoned", 1, 800.0, "ttft")
        one.cut()
    return stats.summary()


def _rag() -> dict:
    stats = RagStats(k=2)
    for item, retrieved, gold in (("q1", ["d1", "d2"], ["d1"]), ("q2", ["d3"], ["d4"]),
                                  ("q1", ["d1", "d2"], ["d1"])):
        record = RequestRecord(level="l3", scenario="rag", item_id=item, ttft_ms=40.0, e2e_ms=100.0,
                               output_tokens=5,
                               server_timing={"retrieve": 1.0, "generate": 90.0, "total": 95.0})
        annotate(record, retrieved, gold, 2, {"d1": {"g": "x"}, "d2": {"g": "y"}})
        stats.add(record)
    return stats.summary()


@pytest.mark.parametrize("where, blocks", [
    ("sessions", lambda: [*_sessions()["by_variant"].values(), _sessions()["total"]]),
    ("rag", lambda: [_rag()]),
])
def test_every_number_of_the_block_is_a_registered_metric_of_it(where, blocks):
    registered = {m.name for m in METRICS if where in m.where}
    for block in blocks():
        found, unknown = in_block(block, where)
        assert unknown == [], \
            f"numbers of the {where} block with no definition in measure.metric_names: {unknown}"
        assert {m.name for m in found.values()} == registered     # and the registry names nothing it lacks
        for key, metric in found.items():
            assert key == metric.summary_key and summary_value(block, metric.name) == block[key]
            if metric.kind == "distribution" and metric.where[0] == where:    # its statistics are its block's
                assert set(block[key]) == set(metric.stats)
            elif metric.kind == "distribution":                              # (ttft_ms, e2e_ms: fewer in rag)
                assert set(block[key]) <= set(metric.stats)


def test_the_sessions_block_s_own_keys_and_values():
    total = _sessions()["total"]
    assert summary_value(total, "sessions_ended") == 6 and summary_value(total, "sessions_completed") == 2
    assert summary_value(total, "completion_rate") == pytest.approx(1 / 3) \
        and summary_value(total, "rounds_mean") == 10 / 3
    assert summary_value(total, "session_duration_p95") == total["duration_ms"]["p95"]
    assert summary_value({"requests": 3}, "sessions_ended") is None          # another block has no "ended"
    assert by_name("sessions_ended").key == "ended" \
        and resolve("sessions_ended") == (by_name("sessions_ended"), None)


def test_one_name_for_retrieval_quality_in_the_rag_block_the_records_and_the_report():
    rag = _rag()
    assert rag["recall_at_k"] == pytest.approx(2 / 3) and rag["precision_at_k"] == pytest.approx(1 / 3)
    assert "context_precision" not in rag and "recall_at_2" not in rag
    assert {"recall_at_k", "precision_at_k"} <= {row.key for row in ROWS}
    assert summary_value(rag, "ttft_p95") == rag["ttft_ms"]["p95"] and summary_value(rag, "itl_p95") is None


def test_report_rows_carry_the_registry_s_kind():
    for row in ROWS:
        found = resolve(row.key)
        assert found is not None, row.key
        metric = found[0]
        assert (row.unit == "%") == (metric.kind == "ratio"), \
            f"{row.key}: a {metric.kind} shown in {row.unit}"
        if row.unit != "%":
            assert row.unit in (metric.unit, "tok/s", "req/s", "ms"), row.key


def test_every_metric_says_where_it_is_shown_in_known_places():
    for metric in METRICS:
        assert set(metric.where) <= set(WHERE), metric.name
        assert ("report" in metric.where) == bool(metric.report), metric.name
        assert not metric.key or len([w for w in metric.where if w != "report"]) == 1, metric.name


def test_the_table_says_where_and_how():
    table = markdown_table()
    assert "| sessions as `ended`, report |" in table
    assert "quality (mean, p5, p50; 4 decimals), report (`similarity_mean`, `similarity_p5`) |" in table
    assert "| `goodput_ratio` | fraction |" in table and "| `error_rate` | fraction (report: %) |" in table

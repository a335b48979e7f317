"""Honest token timing (issue 33, part 5): the tokens each chunk carried, the per-token ITL, the client's
count beside the server's; the same numbers in summary.json (LLMStats) and in the report (records.jsonl
read back)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fourfold.measure.record import RequestRecord
from fourfold.measure.rhythm import chunk_tokens, gap_tokens, token_gaps
from fourfold.measure.stats import LLMStats
from fourfold.measure.tokentiming import (
    is_discrepant,
    is_discrepant_array,
    multi_token_chunks,
    streamed_tokens,
    streamed_tokens_array,
)
from fourfold.reports.load import group_samples, load_run


def test_a_chunk_of_k_tokens_gives_k_gaps_of_a_kth():
    values, weights = token_gaps([100, 140, 180, 220], 16)          # 4 chunks of 4 tokens, 40 ms apart
    assert values.tolist() == [10.0, 10.0, 10.0] and weights.tolist() == [4, 4, 4]
    values, weights = token_gaps([100, 110, 120], 3)                # one token a chunk: the chunk gaps
    assert values.tolist() == [10.0, 10.0] and weights.tolist() == [1, 1]
    values, weights = token_gaps([100, 110, 120], 1)                # fewer tokens than chunks: one each
    assert values.tolist() == [10.0, 10.0] and weights.tolist() == [1, 1]
    assert token_gaps([100], 9)[0].size == 0                        # one chunk: its tokens are the TTFT's


@settings(max_examples=200, deadline=None)
@given(tokens=st.integers(0, 500), chunks=st.integers(1, 120))
def test_the_spread_is_the_one_tokens_per_second_uses(tokens: int, chunks: int):
    spread = chunk_tokens(max(tokens, chunks), chunks)
    k = gap_tokens(np.arange(chunks - 1), np.int64(tokens), np.int64(chunks))
    assert k.tolist() == spread[1:] and sum(spread) == max(tokens, chunks)
    assert multi_token_chunks(tokens, chunks) == sum(n > 1 for n in spread)


def test_reasoning_the_server_never_streamed_is_not_spread_over_the_chunks():
    assert streamed_tokens(1500, 1490, 0) == 10           # o-series: a count, no reasoning chunk
    assert streamed_tokens(300, 120, 40) == 300           # streamed reasoning stays
    assert streamed_tokens_array(np.array([1500.0, 300.0, np.nan]), np.array([1490.0, 120.0, np.nan]),
                                 np.array([0.0, 40.0, np.nan])).tolist() == [10.0, 300.0, 0.0]


@pytest.mark.parametrize("server, client, expected", [
    (100, 100, False), (110, 100, False), (111, 100, True), (89, 100, True), (400, 100, True),
    (5, None, None), (5, 0, None)])
def test_a_discrepancy_is_more_than_ten_percent_of_the_client_count(server, client, expected):
    assert is_discrepant(server, client) is expected
    array = is_discrepant_array(np.array([server], dtype=float),
                                np.array([np.nan if client is None else client], dtype=float))
    assert (None if np.isnan(array[0]) else bool(array[0])) is expected


def _record(i: int, offsets: list[float], tokens: int, client: int | None, **kw) -> RequestRecord:
    record = RequestRecord(level="l1", scenario="saturation", item_id=f"q{i}", started_at=1_700_000_000.0 + i,
                           status=200, ttfb_ms=offsets[0] - 1, ttft_ms=offsets[0], e2e_ms=offsets[-1],
                           chunk_offsets_ms=offsets, content_chunks=len(offsets), output_tokens=tokens,
                           output_tokens_source="usage", terminal=True, finish_reason="stop",
                           client_output_tokens=client, **kw)
    record.multi_token_chunks = multi_token_chunks(
        streamed_tokens(tokens, record.reasoning_tokens, record.reasoning_chunks), len(offsets))
    return record


def test_summary_and_report_agree_on_per_token_itl_and_the_counts(tmp_path):
    records = [
        *(_record(i, [50.0 + 40 * j for j in range(10)], 40, 10) for i in range(30)),    # 4 tokens an event
        *(_record(30 + i, [50.0 + 10 * j for j in range(10)], 10, 10) for i in range(30)),   # one an event
    ]
    stats = LLMStats()
    for record in records:
        stats.add_record(record)
    group = stats.summary()["groups"][0]
    assert group["itl_ms"]["p90"] == pytest.approx(40, rel=0.02)       # half the gaps are 40 ms ...
    # ... but 4 tokens of 10 ms each: 30 x 9 x 4 token gaps of 10 ms, 30 x 9 of 10 ms
    assert group["itl_token_ms"]["p99"] == pytest.approx(10, rel=0.02)
    assert group["itl_token_ms"]["count"] == 1350
    assert group["multi_token_chunk_share"] == 0.5
    assert group["token_discrepancy_share"] == 0.5 and group["token_count_ratio"] == pytest.approx(2.5)

    run = tmp_path / "run"
    run.mkdir()
    (run / "records.jsonl").write_text("".join(r.to_json() + "\n" for r in records))
    (run / "meta.json").write_text(json.dumps({"record_schema": 1, "label": "t"}))
    sample = group_samples([load_run(run)])["l1:saturation"]
    assert sample.itl_token is not None and sample.itl_token.count == 1350
    assert sample.itl_token.quantiles((0.99,))[0] == pytest.approx(group["itl_token_ms"]["p99"], rel=0.01)
    assert (sample.multi_token_chunks, sample.content_chunks) == (300, 600)
    assert (sample.tokens_compared, sample.tokens_discrepant) == (60, 30)
    assert sample.tokens_server_total / sample.tokens_client_total == pytest.approx(2.5)
    assert sum(len(g) for g in sample.itl_token.sample) == 1350      # every record sampled, per token


def test_reasoning_and_answer_speeds_are_each_parts_own():
    """120 reasoning tokens 10 ms apart, then 40 answer tokens 20 ms apart: 100 and 50 tokens/s."""
    from fourfold.measure.metrics import answer_tps, reasoning_tps, reasoning_tps_array
    offsets = [50.0 + 10 * j for j in range(121)] + [1250.0 + 20 * j for j in range(1, 40)]
    record = RequestRecord(ttft_ms=50.0, ttfo_ms=1250.0, e2e_ms=offsets[-1], chunk_offsets_ms=offsets,
                           output_tokens=160, reasoning_tokens=120, reasoning_chunks=120)
    assert reasoning_tps(record) == pytest.approx(100.0) and answer_tps(record) == pytest.approx(50.0)
    assert reasoning_tps_array(np.array([50.0, 50.0]), np.array([1250.0, 50.0]), np.array([120.0, 0.0]),
                               np.array([120.0, 0.0]))[0] == pytest.approx(100.0)
    hidden = RequestRecord(ttft_ms=900.0, ttfo_ms=900.0, e2e_ms=1000.0, output_tokens=500,
                           reasoning_tokens=490)
    assert reasoning_tps(hidden) is None         # reasoning never streamed: no span to time it by

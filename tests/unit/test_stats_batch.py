"""LLMStats aggregates records in batches, and nothing read from it is ever behind."""

from __future__ import annotations

import json

import pytest

from fourfold.measure.record import RequestRecord
from fourfold.measure.stats import LLMStats


def _records(n: int) -> list[RequestRecord]:
    out = []
    for i in range(n):
        offsets = [50.0 + 10.0 * j + (i % 3) for j in range(40 + i % 7)]
        out.append(RequestRecord(level="l1" if i % 4 else "l2", scenario="s", started_at=1_796_000_000.0 + i,
                                 status=200, chunk_offsets_ms=offsets, content_chunks=len(offsets),
                                 output_tokens=len(offsets), ttft_ms=offsets[0], e2e_ms=offsets[-1],
                                 terminal=True, finish_reason="length"))
    return out


@pytest.mark.parametrize("n", [1, 3, 4, 5, 15, 16, 17, 40])
def test_batched_aggregates_equal_record_by_record(n: int, monkeypatch: pytest.MonkeyPatch) -> None:
    batched = LLMStats()
    for record in _records(n):
        batched.add_record(record)
    monkeypatch.setattr(LLMStats, "BATCH", 1)
    one_by_one = LLMStats()
    for record in _records(n):
        one_by_one.add_record(record)
    assert json.dumps(batched.summary(), sort_keys=True) == json.dumps(one_by_one.summary(), sort_keys=True)
    assert batched.to_wire() == one_by_one.to_wire()


def test_every_read_sees_every_record() -> None:
    stats = LLMStats()
    records = _records(LLMStats.BATCH + 1)
    for record in records:
        stats.add_record(record)
    assert len(stats._pending) == 1                       # the batch was aggregated, one waits
    expected_l1 = sum(r.level == "l1" for r in records)
    assert stats.group("l1", "s").counts["requests"] == expected_l1   # ... until read
    assert not stats._pending
    stats.add_record(records[0])
    assert stats.total().counts["requests"] == len(records) + 1
    stats.add_record(records[1])
    master = LLMStats()
    master.merge_wire(stats.take_wire())                   # a worker's delta holds them all ...
    assert master.total().counts["requests"] == len(records) + 2
    assert not stats.groups and stats.total().counts["requests"] == 0    # ... and then it is gone


def test_reset_drops_what_is_pending() -> None:
    stats = LLMStats()
    for record in _records(3):
        stats.add_record(record)
    stats.reset()
    assert stats.groups == {} and stats.total().counts["requests"] == 0

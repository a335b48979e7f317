from __future__ import annotations

import json
import random
from typing import Any

import pytest

from fourfold.measure.record import RequestRecord
from fourfold.measure.stats import HISTOGRAMS, LLMStats, end_s, is_interrupted, meets_slo, tokens_by_second


def rec(**kw: Any) -> RequestRecord:
    """An ok, fully streamed request unless told otherwise."""
    base: dict[str, Any] = dict(level="L1", scenario="chat", started_at=1000.0, status=200, ttfb_ms=10.0,
                                ttft_ms=100.0, e2e_ms=400.0, chunk_offsets_ms=[100.0, 200.0, 300.0, 400.0],
                                output_tokens=4, output_tokens_source="usage", content_chunks=4,
                                terminal=True)
    base.update(kw)
    if "chunk_offsets_ms" in kw and "content_chunks" not in kw:
        base["content_chunks"] = len(base["chunk_offsets_ms"])
    return RequestRecord(**base)


# (case, record, expected counters; every counter not named must be 0 apart from requests=1)
CASES = [
    ("ok stream", rec(), {"ok": 1}),
    ("one stall", rec(chunk_offsets_ms=[100.0, 120.0, 140.0, 400.0], e2e_ms=400.0),
     {"ok": 1, "stalls": 1, "requests_with_stall": 1}),
    ("two stalls, gap == threshold is no stall",
     rec(chunk_offsets_ms=[100.0, 250.0, 500.0, 900.0], e2e_ms=900.0),
     {"ok": 1, "stalls": 2, "requests_with_stall": 1}),
    ("429", rec(status=429, error_class="rate_limited", ttfb_ms=5.0, ttft_ms=None, e2e_ms=5.0,
                chunk_offsets_ms=[], output_tokens=0, terminal=False), {"failures": 1}),
    ("interrupted class", rec(error_class="interrupted", terminal=False, chunk_offsets_ms=[100.0, 200.0],
                              output_tokens=2, output_tokens_source="chunks"),
     {"failures": 1, "interrupted": 1, "output_tokens_estimated": 1}),
    ("read timeout after first byte", rec(error_class="read_timeout", terminal=False),
     {"failures": 1, "interrupted": 1}),
    ("no terminal event, no error", rec(terminal=False), {"ok": 1, "interrupted": 1}),
    ("connect error", rec(status=0, error_class="connect_error", ttfb_ms=None, ttft_ms=None, e2e_ms=None,
                          chunk_offsets_ms=[], output_tokens=0, terminal=False), {"failures": 1}),
    ("truncated is ok", rec(error_class="truncated", finish_reason="length"), {"ok": 1}),
    ("tokens from chunks", rec(output_tokens_source="chunks"), {"ok": 1, "output_tokens_estimated": 1}),
    ("reused connection", rec(conn_reused=True), {"ok": 1, "conn_reused": 1}),
    ("new connection", rec(conn_reused=False), {"ok": 1, "conn_new": 1}),
]


@pytest.mark.parametrize(("case", "record", "expected"), CASES, ids=[c[0] for c in CASES])
def test_counters_per_record(case: str, record: RequestRecord, expected: dict[str, int]) -> None:
    stats = LLMStats()
    stats.add_record(record)
    counts = dict(stats.group("L1", "chat").counts)
    assert counts.pop("requests") == 1
    assert counts.pop("output_tokens_total") == record.output_tokens
    assert counts.pop("good") == int(record.ok)  # no SLO given: every ok request is good
    assert counts.pop("content_chunks") == (len(record.chunk_offsets_ms) if record.ok else 0)
    assert {k: v for k, v in counts.items() if v} == expected
    group = stats.group("L1", "chat")
    assert group.errors == {record.error_class: 1}
    assert group.statuses == {record.status: 1}


def test_histograms_take_ok_requests_only() -> None:
    stats = LLMStats()
    stats.add_record(rec(chunk_offsets_ms=[100.0, 120.0, 140.0, 400.0], ttfo_ms=100.0))   # gaps 20/20/260
    stats.add_record(rec(status=503, error_class="http_5xx", ttft_ms=None, e2e_ms=3.0, ttfb_ms=3.0,
                         chunk_offsets_ms=[], output_tokens=0, terminal=False, queue_ms=7.0))
    h = stats.group("L1", "chat").hists
    # ttfb, ttft, ttfo, itl, tpot, e2e, output_tokens, queue, request_tps, jitter, reasoning_ms,
    # reasoning_tokens, answer_tps (no reasoning: the answer is the whole output), itl_token (one a chunk),
    # reasoning_tps
    assert [h[name].count for name in HISTOGRAMS] == [1, 1, 1, 3, 1, 1, 1, 2, 1, 1, 0, 0, 1, 3, 0]
    assert h["answer_tps"].quantile(0.5) == pytest.approx(h["request_tps"].quantile(0.5), rel=0.005)
    assert h["tpot_ms"].quantile(0.5) == pytest.approx((400.0 - 100.0) / 3, rel=0.005)
    assert h["request_tps"].quantile(0.5) == pytest.approx(1000 / 100.0, rel=0.005)
    assert h["itl_ms"].max == pytest.approx(260.0) and h["itl_ms"].min == pytest.approx(20.0)
    assert h["e2e_ms"].max == 400.0 and h["queue_ms"].max == 7.0


def test_goodput_against_slo() -> None:
    slo = {"ttft_ms": 450, "e2e_ms": 1400}
    stats = LLMStats(slo_ms=slo)
    records = [rec(ttft_ms=450.0, e2e_ms=1400.0),                          # on the limit: good
               rec(ttft_ms=500.0, e2e_ms=900.0),                           # ttft too slow
               rec(ttft_ms=100.0, e2e_ms=1500.0),                          # e2e too slow
               rec(error_class="http_5xx", status=500, ttft_ms=10.0, e2e_ms=20.0),  # fast failure
               rec(started_at=1001.0, e2e_ms=1000.0)]                      # good
    for r in records:
        stats.add_record(r)
    total = stats.summary()["total"]
    assert total["good"] == 2 and total["goodput_ratio"] == pytest.approx(2 / 5)
    assert total["wall_s"] == pytest.approx(2.0)       # 1000.0 -> 1001.0 + 1.0
    assert total["goodput_rps"] == pytest.approx(1.0)
    assert meets_slo(rec(output_tokens=1, chunk_offsets_ms=[100.0]), {"tpot_ms": 5, "itl_ms": 1})  # vacuous
    assert not meets_slo(rec(chunk_offsets_ms=[100.0, 400.0]), {"itl_ms": 250})
    assert not meets_slo(rec(ttft_ms=None), {"ttft_ms": 1e9})
    with pytest.raises(ValueError, match="valid: ttfb_ms"):
        LLMStats(slo_ms={"p99_ttft": 1})


def test_rates_and_summary_shape() -> None:
    stats = LLMStats()
    stats.add_record(rec(started_at=1000.0, e2e_ms=1000.0, output_tokens=10, conn_reused=False))
    stats.add_record(rec(started_at=1001.0, e2e_ms=1000.0, output_tokens=10, conn_reused=True))
    stats.add_record(rec(started_at=1001.5, e2e_ms=500.0, output_tokens=0, error_class="interrupted",
                         terminal=False, chunk_offsets_ms=[100.0, 400.0]))
    stats.add_record(rec(scenario="other", started_at=1000.0, e2e_ms=4000.0, output_tokens=40))
    summary = stats.summary()
    assert [(g["level"], g["scenario"]) for g in summary["groups"]] == [("L1", "chat"), ("L1", "other")]
    chat = summary["groups"][0]
    assert chat["wall_s"] == pytest.approx(2.0)
    assert chat["output_tps"] == pytest.approx(10.0) and chat["request_rps"] == pytest.approx(1.5)
    assert chat["error_rate"] == pytest.approx(1 / 3) and chat["interruption_rate"] == pytest.approx(1 / 3)
    assert chat["stall_rate"] == pytest.approx(1 / 3)   # 300 ms gap in the interrupted stream
    assert chat["conn_reuse"] == pytest.approx(0.5)
    assert chat["errors"] == {"interrupted": 1, "ok": 2} and chat["statuses"] == {"200": 3}
    assert set(chat["ttft_ms"]) == {"count", "mean", "min", "max", "p50", "p90", "p95", "p99"}
    total = summary["total"]
    assert (total["level"], total["requests"], total["output_tokens_total"]) == ("Aggregated", 4, 60)
    assert total["wall_s"] == pytest.approx(4.0) and total["output_tps"] == pytest.approx(15.0)
    json.dumps(summary, allow_nan=False)  # JSON-friendly
    assert summary["histogram_alpha"] == 0.005


def test_empty_stats_summary() -> None:
    summary = LLMStats().summary()
    assert summary["groups"] == [] and summary["total"]["requests"] == 0
    assert summary["total"]["output_tps"] is None and summary["total"]["ttft_ms"]["p99"] is None


def test_warmup_records_are_skipped() -> None:
    stats = LLMStats()
    stats.add_record(rec(warmup=True))
    assert stats.groups == {} and stats.summary()["total"]["requests"] == 0


def test_tokens_per_second_series() -> None:
    # 8 usage tokens over 4 chunks -> 2 per chunk; chunks at 1000.1, 1000.9, 1001.1, 1002.5 s
    assert tokens_by_second(rec(output_tokens=8, chunk_offsets_ms=[100.0, 900.0, 1100.0, 2500.0])) == {
        1000: 4, 1001: 2, 1002: 2}
    assert tokens_by_second(rec(output_tokens=5, chunk_offsets_ms=[100.0, 1100.0])) == {1000: 2, 1001: 3}
    assert tokens_by_second(rec(output_tokens=7, chunk_offsets_ms=[], started_at=1000.5,
                                e2e_ms=3000.0)) == {1003: 7}
    stats = LLMStats()
    stats.add_record(rec(output_tokens=8, chunk_offsets_ms=[100.0, 900.0, 1100.0, 2500.0], e2e_ms=2500.0))
    stats.add_record(rec(started_at=1003.2, output_tokens=3, chunk_offsets_ms=[50.0, 60.0, 70.0],
                         ttft_ms=50.0, e2e_ms=70.0, error_class="read_timeout"))
    series = stats.series()
    assert series["t_s"] == [1000, 1001, 1002, 1003]
    assert series["output_tokens"] == [4, 2, 2, 3]
    assert series["finished"] == [0, 0, 1, 1] and series["failures"] == [0, 0, 0, 1]
    assert series["ttft_count"] == [1, 0, 0, 0] and series["ttft_mean_ms"] == [100.0, None, None, None]
    assert sum(series["output_tokens"]) == stats.summary()["total"]["output_tokens_total"]
    assert stats.series("L1", "chat") == series and stats.series("nope")["t_s"] == []


def test_pure_helpers() -> None:
    assert end_s(rec(started_at=10.0, e2e_ms=2500.0)) == 12.5
    assert end_s(rec(started_at=10.0, e2e_ms=None, ttft_ms=None, chunk_offsets_ms=[], ttfb_ms=300.0)) == 10.3
    assert not is_interrupted(rec(status=429, error_class="rate_limited", terminal=False))


def _random_records(n: int, seed: int) -> list[RequestRecord]:
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        ttft = rnd.lognormvariate(4.5, 0.5)
        offsets = [ttft]
        for _ in range(rnd.randint(0, 40)):
            offsets.append(offsets[-1] + rnd.choice([rnd.uniform(5, 40), rnd.uniform(100, 400)]))
        error = rnd.choices(["ok", "interrupted", "rate_limited", "truncated", "http_5xx"],
                            [80, 5, 5, 5, 5])[0]
        out.append(rec(level=rnd.choice(["L1", "L2"]), scenario=rnd.choice(["chat", "rag"]),
                       started_at=1_700_000_000 + i * 0.05 + rnd.random(), ttft_ms=ttft, e2e_ms=offsets[-1],
                       chunk_offsets_ms=offsets, output_tokens=len(offsets) * rnd.randint(1, 3),
                       output_tokens_source=rnd.choice(["usage", "chunks"]), error_class=error,
                       status={"rate_limited": 429, "http_5xx": 502}.get(error, 200),
                       terminal=error in ("ok", "truncated"), conn_reused=rnd.choice([True, False, None]),
                       queue_ms=rnd.choice([0.0, rnd.uniform(0, 50)]), warmup=rnd.random() < 0.02))
    return out


def _assert_same(a: LLMStats, b: LLMStats) -> None:
    assert set(a.groups) == set(b.groups)
    for key, ga in a.groups.items():
        gb = b.groups[key]
        assert ga.counts == gb.counts and ga.errors == gb.errors and ga.statuses == gb.statuses
        assert (ga.first_start, ga.last_end) == (gb.first_start, gb.last_end)
        for name in HISTOGRAMS:
            assert ga.hists[name] == gb.hists[name], name          # buckets, counts, min, max
            assert ga.hists[name].sum == pytest.approx(gb.hists[name].sum, rel=1e-9)
        assert sorted(ga.per_second) == sorted(gb.per_second)
        for sec, slot in ga.per_second.items():
            assert slot[:4] == gb.per_second[sec][:4] and slot[5] == gb.per_second[sec][5]
            assert slot[4] == pytest.approx(gb.per_second[sec][4])


@pytest.mark.parametrize("codec", ["none", "json", "msgpack"])
def test_two_worker_wire_merge_equals_single_aggregation(codec: str) -> None:
    records = _random_records(600, seed=5)
    single = LLMStats(slo_ms={"ttft_ms": 120})
    for r in records:
        single.add_record(r)

    def ship(wire: dict[str, Any]) -> dict[str, Any]:
        if codec == "json":
            return json.loads(json.dumps(wire))
        if codec == "msgpack":
            msgpack = pytest.importorskip("msgpack")
            return msgpack.loads(msgpack.dumps(wire), strict_map_key=False)  # as Locust's rpc does
        return wire

    master = LLMStats(slo_ms={"ttft_ms": 120})
    workers = [LLMStats(slo_ms={"ttft_ms": 120}) for _ in range(2)]
    for i, r in enumerate(records):
        workers[i % 2].add_record(r)
        if i % 97 == 0:  # report_to_master ticks: ship the delta, then start afresh
            master.merge_wire(ship(workers[i % 2].take_wire()))
    for worker in workers:
        master.merge_wire(ship(worker.take_wire()))
        assert worker.groups == {}
    _assert_same(master, single)
    assert master.summary()["total"]["ttft_ms"]["p99"] == single.summary()["total"]["ttft_ms"]["p99"]
    assert _rounded(master.summary()) == _rounded(single.summary())   # means: float addition order


def _rounded(value: Any) -> Any:
    if isinstance(value, float):
        return float(f"{value:.9g}")
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return value


def test_merge_wire_rejects_mismatched_settings() -> None:
    worker = LLMStats(stall_threshold_ms=100)
    worker.add_record(rec())
    with pytest.raises(ValueError, match="stall threshold"):
        LLMStats().merge_wire(worker.to_wire())
    LLMStats().merge_wire({})  # an old or empty report is a no-op

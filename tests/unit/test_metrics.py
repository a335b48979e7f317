"""measure.metrics: each scalar form and its vectorised twin give the same numbers, bit for bit, on
random records (the edge cases included); measure.metric_names: the registry names every number
the report and summary.json show."""

from __future__ import annotations

import dataclasses
import random
from typing import Any

import numpy as np
import pytest

from fourfold.gates.slo import LATENCY_BASES, QUALITY_METRICS, RATE_METRICS, THROUGHPUT_METRICS
from fourfold.measure import metrics as m
from fourfold.measure.histogram import (
    LogHistogram,
    bucket_keys,
    bucket_quantiles,
    bucket_values,
    exact_quantile,
)
from fourfold.measure.metric_names import METRICS, by_name, resolve, summary_value
from fourfold.measure.record import ERROR_CLASSES, RequestRecord
from fourfold.measure.stats import LLMStats
from fourfold.reports.compare import METRICS as ROWS
from fourfold.reports.compare import GroupSample


def _random_records(n: int, seed: int) -> list[RequestRecord]:
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        ttft = rnd.choice([None, round(rnd.lognormvariate(4.5, 0.6), 3)])
        offsets: list[float] = []
        if ttft is not None and rnd.random() < 0.9:
            offsets = [ttft]
            for _ in range(rnd.randint(0, 30)):
                offsets.append(round(offsets[-1]
                                     + rnd.choice([rnd.uniform(0.0005, 40), 150.0, rnd.uniform(100, 400)]),
                                     3))
        e2e = rnd.choice([None, offsets[-1] if offsets else round(rnd.uniform(1, 500), 3)])
        tokens = rnd.choice([0, 1, len(offsets), 2 * len(offsets) + 1, rnd.randint(0, 90)])
        out.append(RequestRecord(
            started_at=1_700_000_000 + i * 0.37 + rnd.random(),
            status=rnd.choice([0, 200, 200, 200, 429, 503, 204]),
            error_class=rnd.choice(ERROR_CLASSES), ttfb_ms=rnd.choice([None, round(rnd.uniform(0.5, 30), 3)]),
            ttft_ms=ttft, e2e_ms=e2e, chunk_offsets_ms=offsets, output_tokens=tokens,
            terminal=rnd.random() < 0.7, queue_ms=rnd.choice([0.0, round(rnd.uniform(0, 80), 3)])))
    return out


RECORDS = _random_records(3000, seed=17)


def _column(name: str) -> np.ndarray:
    return np.array([np.nan if getattr(r, name) is None else getattr(r, name) for r in RECORDS],
                    dtype=np.float64)


def _same(vector: np.ndarray, scalars: list[Any]) -> None:
    expected = np.array([np.nan if v is None else v for v in scalars], dtype=np.float64)
    assert np.array_equal(np.asarray(vector, dtype=np.float64), expected, equal_nan=True)   # bit for bit


def test_ok_and_interrupted():
    classes = np.array([r.error_class for r in RECORDS], dtype=object)
    ok = m.ok_array(classes)
    assert ok.tolist() == [r.ok for r in RECORDS]
    interrupted = m.interrupted_array(classes, np.array([r.status for r in RECORDS]), _column("ttfb_ms"),
                                      np.array([r.terminal for r in RECORDS]))
    assert interrupted.tolist() == [m.is_interrupted(r) for r in RECORDS]
    assert 0 < interrupted.sum() < len(RECORDS)


def test_tpot():
    tpot = m.tpot_ms_array(_column("ttft_ms"), _column("e2e_ms"), _column("output_tokens"))
    _same(tpot, [m.tpot_ms(r) for r in RECORDS])
    assert m.request_tps(20.0) == 50.0 and m.request_tps(0.0) is None and m.request_tps(None) is None


def _last_chunk() -> np.ndarray:
    return np.array([r.chunk_offsets_ms[-1] if r.chunk_offsets_ms else np.nan for r in RECORDS])


def test_end_time():
    offset = m.end_offset_ms_array(_column("e2e_ms"), _column("ttft_ms"), _column("ttfb_ms"), _last_chunk())
    _same(offset, [m.end_offset_ms(r) for r in RECORDS])
    _same(_column("started_at") + offset / 1000, [m.end_s(r) for r in RECORDS])


@pytest.mark.parametrize("slo", [{}, {"ttft_ms": 110.0}, {"itl_ms": 150.0, "tpot_ms": 20.0},
                                 {"e2e_ms": 300.0, "ttfb_ms": 15.0, "queue_ms": 40.0}])
def test_goodput(slo):
    columns = {"ttfb_ms": _column("ttfb_ms"), "ttft_ms": _column("ttft_ms"), "e2e_ms": _column("e2e_ms"),
               "queue_ms": _column("queue_ms"),
               "itl_ms": np.array([np.nan if (g := m.max_gap_ms(r)) is None else g for r in RECORDS]),
               "tpot_ms": m.tpot_ms_array(_column("ttft_ms"), _column("e2e_ms"), _column("output_tokens"))}
    ok = np.array([r.ok for r in RECORDS])
    good = m.meets_slo_array(ok, columns, slo)
    assert good.tolist() == [m.meets_slo(r, slo) for r in RECORDS]
    assert 0 < good.sum() <= ok.sum()


def test_goodput_names_the_valid_metrics():
    with pytest.raises(ValueError, match="valid: ttfb_ms, ttft_ms, ttfo_ms, itl_ms"):
        m.check_slo({"ttft_p99": 1})


def test_tokens_by_second():
    lens = np.array([len(r.chunk_offsets_ms) for r in RECORDS])
    flat = np.array([o for r in RECORDS for o in r.chunk_offsets_ms])
    end = np.array([m.end_s(r) for r in RECORDS])
    seconds, tokens = m.token_seconds_array(_column("started_at"), end, _column("output_tokens"), lens, flat)
    vector: dict[int, int] = {}
    for sec, n in zip(seconds.tolist(), tokens.tolist(), strict=True):
        vector[sec] = vector.get(sec, 0) + n
    scalar: dict[int, int] = {}
    for r in RECORDS:
        for sec, n in m.tokens_by_second(r).items():
            scalar[sec] = scalar.get(sec, 0) + n
    assert vector == scalar and sum(scalar.values()) == sum(r.output_tokens for r in RECORDS)
    assert m.token_seconds_array(np.zeros(0), np.zeros(0), np.zeros(0), np.zeros(0, int),
                                 np.zeros(0))[0].size == 0


def test_a_second_that_is_no_time_is_marked_not_cast():
    """NaN, inf and stamps past int64 seconds give NO_SECOND on every CPU (a cast gives INT64_MIN on
    x86-64 but 0, the Unix epoch, on ARM) and no RuntimeWarning."""
    started = np.array([np.nan, 100.0, 1e300, 200.0])
    end = np.array([np.nan, 101.0, 1e300, 200.5])
    lens = np.array([2, 2, 1, 0])
    flat = np.array([10.0, 20.0, np.inf, 1500.0, 5.0])
    with np.errstate(all="raise"):
        seconds, tokens = m.token_seconds_array(started, end, np.array([2, 2, 1, 3]), lens, flat)
    assert sorted(zip(seconds.tolist(), tokens.tolist())) == [          # record 1's inf offset included
        (m.NO_SECOND, 1), (m.NO_SECOND, 1), (m.NO_SECOND, 2), (101, 1), (200, 3)]


def test_rates_and_wall_time():
    assert m.wall_s(10.0, 12.5) == 2.5 and m.wall_s(10.0, 10.0) is None and m.wall_s(None, 3.0) is None
    assert m.ratio(3, 4) == 0.75 and m.ratio(3, 0) is None and m.ratio(3, None) is None


def test_bucketed_quantiles_are_within_alpha_of_the_exact_ones():
    values = np.random.default_rng(5).lognormal(3.0, 1.0, 5000)
    hist = LogHistogram()
    hist.add_all(values.tolist())
    keys, counts = np.unique(bucket_keys(values), return_counts=True)
    qs = (0.5, 0.9, 0.99)
    assert bucket_quantiles(keys, counts, qs, float(values.min()), float(values.max())) == hist.quantiles(qs)
    ordered = np.sort(values)
    for q, bucketed in zip(qs, hist.quantiles(qs), strict=True):
        assert abs(bucketed - exact_quantile(ordered, q)) <= hist.alpha * exact_quantile(ordered, q)
    assert np.allclose(bucket_values(keys), [hist.representative(int(k)) for k in keys], rtol=1e-12)


# ---- the registry ----
def test_registry_names_are_unique_and_resolve():
    names = [metric.name for metric in METRICS]
    assert len(names) == len(set(names))
    assert resolve("ttft_p95") == (by_name("ttft_ms"), "p95")
    assert resolve("similarity_p5") == (by_name("similarity"), "p5")
    assert resolve("ttft_p96") is None and resolve("nope") is None
    with pytest.raises(KeyError, match="known: ttft_ms"):
        by_name("nope")
    block = {"ttft_ms": {"p95": 12.5}, "error_rate": 0.25}
    assert summary_value(block, "ttft_p95") == 12.5 and summary_value(block, "error_rate") == 0.25
    assert summary_value(block, "e2e_p95") is None \
        and summary_value({"similarity_mean": 0.8}, "similarity_mean") == 0.8


def test_every_report_row_and_count_is_a_registered_metric():
    shown = {name for metric in METRICS for name in metric.report}
    rows = {row.key for row in ROWS}
    assert rows <= shown, f"report rows with no definition in measure.metric_names: {sorted(rows - shown)}"
    numbers = {f.name for f in dataclasses.fields(GroupSample) if f.type in ("int", "float", "int | None",
                                                                             "float | None")}
    assert numbers <= shown, f"GroupSample counts with no definition: {sorted(numbers - shown)}"
    for metric in METRICS:
        for name in metric.report:
            assert name in rows or name in numbers, f"{metric.name}: the report shows no {name!r}"
            assert resolve(name) is not None and resolve(name)[0] is metric


def test_every_summary_number_is_a_registered_metric():
    stats = LLMStats(slo_ms={"ttft_ms": 500})
    for r in RECORDS:
        stats.add_record(r)
    total = stats.summary()["total"]
    # all but the group's name, its error classes and statuses, and the bounds of wall_s
    numbers = set(total) - {"level", "scenario", "errors", "statuses", "first_start_s", "last_end_s"}
    registered = {metric.name for metric in METRICS if "summary" in metric.where}
    assert numbers == registered - {"server_timing_ms"}      # only when a server reports its stages:
    timed = LLMStats()
    timed.add_record(dataclasses.replace(RECORDS[0], status=200, error_class="ok",
                                         server_timing={"infer": 12.0}))
    assert set(timed.summary()["total"]["server_timing_ms"]) == {"infer"}
    for metric in METRICS:
        if "summary" in metric.where and metric.kind == "distribution":
            assert set(total[metric.name]) == set(metric.stats)


def test_the_slo_grammar_takes_its_names_from_the_registry():
    assert LATENCY_BASES == ("ttft", "ttfo", "ttfb", "itl", "itl_token", "tpot", "e2e", "queue", "reasoning",
                             "jitter")
    # jitter, reasoning and per-token ITL: per run, no goodput limit
    per_run = {"jitter_ms", "reasoning_ms", "itl_token_ms"}
    assert {f"{b}_ms" for b in LATENCY_BASES} - per_run == set(m.SLO_METRICS)
    assert RATE_METRICS == ("error_rate", "interruption_rate", "stall_rate", "conn_reuse", "goodput_ratio",
                            "reasoning_share", "cache_hit_share", "multi_token_chunk_share",
                            "token_discrepancy_share", "token_count_ratio", "tool_call_share",
                            "tool_call_valid_share", "pulse_share")
    assert THROUGHPUT_METRICS == \
        {"output_tps": "tok/s", "request_rps": "req/s", "goodput_rps": "req/s", "pulse_hz": "Hz"}
    assert QUALITY_METRICS == ("similarity_mean", "similarity_p5", "similarity_p50", "low_confidence_share",
                               "char_f1_mean", "structure_compliance", "fact_error_rate")

"""Issue #18 item 6: numbers that used to be wrong (each test failed on the old code)."""

from __future__ import annotations

import json

import pytest

from fourfold.client.dialects import get_dialect
from fourfold.client.dialects.base import RequestOptions
from fourfold.client.stream import _finish
from fourfold.measure.console import format_summary
from fourfold.measure.record import RequestRecord
from fourfold.measure.stats import LLMStats
from fourfold.workloads.items import Item

ANSWER = "Paris is the capital of France, and it has been for centuries."


def finish(dialect_name: str, body: bytes, stream: bool = False) -> RequestRecord:
    dialect = get_dialect(dialect_name)
    request = dialect.build(Item(id="q1", messages=({"role": "user", "content": "capital?"},)),
                            RequestOptions(model="m", stream=stream))
    record = RequestRecord(level="L1", scenario="s", ttfb_ms=5.0, status=200)
    t0 = 1_000_000_000
    return _finish(dialect, request, record, t0, [t0 + 20_000_000], [body], "", "")


def triton_infer(text: str, **extra: float) -> bytes:
    return json.dumps({"model_name": "m",
                       "outputs": [{"name": "text_output", "datatype": "BYTES", "shape": [1],
                                    "data": [text]}], **extra}).encode()


def test_a_non_streamed_triton_answer_counts_its_tokens_not_one():
    record = finish("triton", triton_infer(ANSWER))
    assert record.ok and record.content_chunks == 1
    assert record.output_tokens == 14 and record.output_tokens_source == "estimate"   # 12 words, ',' and '.'


def test_a_non_streamed_openai_answer_with_usage_keeps_the_usage():
    body = json.dumps({"choices": [{"message": {"content": ANSWER}, "finish_reason": "stop"}],
                       "usage": {"completion_tokens": 15, "prompt_tokens": 3}}).encode()
    record = finish("openai", body)
    assert record.output_tokens == 15 and record.output_tokens_source == "usage"


def test_non_streamed_token_rate_is_the_answer_rate():
    stats = LLMStats()
    for i in range(3):
        record = finish("triton", triton_infer(ANSWER))
        record.started_at = 100.0 + i
        stats.add_record(record)
    total = stats.summary()["total"]
    assert total["output_tokens_total"] == 42
    assert total["output_tokens"]["max"] == 14


def test_tritons_inference_time_is_kept_on_the_record():
    record = finish("triton", triton_infer(ANSWER, inference_time_ms=12.5))
    assert record.server_timing == {"inference_time": 12.5}
    streamed = finish("triton", b'data: {"text_output": "a", "inference_time_ms": 7}\n\n', stream=True)
    assert streamed.server_timing == {"inference_time": 7.0}


def test_the_server_side_time_reaches_the_summary_and_the_console():
    stats = LLMStats()
    for i, ms in enumerate((10.0, 20.0, 30.0)):
        record = finish("triton", triton_infer(ANSWER, inference_time_ms=ms))
        record.started_at = 100.0 + i
        stats.add_record(record)
    merged = LLMStats()
    merged.merge_wire(stats.to_wire())          # and across workers
    for summary in (stats.summary(), merged.summary()):
        stage = summary["total"]["server_timing_ms"]["inference_time"]
        assert stage["count"] == 3 and abs(stage["mean"] - 20.0) < 0.2
    assert "server-side ms: inference_time p50 20.0 p95 30.0" in format_summary(stats.summary())


# ---- A/B arms with different numbers of users: throughput per user ----

def write_ab_run(base, users_a: int, users_b: int):
    from fourfold.rundir.runlog import RunWriter

    writer = RunWriter("ab", base, now_s=1_700_000_000.0)
    writer.write_meta({"label": "ab", "level": "l4", "settings": {"stall_ms": 150.0}})
    t0 = 1_700_000_000.0
    user = 0
    for variant, users in (("A", users_a), ("B", users_b)):
        for _ in range(users):
            for k in range(12):      # back to back: 20 tokens per second per user, every user alike
                writer.append(RequestRecord(
                    level="L4", scenario=f"session@{variant}", variant=variant, user_id=user, item_id=f"i{k}",
                    request_id=f"{variant}{user}-{k}", started_at=t0 + k, status=200, ttfb_ms=2.0,
                    ttft_ms=25.0, e2e_ms=975.0, chunk_offsets_ms=[25.0 + 50.0 * j for j in range(20)],
                    output_tokens=20, output_tokens_source="usage", terminal=True, text="x"))
            user += 1
    writer.close()
    writer.write_summary({"slo_ms": {}})
    return writer.run_dir


def test_ab_arms_with_fewer_users_are_compared_per_user(tmp_path):
    from fourfold.reports.report import report_from_paths

    report = report_from_paths([write_ab_run(tmp_path, 19, 1)], variants=["A", "B"], cache=False)
    row = next(r for r in report.comparisons[0].rows if r.metric == "output_tps")
    assert row.label == "output tokens/s per user (19 vs 1 users)"
    assert row.baseline == pytest.approx(row.candidate, rel=0.02) and row.verdict != "worse"
    assert row.candidate == pytest.approx(20.0, rel=0.1)


def test_ab_arms_with_equal_users_keep_the_total(tmp_path):
    from fourfold.reports.report import report_from_paths

    report = report_from_paths([write_ab_run(tmp_path, 3, 3)], variants=["A", "B"], cache=False)
    row = next(r for r in report.comparisons[0].rows if r.metric == "output_tps")
    assert row.label == "output tokens/s" and row.baseline == pytest.approx(60.0, rel=0.1)

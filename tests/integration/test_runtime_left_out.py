"""The records a run's statistics leave out, counted (issue 31 item 8): every record reaches the run
directory; warm-up and cancelled ones stay out of every figure, and summary.json counts them
(``records_warmup``, ``records_cancelled``) for the end-of-run table's line
(tests/unit/test_console_counts.py).

Here, not in tests/unit: opening a run directory writes meta.json, whose client facts ask
``uname -p`` (a process)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from fourfold.measure.console import format_summary
from fourfold.measure.record import RequestRecord

pytestmark = pytest.mark.integration


def _record(**kw) -> RequestRecord:
    base = dict(level="l1", scenario="chat", item_id="i", error_class="ok", e2e_ms=400.0, ttft_ms=100.0,
                chunk_offsets_ms=[100.0, 400.0], output_tokens=2)
    return RequestRecord(**{**base, **kw})


def test_the_runtime_counts_the_records_it_leaves_out(tmp_path: Path):
    """Every record reaches the run directory; warm-up and cancelled ones stay out of the statistics,
    and summary.json counts them (``records_warmup``, ``records_cancelled``)."""
    from locust.env import Environment

    from fourfold.levels.options import Settings
    from fourfold.levels.runtime import Runtime

    runtime = Runtime(Environment(), dataclasses.replace(Settings(), run_dir=str(tmp_path), label="t"))
    for record in (_record(warmup=True), _record(warmup=True), _record(error_class="cancelled"), _record()):
        runtime.observe(record)
    summary = runtime.finish()
    assert summary is not None
    assert (summary["records"], summary["records_warmup"], summary["records_cancelled"]) == (4, 2, 1)
    assert summary["total"]["requests"] == 1
    assert ("not counted above: 2 warm-up requests (--warmup-requests), 1 cancelled request (in flight when "
            "the load generator stopped); records.jsonl holds them") in format_summary(summary).splitlines()
    runtime.begin_test()                                  # a new test (web UI: Stop, then New) starts from 0
    assert runtime.left_out == {"warmup": 0, "cancelled": 0}

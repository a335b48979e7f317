"""The pure parts of the LLM tab: rows, CSV, windowed TTFT; stalls per second in LLMStats (the
secrets of the start form: tests/unit/test_adapters.py)."""

from __future__ import annotations

import csv
import io

import pytest

from fourfold.gates.slo import parse_spec
from fourfold.gates.slo_verdict import evaluate
from fourfold.levels.webui import (
    COLUMNS,
    TTFTWindow,
    camel,
    csv_text,
    histogram_delta,
    slo_rows,
    table_rows,
    trim_series,
    ttft_histograms,
    ui_rows,
)
from fourfold.measure.histogram import LogHistogram
from fourfold.measure.record import RequestRecord
from fourfold.measure.stats import LLMStats


def rec(**kw) -> RequestRecord:
    base = dict(level="l1", scenario="chat", started_at=1000.0, status=200, ttfb_ms=40.0, ttft_ms=100.0,
                e2e_ms=400.0, chunk_offsets_ms=[100.0, 120.0, 140.0, 400.0], output_tokens=4,
                output_tokens_source="usage", terminal=True, conn_reused=True)
    base.update(kw)
    return RequestRecord(**base)


def stats_with_records() -> LLMStats:
    stats = LLMStats(slo_ms={"ttft_ms": 150.0})
    stats.add_record(rec())                                                  # one 260 ms stall at 1000.4 s
    stats.add_record(rec(scenario="other", ttft_ms=200.0, started_at=1001.5, conn_reused=False))
    stats.add_record(rec(error_class="http_5xx", status=500, ttft_ms=None, e2e_ms=5.0, chunk_offsets_ms=[],
                         output_tokens=0, terminal=False))
    return stats


@pytest.mark.parametrize(("key", "expected"), [
    ("ttft_p50_ms", "ttftP50Ms"), ("e2e_p99_ms", "e2eP99Ms"), ("output_tps", "outputTps"), ("name", "name"),
])
def test_camel_matches_locusts_frontend(key: str, expected: str) -> None:
    assert camel(key) == expected


def test_rows_csv_and_tab_cells() -> None:
    summary = stats_with_records().summary()
    rows = table_rows(summary)
    assert [r["name"] for r in rows] == ["l1:chat", "l1:other", "Aggregated"]
    assert list(rows[0]) == [key for key, _, _ in COLUMNS]
    chat = rows[0]
    assert chat["requests"] == 2 and chat["failures"] == 1
    assert chat["ttft_p95_ms"] == pytest.approx(100.0, rel=0.01)
    assert chat["stall_rate"] == pytest.approx(0.5) and chat["error_rate"] == pytest.approx(0.5)
    assert rows[-1]["conn_reuse"] == pytest.approx(2 / 3) and rows[-1]["requests"] == 3
    shown = ui_rows(rows)
    assert shown[0]["ttftP95Ms"] == "100.0" and shown[0]["stallRate"] == "50.00"
    assert shown[1]["connReuse"] == "0.00" and shown[1]["failures"] == 0
    empty = ui_rows(table_rows(LLMStats().summary()))
    assert empty == \
        [{**{camel(k): "" for k, _, _ in COLUMNS}, "name": "Aggregated", "requests": 0, "failures": 0}]
    parsed = list(csv.DictReader(io.StringIO(csv_text(rows))))
    assert [r["name"] for r in parsed] == ["l1:chat", "l1:other", "Aggregated"]
    assert float(parsed[0]["stall_rate"]) == 0.5 and parsed[0]["itl_p99_ms"] != ""


def test_slo_rows() -> None:
    verdicts = evaluate(parse_spec("ttft_p95<=150ms,similarity_mean>=0.7"), stats_with_records().summary(),
                        quality="skip")
    rows = slo_rows(verdicts)
    assert rows[0] == {"slo": "ttft_p95 <= 150 ms", "scope": "Aggregated", "measured": "200.0 ms",
                       "verdict": "miss"}
    assert rows[1]["verdict"].startswith("skipped: quality is scored after the run")
    assert slo_rows([])[0]["slo"] == "no --slo given"
    assert slo_rows([], error="bad")[0] == {"slo": "--slo is malformed", "scope": "", "measured": "",
                                             "verdict": "bad"}


def test_histogram_delta_is_what_was_added_between_snapshots() -> None:
    before = LogHistogram()
    before.add_all([10.0, 20.0, 30.0])
    now = before.copy()
    now.add_all([100.0, 200.0, 0.0])
    window = histogram_delta(now, before)
    assert window.count == 3 and window.zero_count == 1
    assert window.quantile(1.0) == pytest.approx(200.0, rel=0.01)
    assert window.quantile(0.5) == pytest.approx(100.0, rel=0.01)
    assert histogram_delta(now, now).count == 0 and histogram_delta(now, None) == now


def test_ttft_window_slides() -> None:
    hist = LogHistogram()
    window = TTFTWindow(window_s=10)
    hist.add_all([50.0] * 10)
    window.sample(100.0, {"Aggregated": hist})
    hist.add_all([500.0] * 10)
    window.sample(102.0, {"Aggregated": hist})
    hist.add_all([60.0] * 10)
    window.sample(120.0, {"Aggregated": hist})     # the 50 ms and 500 ms samples are older than 10 s
    cols = window.columns("Aggregated")
    assert cols["t_s"] == [100.0, 102.0, 120.0] and cols["n"] == [10, 10, 10]
    assert cols["p50"][0] == pytest.approx(50.0, rel=0.01)
    assert cols["p99"][1] == pytest.approx(500.0, rel=0.01)
    assert cols["p95"][2] == pytest.approx(60.0, rel=0.01)
    assert window.columns("l1:none") == {"t_s": [100.0, 102.0, 120.0], "p50": [None] * 3, "p95": [None] * 3,
                                         "p99": [None] * 3, "n": [0, 0, 0]}


def test_ttft_histograms_per_key_and_total() -> None:
    hists = ttft_histograms(stats_with_records())
    assert list(hists) == ["l1:chat", "l1:other", "Aggregated"]
    assert hists["Aggregated"].count == 2


def test_stalls_per_second_and_trim() -> None:
    series = stats_with_records().series()
    assert series["t_s"] == [1000, 1001] and series["stalls"] == [1, 1]
    assert trim_series(series, 1001) == {k: v[:1] for k, v in series.items()}


def test_an_idle_workers_empty_delta_merges_whatever_its_thresholds() -> None:
    master = LLMStats(stall_threshold_ms=150.0, slo_ms={"ttft_ms": 450.0})
    master.merge_wire(LLMStats(stall_threshold_ms=99.0).take_wire())
    assert master.groups == {}
    with pytest.raises(ValueError, match="cannot merge"):
        master.merge_wire(stats_with_records().to_wire())

"""Issue #18 item 4: jitter and pulse frequency (measure.rhythm) in summary.json, the console, the
report and the SLO gate, one definition (measure.metrics) for all of them."""

from __future__ import annotations

import pytest

from fourfold.gates.slo import parse_spec
from fourfold.gates.slo_verdict import evaluate
from fourfold.measure.console import format_summary
from fourfold.measure.metrics import jitter_ms, jitter_ms_of_gaps, pulse_hz, pulse_hz_of_gaps
from fourfold.measure.record import RequestRecord
from fourfold.measure.rhythm import gaps_ms
from fourfold.measure.stats import LLMStats
from fourfold.rundir.runlog import RunWriter

T0 = 1_700_000_000.0


def pulsed(start_ms: float = 10.0, bursts: int = 12) -> list[float]:
    """10 chunks 5 ms apart, then a 200 ms pause: one burst every 250 ms (4 Hz)."""
    offsets, t = [], start_ms
    for _ in range(bursts):
        for _ in range(10):
            offsets.append(round(t, 3))
            t += 5.0
        t += 200.0
    return offsets


def smooth(start_ms: float = 10.0, chunks: int = 120) -> list[float]:
    return [round(start_ms + 25.0 * j + (0.5 if j % 2 else 0.0), 3) for j in range(chunks)]


def record(offsets: list[float], i: int = 0, variant: str = "") -> RequestRecord:
    return RequestRecord(level="L1", scenario="chat", variant=variant, request_id=f"r{i}",
                         item_id=f"i{i % 5}", started_at=T0 + i * 0.5, status=200, ttfb_ms=2.0,
                         ttft_ms=offsets[0], e2e_ms=offsets[-1], chunk_offsets_ms=offsets,
                         output_tokens=len(offsets), output_tokens_source="usage", terminal=True, text="x")


@pytest.mark.parametrize(("offsets", "jitter", "pulse"), [
    ([10.0, 20.0], None, None),                       # one gap: no spread
    ([10.0, 20.0, 40.0], 5.0, None),                  # gaps 10, 20: std 5; too short for a pulse
    (smooth(), pytest.approx(0.5, abs=1e-3), 0.0),             # steady: no periodic component
    (pulsed(), pytest.approx(57.93, abs=0.01), pytest.approx(4.0, abs=0.1)),
])
def test_jitter_and_pulse_per_request(offsets, jitter, pulse):
    one = record(offsets)
    assert jitter_ms(one) == jitter and pulse_hz(one) == pulse
    gaps = gaps_ms(offsets)       # the report's form, from gaps: the same numbers
    assert jitter_ms_of_gaps(gaps) == jitter and pulse_hz_of_gaps(gaps) == pulse


def stats_of(records: list[RequestRecord]) -> dict:
    stats = LLMStats()
    for one in records:
        stats.add_record(one)
    return stats.summary()


def test_summary_console_and_slo_show_the_rhythm():
    summary = stats_of([record(pulsed(), i) for i in range(3)] + [record(smooth(), 3 + i) for i in range(2)])
    total = summary["total"]
    assert total["requests_pulsing"] == 3 and total["jitter_ms"]["count"] == 5
    assert total["pulse_hz"] == pytest.approx(4.0, abs=0.1)                  # the median pulsing stream
    assert (total["requests_rhythm"], total["pulse_share"]) == (5, 0.6)
    assert total["jitter_ms"]["p95"] == pytest.approx(57.93, rel=0.01)
    table = format_summary(summary).splitlines()
    assert table[1].endswith("stall% jitter p50 pulse Hz")
    assert table[2].endswith(f"{total['jitter_ms']['p50']:.1f} {total['pulse_hz']:8.1f}")
    verdicts = evaluate(parse_spec("pulse_hz<2, jitter_p95<50ms, jitter_p50<100ms, pulse_hz<=5hz"), summary)
    assert [v.status for v in verdicts] == ["miss", "miss", "pass", "pass"]
    assert verdicts[0].message == "pulse_hz < 2 missed at Aggregated: measured 3.97 Hz"
    smooth_only = stats_of([record(smooth(), i) for i in range(4)])
    assert (smooth_only["total"]["pulse_hz"], smooth_only["total"]["pulse_share"]) == (0.0, 0.0)
    assert [v.status for v in evaluate(parse_spec("pulse_hz<2,jitter_p95<50ms,pulse_share<10%"),
                                       smooth_only)] == \
        ["pass", "pass", "pass"]
    # one pulsing stream among many smooth ones: its frequency is the run's, its share says how rare
    few = stats_of([record(pulsed(), 0)] + [record(smooth(), 1 + i) for i in range(9)])["total"]
    assert few["pulse_hz"] == pytest.approx(4.0, abs=0.1) and few["pulse_share"] == 0.1


def test_the_report_has_a_row_each_and_agrees_with_the_summary(tmp_path):
    from fourfold.reports.report import report_from_paths

    runs = []
    for label, shape in (("base", smooth), ("cand", pulsed)):
        writer = RunWriter(label, tmp_path, now_s=T0)
        writer.write_meta({"label": label, "level": "l1", "settings": {"stall_ms": 150.0}})
        records = [record(shape(10.0 + i), i) for i in range(12)]
        for one in records:
            writer.append(one)
        writer.close()
        writer.write_summary(stats_of(records))
        runs.append((writer.run_dir, stats_of(records)["total"]))
    report = report_from_paths([runs[0][0], runs[1][0]], cache=False)
    rows = {r.metric: r for r in report.comparisons[0].rows}
    jitter, pulse = rows["jitter_p50"], rows["pulse_hz"]
    assert jitter.baseline == pytest.approx(runs[0][1]["jitter_ms"]["p50"], rel=0.01)
    assert jitter.candidate == pytest.approx(runs[1][1]["jitter_ms"]["p50"], rel=0.01)
    assert pulse.baseline == runs[0][1]["pulse_hz"] == 0.0
    assert pulse.candidate == pytest.approx(runs[1][1]["pulse_hz"], rel=0.01)
    assert jitter.verdict == pulse.verdict == "too few"        # 12 requests a run: a median needs 20
    assert jitter.why == "p50 of 12 values (needs 20)"


def test_a_slo_table_makes_pulse_hz_a_ceiling():
    from fourfold.gates.slo import parse_table

    (slo,) = parse_table({"pulse_hz": 2}, where="slo.toml")
    assert slo.clause == "pulse_hz<=2"

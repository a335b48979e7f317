"""Issue #18 item 4: the report has one error-rate row per failure class seen on either side."""

from __future__ import annotations

import pytest

from fourfold.measure.record import RequestRecord
from fourfold.reports.report import report_from_paths, report_from_sides
from fourfold.rundir.runlog import RunWriter

T0 = 1_700_000_000.0


def write(base, label: str, classes: list[str], now_s: float = T0):
    writer = RunWriter(label, base, now_s=now_s)
    writer.write_meta({"label": label, "level": "l1", "settings": {"stall_ms": 150.0}})
    for i, error_class in enumerate(classes):
        ok = error_class == "ok"
        writer.append(RequestRecord(
            level="L1", scenario="chat", request_id=f"{label}{i}", item_id=f"i{i % 5}",
            started_at=T0 + i * 0.1, status=200 if ok else (429 if error_class == "rate_limited" else 503),
            error_class=error_class, ttfb_ms=2.0, ttft_ms=10.0 if ok else None, e2e_ms=50.0 if ok else 2.0,
            chunk_offsets_ms=[10.0, 30.0, 50.0] if ok else [], output_tokens=3 if ok else 0,
            output_tokens_source="usage", terminal=ok, text="x" if ok else ""))
    writer.close()
    writer.write_summary({"slo_ms": {}})
    return writer.run_dir


def test_one_row_per_error_class_on_either_side(tmp_path):
    base = [write(tmp_path, "base", ["ok"] * 190 + ["http_5xx"] * 10, T0 + k * 100) for k in range(2)]
    cand = [write(tmp_path, "cand", ["ok"] * 150 + ["rate_limited"] * 40 + ["http_5xx"] * 10,
                  T0 + 300 + k * 100)
            for k in range(2)]
    rows = {r.metric: r for r in report_from_sides(base, [cand], cache=False).comparisons[0].rows}
    assert [k for k in rows if k.startswith("error_rate.")] == \
        ["error_rate.http_5xx", "error_rate.rate_limited"]
    limited, server = rows["error_rate.rate_limited"], rows["error_rate.http_5xx"]
    assert limited.label == "errors: rate_limited" and limited.unit == "%"
    assert (limited.baseline, limited.candidate, limited.verdict) == (0.0, 20.0, "worse")
    assert server.baseline == server.candidate == pytest.approx(5.0) and server.verdict == "no change"
    assert rows["error_rate"].candidate == pytest.approx(25.0)
    one = {r.metric: r for r in report_from_paths([base[0], cand[0]], cache=False).comparisons[0].rows}
    assert one["error_rate.rate_limited"].verdict == "inconclusive"        # one run a side: no verdict


def test_no_failure_no_class_row(tmp_path):
    base, cand = write(tmp_path, "base", ["ok"] * 20), write(tmp_path, "cand", ["ok"] * 20)
    rows = report_from_paths([base, cand], cache=False).comparisons[0].rows
    assert not [r for r in rows if r.metric.startswith("error_rate.")]


def test_the_class_rows_render(tmp_path):
    from fourfold.reports.report import write_report

    base = write(tmp_path, "base", ["ok"] * 50 + ["http_5xx"] * 5)
    cand = write(tmp_path, "cand", ["ok"] * 50 + ["rate_limited"] * 5)
    written = write_report(report_from_paths([base, cand], cache=False), tmp_path / "out", plots=False)
    markdown = written["markdown"].read_text()
    assert "| errors: rate_limited (%) | 0.00 | 9.09 |" in markdown
    assert "errors: http_5xx" in written["html"].read_text() \
        and "error_rate.rate_limited" in written["csv"].read_text()

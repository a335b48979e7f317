"""SLO clauses on server telemetry (gpu_util, gpu_mem_bw_util, kv_cache_usage): read from the
summary's server_metrics block, in percent there, a fraction in the clause."""

from __future__ import annotations

import json

import pytest

from fourfold.cli import main as cli_main
from fourfold.errors import SLOSpecError
from fourfold.gates.slo import SLO, metric_kind, parse_clause, parse_spec
from fourfold.gates.slo_verdict import evaluate


def _summary(**metrics: dict[str, float]) -> dict:
    return {"total": {"requests": 10, "ok": 10}, "groups": [],
            "server_metrics": {"metrics_urls": ["http://h:8000/metrics"], "nvidia_smi": False, "errors": {},
                               "metrics": metrics}}


@pytest.mark.parametrize(("text", "threshold"), [
    ("gpu_mem_bw_util_max<85%", 0.85), ("gpu_mem_bw_util_max<0.85", 0.85), ("gpu_util_mean>=50%", 0.5),
    ("kv_cache_usage_max<=90%", 0.9)])
def test_telemetry_clauses_parse_to_a_fraction(text, threshold):
    slo = parse_clause(text)
    assert slo.kind == "telemetry" and slo.threshold == pytest.approx(threshold)
    assert parse_spec(slo.clause) == [slo] and slo.label.endswith(" %")
    assert metric_kind("gpu_util_p95") is None


@pytest.mark.parametrize(("text", "message"), [
    ("gpu_mem_bw_util_max<85", "did you mean 85%"),
    ("gpu_mem_bw_util_max@l1:default<85%", "for the whole run"),
    ("gpu_mem_bw_util_max<85ms", "give % or a number"),
])
def test_bad_telemetry_clauses(text, message):
    with pytest.raises(SLOSpecError, match=message):
        parse_clause(text)


@pytest.mark.parametrize(("metrics", "status", "measured"), [
    ({"server.mem_bw_util_pct": {"mean": 60.0, "max": 80.5}}, "pass", 0.805),
    ({"server.mem_bw_util_pct": {"mean": 70.0, "max": 92.0}}, "miss", 0.92),
    # both sources: the larger value is judged
    ({"server.mem_bw_util_pct": {"mean": 40.0, "max": 50.0},
      "nvidia_smi.mem_bw_util_pct": {"mean": 80.0, "max": 88.0}}, "miss", 0.88),
    ({"nvidia_smi.mem_bw_util_pct": {"mean": 40.0, "max": 42.0}}, "pass", 0.42),
])
def test_gpu_mem_bw_util_max_verdicts(metrics, status, measured):
    [verdict] = evaluate([SLO("gpu_mem_bw_util_max", "<", 0.85)], _summary(**metrics))
    assert verdict.status == status and verdict.measured == pytest.approx(measured)
    if status == "miss":
        assert f"measured {100 * measured:.2f} %" in verdict.message


def test_no_telemetry_is_no_data_naming_what_is_missing():
    slo = SLO("gpu_mem_bw_util_max", "<", 0.85)
    [none] = evaluate([slo], {"total": {}, "groups": []})
    assert none.status == "no_data" and "sampler did not run" in none.reason and none.failed
    summary = _summary(**{"server.running": {"mean": 3.0, "max": 4.0}})
    summary["server_metrics"]["errors"] = {"http://h:9400/metrics": "HTTP 404 from http://h:9400/metrics"}
    [empty] = evaluate([slo], summary)
    assert empty.status == "no_data"
    assert "no mem_bw_util_pct sampled" in empty.reason and "no nvidia-smi on this machine" in empty.reason
    assert "http://h:8000/metrics" in empty.reason and "HTTP 404" in empty.reason


def test_fourfold_check_judges_telemetry(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    (run / "records.jsonl").write_text('{"level": "l1", "scenario": "s", "error_class": "ok"}\n')
    (run / "summary.json").write_text(
        json.dumps(_summary(**{"server.mem_bw_util_pct": {"mean": 70, "max": 92}})))
    assert cli_main(["check", str(run), "--slo", "gpu_mem_bw_util_max<85%"]) == 3
    assert "gpu_mem_bw_util_max < 85 %  server   92.00 %  MISSED" in capsys.readouterr().out
    assert cli_main(["check", str(run), "--slo", "gpu_mem_bw_util_mean<85%"]) == 0

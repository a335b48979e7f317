"""SLO specs, files, verdicts, the verdict table and JUnit XML (pure; files only under tmp_path)."""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET

import pytest

from fourfold.cli import main as cli_main
from fourfold.errors import UsageError
from fourfold.gates.gate import check_run, is_slo_file, load_slo, load_slo_file
from fourfold.gates.slo import SLO, SLOSpecError, goodput_thresholds, parse_clause, parse_spec, to_spec
from fourfold.gates.slo_report import format_verdicts, junit_xml
from fourfold.gates.slo_verdict import evaluate, exit_code, summary_block


@pytest.mark.parametrize(("text", "expected"), [
    ("ttft_p95<=450ms", SLO("ttft_p95", "<=", 450.0)),
    ("ttft_p95 <= 450 ms", SLO("ttft_p95", "<=", 450.0)),
    ("e2e_p99<1.4s", SLO("e2e_p99", "<", 1400.0)),
    ("itl_max<=200", SLO("itl_max", "<=", 200.0)),                  # latency: ms by default
    ("tpot_mean ≤ 25ms", SLO("tpot_mean", "<=", 25.0)),
    ("ttfb_p50=<30ms", SLO("ttfb_p50", "<=", 30.0)),
    ("interruption_rate<0.5%", SLO("interruption_rate", "<", 0.005)),
    ("error_rate<=0.01", SLO("error_rate", "<=", 0.01)),
    ("conn_reuse>=89%", SLO("conn_reuse", ">=", 0.89)),
    ("output_tps>=1850", SLO("output_tps", ">=", 1850.0)),
    ("goodput_rps > 2.5", SLO("goodput_rps", ">", 2.5)),
    ("similarity_mean>=0.75", SLO("similarity_mean", ">=", 0.75)),
    ("structure_compliance ≥ 95%", SLO("structure_compliance", ">=", 0.95)),
    ("TTFT_P99@l1:saturation<=1400ms", SLO("ttft_p99", "<=", 1400.0, "l1:saturation")),
    ("stall_rate@l3:rag < 2e-2", SLO("stall_rate", "<", 0.02, "l3:rag")),
])
def test_parse_clause(text: str, expected: SLO) -> None:
    slo = parse_clause(text)
    assert slo.metric == expected.metric and slo.op == expected.op and slo.scope == expected.scope
    assert slo.threshold == pytest.approx(expected.threshold)


@pytest.mark.parametrize(("text", "message"), [
    ("ttft_p96<=450ms", "unknown metric 'ttft_p96'; valid metrics: latency {ttft,"),
    ("latency<=450ms", "unknown metric 'latency'"),
    ("ttft_p95<=45%", "ttft_p95 is a latency: give ms or s, not '%'"),
    ("ttft_p95<=4min", "give ms or s, not 'min'"),
    ("error_rate<5", "error_rate is a fraction in [0, 1], got 5.0 (did you mean 5%?)"),
    ("interruption_rate<0.5ms", "give % or a number in [0, 1], not 'ms'"),
    ("similarity_mean>=120%", "similarity_mean is a fraction in [0, 1]"),
    ("output_tps>=100tok", "output_tps is per second and takes no unit"),
    ("ttft_p95=450ms", "cannot read 'ttft_p95=450ms': expected METRIC[@level:scenario] OP NUMBER[UNIT]"),
    ("ttft_p95<=", "cannot read"),
    ("ttft_p95<=fast", "cannot read"),
    ("ttft_p95 450ms", "cannot read"),
    ("ttft_p95@rag<=450ms", "scope 'rag' should be level:scenario"),
    ("", "the SLO spec is empty"),
    (" , ;", "the SLO spec is empty"),
    ("ttft_p95<=450ms,ttft_p95<=500ms", "ttft_p95 <= is given twice"),
])
def test_malformed_specs_are_usage_errors_that_say_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(SLOSpecError) as info:
        parse_spec(text)
    assert message in str(info.value)
    assert isinstance(info.value, UsageError) and info.value.exit_code == 2


def test_spec_separators_and_round_trip() -> None:
    slos = parse_spec("ttft_p95<=450ms, e2e_p99<=1.4s;interruption_rate<0.5%\nsimilarity_mean>=0.75,"
                      "ttft_p99@l1:saturation<=1400ms,output_tps>=12.5")
    assert [s.metric for s in slos] == ["ttft_p95", "e2e_p99", "interruption_rate", "similarity_mean",
                                        "ttft_p99", "output_tps"]
    spec = to_spec(slos)
    assert spec == ("ttft_p95<=450ms,e2e_p99<=1400ms,interruption_rate<0.5%,similarity_mean>=0.75,"
                    "ttft_p99@l1:saturation<=1400ms,output_tps>=12.5")
    assert parse_spec(spec) == slos
    assert [s.label for s in slos[:3]] == \
        ["ttft_p95 <= 450 ms", "e2e_p99 <= 1400 ms", "interruption_rate < 0.5 %"]


def test_goodput_thresholds_take_the_tightest_upper_bound_per_latency_metric() -> None:
    slos = parse_spec("ttft_p95<=450ms,ttft_p99<=1400ms,e2e_max<5s,itl_p99<=200ms,tpot_mean<=30ms,"
                      "ttfb_p50>=1ms,interruption_rate<0.5%,ttft_p99@l1:saturation<=300ms")
    assert goodput_thresholds(slos) == {"ttft_ms": 300.0, "e2e_ms": 5000.0, "itl_ms": 200.0}
    assert goodput_thresholds(parse_spec("error_rate<1%")) == {}


def _summary(**total: object) -> dict:
    base = {"level": "Aggregated", "scenario": "", "requests": 100, "ok": 99,
            "ttft_ms": {"p50": 120.0, "p95": 430.0, "p99": 900.0, "mean": 150.0, "max": 1300.0},
            "e2e_ms": {"p50": 800.0, "p95": 1200.0, "p99": 1500.0},
            "itl_ms": {"p99": None}, "interruption_rate": 0.004, "error_rate": 0.01, "output_tps": 1850.0,
            "conn_reuse": None, "stall_rate": 0.2}
    base.update(total)
    group = {**base, "level": "l1", "scenario": "saturation", "ttft_ms": {"p95": 500.0}}
    return {"total": base, "groups": [group]}


QUALITY = {"total": {"n": 100, "similarity_mean": 0.82, "similarity_p5": 0.61, "structure_compliance": 0.947},
           "by_scenario": {"l1:saturation": {"similarity_mean": 0.79, "structure_compliance": None}}}


@pytest.mark.parametrize(("clause", "status", "measured"), [
    ("ttft_p95<=450ms", "pass", 430.0),
    ("ttft_p95<430ms", "miss", 430.0),          # strict comparison at the boundary
    ("ttft_p95<=430ms", "pass", 430.0),
    ("e2e_p99<=1400ms", "miss", 1500.0),
    ("ttft_max<=1.3s", "pass", 1300.0),
    ("ttft_mean<=100", "miss", 150.0),
    ("interruption_rate<0.5%", "pass", 0.004),
    ("error_rate<1%", "miss", 0.01),
    ("output_tps>=1850", "pass", 1850.0),
    ("output_tps>1850", "miss", 1850.0),
    ("stall_rate<=0.25", "pass", 0.2),
    ("conn_reuse>=0.89", "no_data", None),      # no request knew its connection
    ("itl_p99<=200ms", "no_data", None),        # no ok request
    ("ttft_p95@l1:saturation<=450ms", "miss", 500.0),
    ("ttft_p95@l3:rag<=450ms", "no_data", None),
])
def test_verdicts_against_a_summary(clause: str, status: str, measured: float | None) -> None:
    (verdict,) = evaluate([parse_clause(clause)], _summary())
    assert verdict.status == status
    assert verdict.measured == (None if measured is None else pytest.approx(measured))
    assert verdict.failed == (status != "pass")


@pytest.mark.parametrize(("clause", "quality", "summary_quality", "status", "reason"), [
    ("similarity_mean>=0.75", "require", QUALITY, "pass", ""),
    ("similarity_mean>=0.85", "require", QUALITY, "miss", ""),
    ("similarity_p5>=0.6", "require", QUALITY, "pass", ""),
    ("structure_compliance>=95%", "require", QUALITY, "miss", ""),
    ("similarity_mean@l1:saturation>=0.8", "require", QUALITY, "miss", ""),
    ("structure_compliance@l1:saturation>=0.9", "require", QUALITY, "no_data", "left out"),
    ("similarity_mean@l3:rag>=0.8", "require", QUALITY, "no_data", "no scored answers for l3:rag"),
    ("similarity_mean>=0.75", "require", None, "not_scored", "run `fourfold score RUN_DIR` first"),
    ("similarity_mean>=0.75", "skip", None, "skipped", "quality is scored after the run"),
])
def test_quality_floors(clause, quality, summary_quality, status, reason) -> None:
    summary = _summary()
    if summary_quality is not None:
        summary["quality"] = summary_quality
    (verdict,) = evaluate([parse_clause(clause)], summary, quality=quality)
    assert verdict.status == status and reason in verdict.reason
    assert verdict.failed == (status in ("miss", "no_data", "not_scored"))


def test_exit_code_and_summary_block() -> None:
    slos = parse_spec("ttft_p95<=450ms,similarity_mean>=0.75")
    live = evaluate(slos, _summary(), quality="skip")
    assert [v.status for v in live] == ["pass", "skipped"] and exit_code(live) == 0
    checked = evaluate(slos, _summary(), quality="require")
    assert exit_code(checked) == 3
    block = summary_block(slos, checked)
    assert block["passed"] is False and block["failed"] == 1 and block["exit_code"] == 3
    assert block["spec"] == "ttft_p95<=450ms,similarity_mean>=0.75"
    assert block["verdicts"][0] == {"slo": "ttft_p95<=450ms", "metric": "ttft_p95", "scope": "Aggregated",
                                    "op": "<=", "threshold": 450.0, "measured": 430.0, "status": "pass",
                                    "passed": True, "reason": ""}
    json.dumps(block, allow_nan=False)
    assert exit_code([]) == 0


def test_verdict_table_exact_text() -> None:
    verdicts = evaluate(parse_spec("ttft_p95<=450ms,e2e_p99<=1400ms,interruption_rate<0.5%,"
                                   "similarity_mean>=0.75"), _summary(), quality="skip")
    assert format_verdicts(verdicts) == "\n".join([
        "fourfold SLO gate: 1 of 4 failed (exit code 3)",
        "  SLO                        scope        measured  verdict",
        "  ttft_p95 <= 450 ms         Aggregated   430.0 ms  pass",
        "  e2e_p99 <= 1400 ms         Aggregated  1500.0 ms  MISSED",
        "  interruption_rate < 0.5 %  Aggregated     0.40 %  pass",
        "  similarity_mean >= 0.75    Aggregated          -  skipped",
        "  - similarity_mean >= 0.75 at Aggregated: quality is scored after the run: run `fourfold score "
        "RUN_DIR`, then `fourfold check RUN_DIR`",
    ])
    passed = evaluate(parse_spec("ttft_p95<=450ms"), _summary())
    assert format_verdicts(passed).splitlines()[0] == "fourfold SLO gate: all 1 met"


def test_junit_xml_names_the_failed_slo_and_its_measured_value() -> None:
    verdicts = evaluate(parse_spec("ttft_p95<=450ms,e2e_p99<=1400ms,"
                                   "ttft_p95@l3:rag<=1s,similarity_mean>=0.75"),
                        _summary(), quality="skip")
    root = ET.fromstring(junit_xml(verdicts, properties={"spec": "x"}))
    assert root.tag == "testsuites" and root.get("tests") == "4" and root.get("failures") == "2"
    suite = root.find("testsuite")
    assert suite is not None and suite.get("skipped") == "1"
    cases = {case.get("name"): case for case in suite.iter("testcase")}
    assert set(cases) == {"ttft_p95 <= 450 ms", "e2e_p99 <= 1400 ms", "ttft_p95@l3:rag <= 1000 ms",
                          "similarity_mean >= 0.75"}
    assert cases["ttft_p95 <= 450 ms"].find("failure") is None
    failure = cases["e2e_p99 <= 1400 ms"].find("failure")
    assert failure is not None and failure.get("type") == "miss"
    assert failure.get("message") == "e2e_p99 <= 1400 ms missed at Aggregated: measured 1500.0 ms"
    nodata = cases["ttft_p95@l3:rag <= 1000 ms"]
    assert nodata.get("classname") == "fourfold.slo.l3:rag"
    assert "no requests for l3:rag" in nodata.find("failure").get("message")
    assert cases["similarity_mean >= 0.75"].find("skipped") is not None


SLO_FILE = """\
# the article's SLA
[slo]
ttft_p95 = "<= 450 ms"
e2e_p99 = "<=1.4s"
interruption_rate = "< 0.5 %"
similarity_mean = 0.75          # bare number: >= for quality
ttft_p99 = 1400                 # bare number: <= ms for latency

[slo."l1:saturation"]
output_tps = 100                # >= for throughput
"""


def test_slo_file(tmp_path) -> None:
    path = tmp_path / "slo.toml"
    path.write_text(SLO_FILE)
    slos = load_slo(str(path))
    assert to_spec(slos) == ("ttft_p95<=450ms,e2e_p99<=1400ms,interruption_rate<0.5%,similarity_mean>=0.75,"
                             "ttft_p99<=1400ms,output_tps@l1:saturation>=100")
    assert is_slo_file(str(path)) and is_slo_file("missing.toml") and not is_slo_file("ttft_p95<=4")


@pytest.mark.parametrize(("content", "message"), [
    ("ttft_p95 = '<= 450 ms'\n", "expected a [slo] table"),
    ("[slo]\n", "the [slo] table is empty"),
    ("[slo]\nttft_p95 = '<= 450'\n[other]\nx = 1\n", "unknown top-level key(s) ['other']"),
    ("[slo]\nttft_p95 = <= 450\n", "is not valid TOML"),
    ("[slo]\nttft_p95 = true\n", "ttft_p95 = True: expected a string"),
    ("[slo]\nttft_p9 = '<= 450 ms'\n", "unknown metric 'ttft_p9'"),
    ("[slo]\nerror_rate = 2\n", "did you mean 2%?"),
    ("[slo.'l1:x'.deeper]\nttft_p95 = 1\n", "nests too deep"),
])
def test_malformed_slo_files(tmp_path, content: str, message: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(content)
    with pytest.raises(SLOSpecError) as info:
        load_slo_file(path)
    assert message in str(info.value) and str(path) in str(info.value)


def test_missing_slo_file(tmp_path) -> None:
    with pytest.raises(SLOSpecError, match="does not exist"):
        load_slo(str(tmp_path / "nope.toml"))


def test_repository_ci_slo_file_parses() -> None:
    from tests.conftest import REPO

    slos = load_slo(str(REPO / "ci" / "slo.toml"))
    assert to_spec(slos).startswith("ttft_p95<=450ms,e2e_p99<=1400ms,interruption_rate<0.5%")


def _run_dir(tmp_path, summary: dict | None):
    run = tmp_path / "runs" / "20250101T000000Z-candidate"
    run.mkdir(parents=True)
    record = {"level": "l1", "scenario": "s", "error_class": "ok"}
    (run / "records.jsonl").write_text(json.dumps(record) + "\n")
    if summary is not None:
        (run / "summary.json").write_text(json.dumps(summary))
    return run


def test_check_run_and_the_cli(tmp_path, capsys) -> None:
    summary = {**_summary(), "slo": {"spec": "ttft_p95<=450ms"}}
    run = _run_dir(tmp_path, summary)
    result = check_run(run)                               # the spec the run was gated with
    assert result.exit_code == 0 and [v.status for v in result.verdicts] == ["pass"]
    junit = tmp_path / "out" / "check.xml"
    code = cli_main(["check", str(run), "--slo", "ttft_p95<=450ms,similarity_mean>=0.75",
                     "--junit", str(junit)])
    out = capsys.readouterr().out
    assert code == 3
    assert "fourfold check 20250101T000000Z-candidate: 1 of 2 failed (exit code 3)" in out
    assert "NOT SCORED" in out and "run `fourfold score RUN_DIR` first" in out
    failure = ET.parse(junit).getroot().find("testsuite/testcase[@name='similarity_mean >= 0.75']/failure")
    assert failure is not None and failure.get("type") == "not_scored"
    summary["quality"] = QUALITY                         # after `fourfold score`
    (run / "summary.json").write_text(json.dumps(summary))
    assert cli_main(["check", str(run), "--slo", "ttft_p95<=450ms,similarity_mean>=0.75"]) == 0


@pytest.mark.parametrize(("summary", "args", "message"), [
    (None, [], "has no summary.json: the run did not finish"),
    ({"total": {}, "groups": []}, [], "no --slo given and the run was not gated"),
    ({"total": {}, "groups": []}, ["--slo", "ttft_p95<=fast"], "cannot read"),
])
def test_check_usage_errors_exit_2(tmp_path, capsys, summary, args, message) -> None:
    run = _run_dir(tmp_path, summary)
    assert cli_main(["check", str(run), *args]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(("records", "message"), [
    (None, "records.jsonl': missing; a run's verdicts stand on its records"),
    ("", "records.jsonl' is empty: the run recorded no request, there is nothing to gate"),
    ("\n  \n", "records.jsonl' is empty"),
    ("folder", "records.jsonl': not a regular file"),
    ("fifo", "records.jsonl': not a regular file"),
])
def test_check_fails_a_run_without_records(tmp_path, capsys, records, message) -> None:
    run = _run_dir(tmp_path, {**_summary(), "slo": {"spec": "ttft_p95<=450ms"}})
    path = run / "records.jsonl"
    path.unlink()
    if records == "folder":
        path.mkdir()
    elif records == "fifo":
        os.mkfifo(path)                  # opening it would wait for a writer for ever
    elif records is not None:
        path.write_text(records)
    assert cli_main(["check", str(run)]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1

"""Reading run directories for reports: what is wrong with a broken or foreign one is said clearly
(file and problem, exit code 2), and one run's two variants can be compared."""

from __future__ import annotations

import json

import pytest

from fourfold.cli import main
from fourfold.reports.compare import CompareSettings
from fourfold.reports.load import RunDirError, load_run
from fourfold.reports.report import report_from_paths
from tests.rundirs import RunSpec, write_run


@pytest.fixture
def run(tmp_path):
    return write_run(tmp_path / "runs", RunSpec("base", seed=1, n=20))


@pytest.mark.parametrize("breakage, message", [
    (lambda run: (run / "meta.json").write_text("{not json"), r"meta\.json: not readable JSON"),
    (lambda run: (run / "meta.json").write_text("[1, 2]"), r"meta\.json: expected a JSON object, found list"),
    (lambda run: (run / "meta.json").write_text(json.dumps({"record_schema": 99})),
     r"meta\.json: record_schema 99 is newer than the 1 this fourfold reads; upgrade"),
    (lambda run: (run / "summary.json").write_text("{"), r"summary\.json: not readable JSON"),
    (lambda run: (run / "records.jsonl").unlink(),
     r"not a fourfold run directory: no records\.jsonl \(found meta\.json"),
    (lambda run: (run / "records.jsonl").write_text(""),
     r"records\.jsonl: nothing to compare \(no readable record\)"),
    (lambda run: (run / "records.jsonl").write_text('{"name": "x", "value": 1}\n'),
     r"records\.jsonl:1: not a fourfold record \(missing level, scenario, error_class, started_at\)"),
    (lambda run: (run / "records.jsonl").write_text("[1, 2, 3]\n"),
     r"records\.jsonl:1: expected a JSON object"),
    (lambda run: (run / "scores.jsonl").write_text('{"similarity": 0.5}\n'),
     r"scores\.jsonl:1: not a fourfold score row \(no item_id\)"),
])
def test_broken_directories_say_which_file_and_what(run, breakage, message):
    breakage(run)
    with pytest.raises(RunDirError, match=message):
        load_run(run)


def test_newer_record_schema_names_the_line(run):
    lines = (run / "records.jsonl").read_text().splitlines()
    newer = json.loads(lines[3])
    newer["schema"] = 2
    lines[3] = json.dumps(newer)
    (run / "records.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(RunDirError, match=r"records\.jsonl:4: record schema 2 is newer than the 1"):
        load_run(run)


def test_missing_and_non_run_paths(tmp_path):
    with pytest.raises(RunDirError, match="no such directory"):
        load_run(tmp_path / "nope")
    (tmp_path / "file.txt").write_text("x")
    with pytest.raises(RunDirError, match="not a directory"):
        load_run(tmp_path / "file.txt")


def test_only_warmup_records_is_nothing_to_compare(run):
    lines = [json.loads(line) for line in (run / "records.jsonl").read_text().splitlines()]
    (run / "records.jsonl").write_text("".join(json.dumps({**r, "warmup": True}) + "\n" for r in lines))
    with pytest.raises(RunDirError, match="all 20 records are warm-up or cancelled"):
        load_run(run)


def test_cli_reports_a_broken_run_with_exit_code_2(run, tmp_path, capsys):
    (run / "meta.json").write_text("{")
    assert main(["compare", str(run), str(run), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("fourfold: error: ") and "meta.json: not readable JSON" in err


def test_two_variants_of_one_run(tmp_path, capsys):
    ab = write_run(tmp_path / "runs", RunSpec("ab", seed=5, n=120, variant_of=["A", "B"]))
    report = report_from_paths([ab], settings=CompareSettings(resamples=300))     # exactly two variants: auto
    comparison = report.comparisons[0]
    assert (comparison.baseline.variant, comparison.candidate.variant) == ("A", "B")
    assert comparison.groups() == ["l1:saturation"]                        # saturation@A / @B meet
    assert comparison.baseline.groups["l1:saturation"].requests == 60
    swapped = report_from_paths([ab], variants=["B", "A"], settings=CompareSettings(resamples=300))
    assert swapped.comparisons[0].baseline.variant == "B"
    assert main(["compare", str(ab), "--variants", "A", "C", "--out", str(tmp_path / "o")]) == 2
    assert "no records of variant(s) C; variants in this run: A, B" in capsys.readouterr().err


def test_one_run_without_two_variants_is_a_usage_error(run, tmp_path, capsys):
    assert main(["compare", str(run), "--out", str(tmp_path / "o")]) == 2
    assert "it has 0 (no variant field set)" in capsys.readouterr().err


def test_goodput_slo_from_the_command_line(run, tmp_path):
    other = write_run(tmp_path / "runs2", RunSpec("cand", seed=2, n=20, ttft_plain=(400.0, 8.0)))
    report = report_from_paths([run, other], slo_ms={"ttft_ms": 300.0},
                               settings=CompareSettings(resamples=300))
    goodput = next(r for r in report.comparisons[0].rows if r.metric == "goodput_rps")
    # every baseline request meets 300 ms; of the candidate's, only the structured half (plain ones take 400)
    assert 0.4 < goodput.candidate / goodput.baseline < 0.6
    assert any("ttft_ms <= 300" in note for note in report.notes)


def _session_run(base, label: str, completed_every: int, rounds: int, recall: float):
    from fourfold.measure.record import RequestRecord
    from fourfold.rundir.runlog import RunWriter

    writer = RunWriter(label, base)
    writer.write_meta({"label": label, "level": "l4"})
    for i in range(60):
        final = i % 3 == 2
        extra = {"session_id": f"s{i // 3}", "turn": i % 3 + 1, "final": final, "recall_at_k": recall,
                 "precision_at_k": recall / 2}
        if final:
            extra.update(session_completed=(i // 3) % completed_every != 0, rounds=rounds + (i // 3) % 2)
        writer.append(RequestRecord(level="l4", scenario="session", item_id=f"q{i % 10}", started_at=1e9 + i,
                                    ttft_ms=50.0, e2e_ms=200.0, chunk_offsets_ms=[50.0, 120.0, 200.0],
                                    output_tokens=3, terminal=True, status=200, ttfb_ms=1.0, extra=extra))
    writer.close()
    return writer.run_dir


def test_session_and_retrieval_facts_come_from_extra(tmp_path):
    base = _session_run(tmp_path / "a", "base", completed_every=2, rounds=4, recall=0.6)
    cand = _session_run(tmp_path / "b", "cand", completed_every=10, rounds=3, recall=0.8)
    rows = {r.metric: r for r in report_from_paths(
        [base, cand], settings=CompareSettings(resamples=300)).comparisons[0].rows}
    assert rows["completion_rate"].baseline == pytest.approx(50.0)      # 10 of 20 sessions
    assert rows["completion_rate"].candidate == pytest.approx(90.0)
    assert rows["rounds_mean"].baseline == pytest.approx(4.5) and rows["rounds_mean"].candidate == 3.5
    assert rows["recall_at_k"].paired and rows["recall_at_k"].delta == pytest.approx(20.0)
    assert rows["precision_at_k"].candidate == pytest.approx(40.0)


def test_score_rows_without_some_columns_and_unreadable_lines(run):
    rows = [json.loads(line) for line in (run / "scores.jsonl").read_text().splitlines()]
    lines = [json.dumps({k: v for k, v in row.items() if k != "compliant"}) for row in rows[:5]]
    lines[2] = lines[2][:20]                                     # a torn line: skipped with a warning
    (run / "scores.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.warns(RuntimeWarning, match=r"scores\.jsonl: skipped 1 unreadable line"):
        scores = load_run(run, cache=False).scores
    assert len(scores) == 4 and scores["compliant"].isna().all() and scores["similarity"].notna().all()
    (run / "scores.jsonl").write_text("\n".join([*lines, '{"similarity": 0.5}']) + "\n")
    with pytest.raises(RunDirError, match=r"scores\.jsonl:6: not a fourfold score row"):
        load_run(run, cache=False)

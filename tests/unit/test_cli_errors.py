"""A missing or damaged run directory, through `fourfold check`, `compare`, `score` and `mirror`: one line on
stderr that names the file and the problem, the exit code its error class carries, and the same
class (and message) from every reader of the same file (fourfold/errors.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from fourfold import cli
from fourfold.errors import (
    FourfoldError,
    RecordsFormatError,
    RunDirError,
    SchemaError,
    SLOSpecError,
    UsageError,
)
from fourfold.fingerprint.runscore import score_run
from fourfold.gates.gate import check_run
from fourfold.measure.record import RequestRecord
from fourfold.reports.load import load_run
from fourfold.rundir.runlog import RunWriter
from fourfold.rundir.runread import read_records

ITEM_IDS = ("qa-brief", "qa-three-points", "http3-three-advantages")   # in the bundled prompts
SUMMARY = {"total": {"requests": 6, "ok": 6, "ttft_ms": {"p95": 120.0}}, "groups": [],
           "slo": {"spec": "ttft_p95<=450ms"}}


class NoModel:
    """An embedder for runs that fail before anything is scored: encoding is a test failure."""

    model_id = "none"

    def encode(self, texts):
        raise AssertionError(f"a damaged run reached the model with {len(texts)} texts")


def write_run(base: Path, label: str = "base") -> Path:
    with RunWriter(label, base, now_s=1_767_225_600.0) as writer:
        writer.write_meta({"label": label, "level": "l1", "settings": {"dataset": "", "stall_ms": 150.0}})
        for i in range(6):
            offsets = [100.0 + i, 120.0 + i, 140.0 + i]
            writer.append(RequestRecord(level="l1", scenario="saturation", item_id=ITEM_IDS[i % 3],
                                        request_id=f"{label}-{i}", started_at=1_767_225_600.0 + i, status=200,
                                        ttfb_ms=5.0, ttft_ms=offsets[0], e2e_ms=offsets[-1],
                                        chunk_offsets_ms=offsets, output_tokens=3, content_chunks=3,
                                        terminal=True, text="an answer"))
        writer.write_summary(SUMMARY)
    return writer.run_dir


def replace_line(path: Path, lineno: int, text: str) -> None:
    lines = path.read_text(encoding="utf-8").splitlines()
    lines[lineno - 1] = text
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def newer_schema(run: Path) -> None:
    path = run / "records.jsonl"
    record = json.loads(path.read_text(encoding="utf-8").splitlines()[2])
    replace_line(path, 3, json.dumps({**record, "schema": 2}))


def write(name: str, text: str) -> Callable[[Path], None]:
    return lambda run: (run / name).write_text(text, encoding="utf-8")


RECORDS_READERS = ("compare", "score", "mirror")
# damage, the class every reader raises, the message (after the run directory), the commands reading the file
DAMAGES: list[tuple[str, Callable[[Path], None], type[FourfoldError], str, tuple[str, ...]]] = [
    ("record not an object", lambda run: replace_line(run / "records.jsonl", 2, "[1, 2, 3]"),
     RecordsFormatError, "records.jsonl:2: expected a JSON object (a fourfold record), got list",
     RECORDS_READERS),
    ("record of another program", lambda run: replace_line(run / "records.jsonl", 2, '{"name": "x"}'),
     RecordsFormatError, "records.jsonl:2: not a fourfold record (missing level, scenario, error_class, "
                         "started_at); is this a run directory written by fourfold?", RECORDS_READERS),
    ("record of a newer schema", newer_schema, SchemaError,
     "records.jsonl:3: record schema 2 is newer than the 1 this fourfold reads; upgrade fourfold to read "
     "this run", RECORDS_READERS),
    ("summary not JSON", write("summary.json", "{"), RunDirError,
     "summary.json: not readable JSON (Expecting property name enclosed in double quotes: line 1 column 2 "
     "(char 1)); the run directory is damaged", ("check", "compare", "score")),
    ("summary not an object", write("summary.json", "[1]"), RunDirError,
     "summary.json: expected a JSON object, found list; is this a fourfold run directory?",
     ("check", "compare", "score")),
    ("summary with NaN",
     write("summary.json", '{"total": {"requests": 6, "ttft_ms": {"p95": NaN}}}'), RunDirError,
     "summary.json: not readable JSON (NaN is not a number JSON allows); the run directory is damaged",
     ("check", "compare", "score")),
    ("summary with a number beyond a double",
     write("summary.json", '{"total": {"requests": 1e999}}'), RunDirError,
     "summary.json: not readable JSON (the number 1e999 is beyond a double); the run directory is damaged",
     ("check", "compare", "score")),
    ("summary with an integer beyond a double",
     write("summary.json", '{"total": {"requests": 1' + "0" * 400 + "}}"), RunDirError,
     "summary.json: not readable JSON (the number 1" + "0" * 39 + "... is beyond a double); the run "
     "directory is damaged", ("check", "compare", "score")),
    ("summary nested 100,000 deep", write("summary.json", "[" * 100_000 + "]" * 100_000), RunDirError,
     "summary.json: not readable JSON (nested too deeply); the run directory is damaged",
     ("check", "compare", "score")),
    ("meta with Infinity",
     write("meta.json", '{"label": "base", "settings": {"stall_ms": Infinity}}'), RunDirError,
     "meta.json: not readable JSON (Infinity is not a number JSON allows); the run directory is damaged",
     ("compare", "score")),
    ("meta not JSON", write("meta.json", ""), RunDirError,
     "meta.json: not readable JSON (Expecting value: line 1 column 1 (char 0)); the run directory is damaged",
     ("compare", "score")),
]

COMMAND_ARGS = {
    "check": lambda run, out: ["check", str(run)],
    "compare": lambda run, out: ["compare", str(run), str(run), "--out", str(out), "--no-html",
                                 "--resamples", "100"],
    "score": lambda run, out: ["score", str(run), "--no-cache", "--no-compare-cache"],
    "mirror": lambda run, out: ["mirror", str(run), "--no-similarity", "--out", str(out / "mirror.md")],
}


def library_call(command: str, run: Path) -> None:
    """What the command calls, without the CLI."""
    if command == "check":
        check_run(run)
    elif command == "compare":
        load_run(run, cache=False)
    elif command == "mirror":
        list(read_records(run))
    else:
        score_run(run, NoModel(), progress=False, write=False)


def test_an_intact_run_passes_every_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = write_run(tmp_path / "runs")
    assert cli.main(COMMAND_ARGS["check"](run, None)) == 0
    assert capsys.readouterr().err == ""
    assert cli.main(COMMAND_ARGS["compare"](run, tmp_path / "out")) == 0
    assert (tmp_path / "out").is_dir()
    assert [r.request_id for r in read_records(run)] == [f"base-{i}" for i in range(6)]


@pytest.mark.parametrize(("damage", "expected", "message", "commands"),
                         [pytest.param(*d[1:], id=d[0]) for d in DAMAGES])
def test_a_damaged_file_is_one_line_and_exit_2_on_every_command(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: Callable[[Path], None],
        expected: type[FourfoldError], message: str, commands: tuple[str, ...]) -> None:
    run = write_run(tmp_path / "runs")      # `fourfold score` gets the real (lazily loaded) model
    damage(run)
    line = f"fourfold: error: {run}/{message}\n"
    for command in commands:
        assert cli.main(COMMAND_ARGS[command](run, tmp_path / "out")) == 2, command
        captured = capsys.readouterr()
        assert (captured.err, captured.out) == (line, ""), command
        with pytest.raises(FourfoldError) as info:
            library_call(command, run)
        assert (type(info.value), str(info.value)) == (expected, f"{run}/{message}"), command
    assert not (tmp_path / "out").exists()          # nothing was written for a damaged run


@pytest.mark.parametrize("command", ["check", "compare", "score", "mirror"])
def test_a_missing_run_directory_is_a_run_dir_error(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                    command: str) -> None:
    missing = tmp_path / "runs" / "20260101T000000Z-nope"
    assert cli.main(COMMAND_ARGS[command](missing, tmp_path / "out")) == 2
    err = capsys.readouterr().err
    assert err == f"fourfold: error: {missing}: no such directory\n"      # the same line from every command
    if command != "mirror":                  # read_records yields nothing for a missing directory
        with pytest.raises(RunDirError):
            library_call(command, missing)


def test_check_on_a_summary_of_the_wrong_shape(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = write_run(tmp_path / "runs")
    (run / "summary.json").write_text(json.dumps({"groups": [1, 2], "slo": {"spec": "ttft_p95@l1:x<=450ms"}}))
    assert cli.main(["check", str(run)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"fourfold: error: {run}/summary.json: not a fourfold summary (")
    assert err.count("\n") == 1
    (run / "summary.json").write_text(json.dumps({"total": {}, "slo": "ttft_p95<=450ms"}))
    assert cli.main(["check", str(run)]) == 2
    assert "no --slo given and the run was not gated with one" in capsys.readouterr().err


@pytest.mark.parametrize(("summary", "problem"), [
    ({"total": 5, "groups": []}, '"total" must be an object and "groups" a list of objects'),
    ({"total": {}, "groups": "l1:x"}, '"total" must be an object and "groups" a list of objects'),
    ({"total": {}, "groups": [{"level": "l1"}, 7]},
     '"total" must be an object and "groups" a list of objects'),
    ({"total": {"requests": 6, "ttft_ms": {"p95": True}}}, "ttft_p95 is True, not a number"),
    ({"total": {"requests": 6, "ttft_ms": {"p95": "120"}}}, "ttft_p95 is '120', not a number"),
    ({"total": {"requests": 6, "ttft_ms": {"p95": [120]}}}, "ttft_p95 is [120], not a number"),
])
def test_check_on_a_garbage_summary_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                           summary: dict, problem: str) -> None:
    run = write_run(tmp_path / "runs")
    (run / "summary.json").write_text(json.dumps({**summary, "slo": {"spec": "ttft_p95<=450ms"}}))
    assert cli.main(["check", str(run)]) == 2
    assert capsys.readouterr() == ("", f"fourfold: error: {run}/summary.json: not a fourfold summary "
                                       f"({problem}); the run directory is damaged\n")


@pytest.mark.parametrize(("args", "line"), [
    (["compare", "{run}", "{run}", "--out", "{file}"],
     "--out {file} is a file; give a directory (report.md, .html and .csv go into it)"),
    (["compare", "{run}", "{run}", "--out", "{file}/report"],
     "--out {file}/report is inside {file}, a file; give a directory (report.md, .html and .csv go into it)"),
    (["compare", "{run}", "{run}", "--stall-ms", "nan"], "--stall-ms must be a number > 0, got nan"),
    (["compare", "{run}", "{run}", "--goodput-slo", "ttft_ms=-1"],
     "--goodput-slo 'ttft_ms=-1': expected METRIC=MS pairs with MS > 0, such as 'ttft_ms=450,e2e_ms=1400'"),
    (["demo", "--quick", "--out", "{file}"],
     "--out {file} is a file; give a directory (report.md, .html and .csv go into it)"),
    (["mirror", "{run}", "--no-similarity", "--out", "{run}"],
     "--out {run}: give a file path for the Markdown "
     "(a directory is there, or a file where a directory should be)"),
    (["probe", "feature", "--host", "http://127.0.0.1:9", "--header", "NoColon"],
     "--header 'NoColon': expected 'Name: value'"),
    (["probe", "inflection", "--host", "http://127.0.0.1:9", "-n", "0"], "-n must be a number >= 1, got 0"),
    (["probe", "inflection", "--host", "http://127.0.0.1:9", "--pause-ms", "nan"],
     "--pause-ms must be a number >= 0, got nan"),
])
def test_a_bad_option_of_a_command_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                          args: list[str], line: str) -> None:
    run = write_run(tmp_path / "runs")
    (tmp_path / "afile").write_text("not a directory")
    names = {"run": str(run), "file": str(tmp_path / "afile")}
    assert cli.main([a.format(**names) for a in args]) == 2
    assert capsys.readouterr() == ("", f"fourfold: error: {line.format(**names)}\n")
    assert (tmp_path / "afile").read_text() == "not a directory"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile", "runs"]        # nothing written


def test_a_bad_slo_file_is_an_slo_spec_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = write_run(tmp_path / "runs")
    slo = tmp_path / "slo.toml"
    slo.write_text("[slo\nttft_p95 = '<= 450 ms'\n", encoding="utf-8")
    assert cli.main(["check", str(run), "--slo", str(slo)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"fourfold: error: SLO file '{slo}' is not valid TOML: ") and err.count("\n") == 1
    with pytest.raises(SLOSpecError):
        check_run(run, str(slo))


def test_the_cli_re_exports_the_tree_and_each_class_its_exit_code() -> None:
    import fourfold.errors as errors

    assert set(errors.__all__) <= set(cli.__all__)
    assert all(getattr(cli, name) is getattr(errors, name) for name in errors.__all__)
    codes = {name: getattr(errors, name).exit_code for name in errors.__all__}
    assert codes == {"FourfoldError": 1, "UsageError": 2, "GateFailed": 3, "SLOSpecError": 2,
                     "UnknownDialect": 2, "RunDirError": 2, "RecordsFormatError": 2, "SchemaError": 2,
                     "ProfileError": 2, "FaultError": 2, "ScriptError": 2, "SplitError": 2, "DatasetError": 2,
                     "OptionError": 2,
                     "ModelUnavailable": 1, "TargetStartError": 1, "SimulatorStartError": 1,
                     "RagServiceStartError": 1, "UpstreamError": 1}
    assert all(issubclass(getattr(errors, name), FourfoldError) for name in errors.__all__)
    # callers that caught ValueError / RuntimeError before the tree still catch them
    for name in ("SLOSpecError", "UnknownDialect", "RecordsFormatError", "SchemaError", "ProfileError",
                 "FaultError", "ScriptError", "SplitError", "DatasetError", "OptionError"):
        assert issubclass(getattr(errors, name), ValueError), name
    assert issubclass(errors.SimulatorStartError, RuntimeError)
    assert issubclass(errors.RecordsFormatError, RunDirError) and issubclass(RunDirError, UsageError)


@pytest.mark.parametrize(("module", "name"), [
    ("fourfold.fingerprint.embedder", "ModelUnavailable"),
    ("fourfold.levels.l4_ab", "SplitError"),
    ("fourfold.levels.l4_scripts", "ScriptError"),
    ("fourfold.client.dialects", "UnknownDialect"),
    ("fourfold.rundir.runread", "SchemaError"),
    ("fourfold.gates.slo", "SLOSpecError"),
    ("fourfold.reports.load", "RunDirError"),
    ("fourfold.reports.records", "RecordsFormatError"),
    ("fourfold.targets.launch", "SimulatorStartError"),
    ("fourfold.targets.rag.launch", "RagServiceStartError"),
    ("fourfold.targets.rag.upstream", "UpstreamError"),
    ("fourfold.targets.sim.faults", "FaultError"),
    ("fourfold.targets.sim.profile", "ProfileError"),
])
def test_the_old_homes_re_export_the_classes(module: str, name: str) -> None:
    import importlib

    import fourfold.errors as errors

    assert getattr(importlib.import_module(module), name) is getattr(errors, name)


def test_an_error_prints_itself_on_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    import pickle

    from fourfold.errors import UpstreamError

    UsageError("--alpha must be within (0, 0.5)").show()
    assert capsys.readouterr().err == "fourfold: error: --alpha must be within (0, 0.5)\n"
    copy = pickle.loads(pickle.dumps(UpstreamError(503, "upstream answered 503: busy")))   # crosses processes
    assert (type(copy), copy.status, str(copy)) == (UpstreamError, 503, "upstream answered 503: busy")


def test_a_bad_thread_count_is_a_usage_error(monkeypatch, tmp_path, capsys):
    from fourfold.fingerprint.embedder import THREADS_ENV, default_threads

    monkeypatch.setenv(THREADS_ENV, "many")
    with pytest.raises(UsageError, match="FOURFOLD_EMBED_THREADS='many' is not a whole number"):
        default_threads()

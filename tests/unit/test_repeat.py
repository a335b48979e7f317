"""``fourfold repeat``: the plan (ABBA order, seeds, arguments, what is printed) as pure functions, and the
command through ``fourfold.cli.main`` with a fake launcher (no locust here:
tests/integration/test_repeat.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fourfold import cli
from fourfold.cli import repeat as repeat_cmd
from fourfold.cli import repeat_plan as plan
from fourfold.cli.repeat_plan import PlannedRun, RepeatSide, RunOutcome
from fourfold.errors import UsageError
from fourfold.rundir.runlog import RunWriter

A, B = "baseline", "candidate"


@pytest.mark.parametrize(("count", "sides", "expected"), [
    (1, ["runs"], [("runs", 1)]),
    (3, ["runs"], [("runs", 1), ("runs", 2), ("runs", 3)]),
    (1, [A, B], [(A, 1), (B, 1)]),
    (2, [A, B], [(A, 1), (B, 1), (B, 2), (A, 2)]),
    (3, [A, B], [(A, 1), (B, 1), (B, 2), (A, 2), (A, 3), (B, 3)]),
])
def test_launch_order(count: int, sides: list[str], expected: list[tuple[str, int]]) -> None:
    assert plan.launch_order(count, sides) == expected


@pytest.mark.parametrize("count", range(1, 9))
def test_abba_cancels_a_linear_drift_over_every_two_pairs(count: int) -> None:
    """A run at position t slowed by t: the candidate's mean position minus the baseline's is the bias a
    linear drift leaves in the difference; ABBA makes it 0 for an even N, 1/N for an odd one (AB AB: 1)."""
    order = plan.launch_order(count, [A, B])
    total = {side: sum(t for t, (s, _) in enumerate(order) if s == side) for side in (A, B)}
    assert total[B] - total[A] == (0 if count % 2 == 0 else 1)        # means: 0 or 1/N apart
    assert sorted(order) == \
        sorted([(A, r) for r in range(1, count + 1)] + [(B, r) for r in range(1, count + 1)])


def test_seeds_differ_between_repetitions_and_are_shared_within_a_pair() -> None:
    runs = plan.plan_runs(3, [RepeatSide(A, args=("--x",)), RepeatSide(B, args=("--y",))], seed_base=7,
                          label="ab")
    assert [(r.index, r.side, r.repetition, r.seed, r.label) for r in runs] == [
        (1, A, 1, 7, "ab-baseline-1"), (2, B, 1, 7, "ab-candidate-1"),
        (3, B, 2, 8, "ab-candidate-2"), (4, A, 2, 8, "ab-baseline-2"),
        (5, A, 3, 9, "ab-baseline-3"), (6, B, 3, 9, "ab-candidate-3")]
    one_side = plan.plan_runs(2, [RepeatSide("runs")], seed_base=1, label="my run")
    assert [(r.seed, r.label) for r in one_side] == [(1, "my-run-1"), (2, "my-run-2")]


@pytest.mark.parametrize(("text", "expected"), [("1", 1), ("3", 3), ("100", 100), (" 5", 5)])
def test_parse_count(text: str, expected: int) -> None:
    assert plan.parse_count(text) == expected


@pytest.mark.parametrize(("text", "message"), [
    ("0", "from 1 to 100"), ("-2", "from 1 to 100"), ("101", "from 1 to 100"), ("100000000", "from 1 to 100"),
    ("x", "whole number"), ("2.5", "whole number"), ("locust", "got 'locust'")])
def test_a_bad_count_is_a_usage_error(text: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        plan.parse_count(text)


@pytest.mark.parametrize(("rest", "expected"), [
    (["--", "locust", "-f", "l1.py"], ["locust", "-f", "l1.py"]),
    (["locust", "-f", "l1.py"], ["locust", "-f", "l1.py"]),     # argparse took the '--' after N
    ([], []),
])
def test_command_after_dashes(rest: list[str], expected: list[str]) -> None:
    assert plan.command_after_dashes(rest) == expected


def test_an_unknown_option_before_the_dashes_is_named() -> None:
    with pytest.raises(UsageError, match="unrecognized arguments before '--': --baseline-hots http://a"):
        plan.command_after_dashes(["--baseline-hots", "http://a", "--", "locust"])


@pytest.mark.parametrize(("command", "expected"), [
    (["locust", "-f", "l1.py", "--headless"], ["-f", "l1.py", "--headless"]),
    (["/opt/venv/bin/locust", "-f", "l1.py"], ["-f", "l1.py"]),
    (["python3", "-m", "locust", "-f", "l1.py"], ["-f", "l1.py"]),
    (["/usr/bin/python3.11", "-m", "locust"], []),
])
def test_locust_arguments(command: list[str], expected: list[str]) -> None:
    assert plan.locust_arguments(command) == expected


@pytest.mark.parametrize(("command", "message"), [
    ([], "no command after '--'"),
    (["python", "bench.py"], "must be locust"),
    (["python", "-m", "fourfold", "run", "l1"], "must be locust"),
    (["k6", "run", "script.js"], "must be locust"),
])
def test_a_command_that_is_not_locust_is_a_usage_error(command: list[str], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        plan.locust_arguments(command)


@pytest.mark.parametrize(("hosts", "args", "expected"), [
    ((None, None), (None, None), (RepeatSide("runs"),)),
    (("", ""), ("", ""), (RepeatSide("runs"),)),
    (("http://a", "http://b"), (None, None), (RepeatSide(A, "http://a"), RepeatSide(B, "http://b"))),
    ((None, None), ("--sim-profile baseline", "--sim-profile candidate"),
     (RepeatSide(A, args=("--sim-profile", "baseline")), RepeatSide(B, args=("--sim-profile", "candidate")))),
    (("http://a", "http://b"), ("--model 'm a'", None),
     (RepeatSide(A, "http://a", ("--model", "m a")), RepeatSide(B, "http://b"))),
    ((None, None), ("--model a", "--model a"),
     (RepeatSide(A, args=("--model", "a")), RepeatSide(B, args=("--model", "a")))),
])
def test_make_sides(hosts: tuple, args: tuple, expected: tuple[RepeatSide, ...]) -> None:
    assert plan.make_sides(hosts[0], hosts[1], args[0], args[1]) == expected


@pytest.mark.parametrize(("hosts", "args", "message"), [
    (("http://a", None), (None, None), "only the baseline side"),
    ((None, None), (None, "--http2"), "only the candidate side"),
    (("http://a", None), (None, "--http2"), "both --baseline-host and --candidate-host"),
    ((None, None), ("--model 'a", "--model b"), "--baseline-args"),
])
def test_bad_sides_are_usage_errors(hosts: tuple, args: tuple, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        plan.make_sides(hosts[0], hosts[1], args[0], args[1])


TWO_HOSTS = (RepeatSide(A, "http://a"), RepeatSide(B, "http://b"))


@pytest.mark.parametrize(("args", "sides", "message"), [
    (["-f", "l1.py", "--label", "x"], (RepeatSide("runs"),), "--label in the command"),
    (["-f", "l1.py", "--run-dir=elsewhere"], (RepeatSide("runs"),), "--run-dir in the command"),
    (["--seed", "3"], (RepeatSide("runs"),), "--seed in the command"),
    (["--sim-seed=3"], (RepeatSide("runs"),), "--sim-seed in the command"),
    ([], (RepeatSide(A, args=("--seed", "1")), RepeatSide(B, args=("--x",))), "--seed in --baseline-args"),
    (["--host", "http://c"], TWO_HOSTS, "--host in the command"),
    (["-Hhttp://c"], TWO_HOSTS, "--host in the command"),
    ([], (RepeatSide(A, "http://a"), RepeatSide(B, "http://b", ("--host", "http://c"))),
     "--host in --candidate-args"),
])
def test_options_repeat_sets_itself_are_refused(args: list[str], sides: tuple[RepeatSide, ...],
                                                message: str) -> None:
    with pytest.raises(UsageError, match=message):
        plan.check_arguments(args, sides)


@pytest.mark.parametrize(("args", "sides"), [
    (["-f", "l1.py", "--host", "http://c", "--seed-like", "1"], (RepeatSide("runs"),)),  # one target for both
    (["-f", "l1.py", "--host", "http://c"],
     (RepeatSide(A, args=("--model", "a")), RepeatSide(B, args=("--model", "b")))),
    (["-f", "l1.py", "--shuffle", "--sim-profile", "flat"], TWO_HOSTS),
])
def test_arguments_repeat_leaves_alone(args: list[str], sides: tuple[RepeatSide, ...]) -> None:
    plan.check_arguments(args, sides)


def test_run_arguments() -> None:
    run = PlannedRun(index=2, side=B, repetition=1, seed=5, label="r-candidate-1")
    side = RepeatSide(B, "http://b:8000", ("--sim-profile", "candidate"))
    assert plan.run_arguments(["-f", "l1.py", "--headless"], side, run, "runs/rep") == [
        "-f", "l1.py", "--headless", "--sim-profile", "candidate", "--host", "http://b:8000",
        "--run-dir", "runs/rep", "--label", "r-candidate-1", "--seed", "5", "--sim-seed", "5", "--shuffle"]
    assert plan.run_arguments(["--shuffle"], RepeatSide("runs"), run, "o")[-1] == "5"              # not twice
    assert "--shuffle" not in plan.run_arguments([], RepeatSide("runs"), run, "o", shuffle=False)


@pytest.mark.parametrize(("args", "expected"), [
    (["--api-key", "sk-abcdefghijkl", "-u", "8"], ["--api-key", "***", "-u", "8"]),
    (["--api-key=sk-abcdefghijkl"], ["--api-key=***"]),
    (["--header", "X-Tenant: acme-42", "--header-public", "X-Version: 2"],
     ["--header", "X-Tenant: ***", "--header-public", "X-Version: 2"]),
    (["--header=Authorization: Bearer abc"], ["--header=Authorization: ***"]),
    (["--host", "https://user:hunter2@gw.example/v1"], ["--host", "https://user:***@gw.example/v1"]),
    (["-f", "l1.py", "--max-tokens", "64"], ["-f", "l1.py", "--max-tokens", "64"]),
])
def test_redact_args(args: list[str], expected: list[str]) -> None:
    assert plan.redact_args(args) == expected


def outcome(index: int, side: str, repetition: int, exit_code: int = 0, run_dir: str | None = "",
            records: int = 10,
            ) -> RunOutcome:
    run = PlannedRun(index, side, repetition, repetition, f"r-{side}-{repetition}")
    found = f"out/T{index}-r-{side}-{repetition}" if run_dir == "" else run_dir
    return RunOutcome(run, ("-f", "l1.py", "--api-key", "sk-abcdefghijkl"), exit_code, found,
                      None if found is None else records, "2026-12-01T00:00:00Z", 5.0)


def test_the_printed_summary_and_compare_command() -> None:
    outcomes = [outcome(1, A, 1), outcome(2, B, 1, exit_code=3), outcome(3, B, 2),
                outcome(4, A, 2, records=7)]
    assert plan.format_summary(outcomes, [A, B], 4, "out/repeat.json", None) == [
        "fourfold repeat: 4 of 4 runs, order baseline candidate candidate baseline",
        "  #  side      rep  seed exit  records  run directory",
        "  1  baseline    1     1    0       10  out/T1-r-baseline-1",
        "  2  candidate   1     1    3       10  out/T2-r-candidate-1",
        "  3  candidate   2     2    0       10  out/T3-r-candidate-2",
        "  4  baseline    2     2    0        7  out/T4-r-baseline-2",
        "exit: 3 an SLO missed",
        "baseline: out/T1-r-baseline-1 out/T4-r-baseline-2",
        "candidate: out/T2-r-candidate-1 out/T3-r-candidate-2",
        "manifest: out/repeat.json",
        "next: fourfold compare --baseline out/T1-r-baseline-1 out/T4-r-baseline-2 "
        "--candidate out/T2-r-candidate-1 out/T3-r-candidate-2",
    ]


def test_a_missing_run_directory_is_shown_and_one_side_gets_a_placeholder() -> None:
    outcomes = [outcome(1, "runs", 1), outcome(2, "runs", 2, exit_code=1, run_dir=None)]
    lines = plan.format_summary(outcomes, ["runs"], 3, "o/repeat.json", "run 2 ended with a usage error")
    assert lines[3] == "  2  runs        2     2    1        -  (none)"
    assert lines[4:] == [
        "exit: 1 failed requests or an error",
        "runs: out/T1-r-runs-1",
        "stopped: run 2 ended with a usage error",
        "1 run left no run directory: #2",
        "manifest: o/repeat.json",
        "next: fourfold compare --baseline out/T1-r-runs-1 --candidate <the other version's run directories>"]
    assert plan.compare_command([outcome(1, A, 1), outcome(2, B, 1, run_dir=None)], [A, B]) is None


def test_the_manifest_redacts_commands() -> None:
    sides = (RepeatSide(A, "https://u:pw-123456@a/v1", ("--header", "X-Key: k-123456")),
             RepeatSide(B, "http://b"))
    data = plan.manifest(count=1, sides=sides, command_args=["-f", "l1.py", "--api-key", "sk-abcdefghijkl"],
                         seed_base=1, shuffle=True, out="out", outcomes=[outcome(1, A, 1), outcome(2, B, 1)],
                         started_at="s", finished_at="f", elapsed_s=10.0, stopped=None, versions={})
    text = json.dumps(data)
    assert "sk-abcdefghijkl" not in text and "pw-123456" not in text and "k-123456" not in text
    assert data["order"] == [A, B] and data["failed"] == [] and data["stopped"] is None
    assert data["command"] == "locust -f l1.py --api-key '***'"
    assert data["sides"][A] == {"host": "https://u:***@a/v1", "args": ["--header", "X-Key: ***"],
                                "run_dirs": ["out/T1-r-baseline-1"], "seeds": [1]}
    assert data["runs"][1]["command"] == "locust -f l1.py --api-key '***'"
    assert data["compare_command"] == \
        "fourfold compare --baseline out/T1-r-baseline-1 --candidate out/T2-r-candidate-1"


# ---- the command, with a fake launcher ----

class FakeLocust:
    """Stands in for ``repeat._launch``: each call writes a run directory (as a fourfold run does, under
    --run-dir with --label) and returns the next exit status; ``None`` in ``dirs`` writes none."""

    def __init__(self, codes: list[int], dirs: list[bool] | None = None) -> None:
        self.codes, self.dirs, self.calls = codes, dirs, []

    def __call__(self, args: list[str], env: dict[str, str]) -> tuple[int, bool]:
        n = len(self.calls)
        self.calls.append(args)
        if self.dirs is None or self.dirs[n]:
            option = {args[i]: args[i + 1] for i in range(len(args) - 1) if args[i].startswith("--")}
            with RunWriter(option["--label"], option["--run-dir"]) as writer:
                writer.write_meta({"level": "l1"})
        return self.codes[n], False


def run_repeat(argv: list[str], fake: FakeLocust, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> int:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(repeat_cmd, "_launch", fake)
    return cli.main(["repeat", *argv])


def test_an_slo_miss_is_recorded_and_the_next_run_goes_on(monkeypatch, tmp_path, capsys) -> None:
    fake = FakeLocust([0, 3, 0, 1])
    code = run_repeat(["2", "--out", "o", "--baseline-host", "http://a", "--candidate-host", "http://b", "--",
                       "locust", "-f", "l1.py", "--headless"], fake, monkeypatch, tmp_path)
    assert code == 0
    assert [call[call.index("--host") + 1] for call in fake.calls] == \
        ["http://a", "http://b", "http://b", "http://a"]
    manifest = json.loads((tmp_path / "o" / "repeat.json").read_text())
    assert [r["exit_code"] for r in manifest["runs"]] == [0, 3, 0, 1]
    assert [r["seed"] for r in manifest["runs"]] == [1, 1, 2, 2]
    assert all((tmp_path / r["run_dir"] / "meta.json").exists() for r in manifest["runs"])
    out = capsys.readouterr().out
    assert out.splitlines()[-1] == f"next: {manifest['compare_command']}"
    assert manifest["compare_command"].startswith("fourfold compare --baseline o/")


def test_a_usage_error_stops_the_repetition(monkeypatch, tmp_path, capsys) -> None:
    fake = FakeLocust([2], dirs=[False])
    code = run_repeat(["3", "--out", "o", "--", "locust", "-f", "l1.py", "--headless", "--bad"], fake,
                      monkeypatch, tmp_path)
    assert code == 2 and len(fake.calls) == 1
    manifest = json.loads((tmp_path / "o" / "repeat.json").read_text())
    assert manifest["failed"] == [1] and "usage error" in manifest["stopped"]
    assert "next: no compare command" in capsys.readouterr().out


def test_a_run_without_a_run_directory_makes_the_exit_status_1(monkeypatch, tmp_path, capsys) -> None:
    fake = FakeLocust([0, 1, 0], dirs=[True, False, True])
    assert run_repeat(["3", "--out", "o", "--", "locust", "-f", "l1.py", "--headless"], fake, monkeypatch,
                      tmp_path) == 1
    assert len(fake.calls) == 3
    assert "1 run left no run directory: #2" in capsys.readouterr().out


@pytest.mark.parametrize(("argv", "message"), [
    (["0", "--", "locust"], "N must be from 1 to 100"),
    (["1000", "--", "locust"], "N must be from 1 to 100"),
    (["3"], "no command after '--'"),
    (["3", "--", "python", "bench.py"], "must be locust"),
    (["3", "--label", "x", "--", "locust", "--label", "y"], "--label in the command"),
    (["3", "--baseline-host", "http://a", "--", "locust"], "only the baseline side"),
])
def test_bad_input_is_one_line_and_exit_2(monkeypatch, tmp_path, capsys, argv: list[str],
                                          message: str) -> None:
    fake = FakeLocust([])
    assert run_repeat(argv, fake, monkeypatch, tmp_path) == 2
    err = capsys.readouterr().err
    assert err.startswith("fourfold: error: ") and message in err and err.count("\n") == 1
    assert fake.calls == [] and not (tmp_path / "runs").exists()


def test_an_out_directory_with_a_manifest_is_refused(monkeypatch, tmp_path, capsys) -> None:
    (tmp_path / "o").mkdir()
    (tmp_path / "o" / "repeat.json").write_text("{}")
    assert run_repeat(["1", "--out", "o", "--", "locust"], FakeLocust([]), monkeypatch, tmp_path) == 2
    assert "already holds a repeat.json" in capsys.readouterr().err

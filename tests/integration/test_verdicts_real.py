"""The verdicts on real runs of the embedded simulator, as a user makes them: ``fourfold repeat`` then
``fourfold compare --fail-on-worse``. One version compared with itself (runs a side, at L1, L3 and
L4) passes the gate with no better / worse row; a candidate whose TTFT is 15 % slower fails it with
4 runs a side. The machine is whatever CI has, busy or not (docs/statistics.md, "Calibration")."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from tests import forkserver
from tests.conftest import locust_env

pytestmark = [pytest.mark.integration, pytest.mark.slow]

LOAD = {   # short runs with enough requests for the p50 rows: answers cut at 32 tokens
    "l1": ("l1_throughput.py", ["-u", "12", "-r", "12", "-t", "8s", "--max-tokens", "32"]),
    "l3": ("l3_rag.py", ["-u", "6", "-r", "6", "-t", "8s", "--max-tokens", "32"]),
    "l4": ("l4_session.py",
           ["-u", "6", "-r", "6", "-t", "8s", "--max-tokens", "32", "--think-scale", "0.02"]),
}


def repeat(tmp_path: Path, level: str, count: int, *side_args: str, users: int | None = None) -> dict:
    """``fourfold repeat``: one side (``count`` runs) or two (``--baseline-args``, ``--candidate-args``);
    ``users``: instead of the level's usual count."""
    locustfile, load = LOAD[level]
    if users is not None:
        load = ["-u", str(users), "-r", str(users), *load[4:]]
    out = tmp_path / f"repeat-{level}-{len(list(tmp_path.iterdir()))}"
    command = ["repeat", str(count), "--out", str(out), "--label", level, *side_args, "--", "locust",
               "-f", str(Path(__file__).resolve().parents[2] / "locustfiles" / locustfile),
               "--headless", *load]
    proc = forkserver.run(command, tmp_path, locust_env(), 280, module="fourfold")
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    return json.loads((out / "repeat.json").read_text())


def compare(tmp_path: Path, baseline: list[str], candidate: list[str],
            *extra: str) -> tuple[int, str, list[dict]]:
    out = tmp_path / "report"
    proc = forkserver.run(["compare", "--baseline", *baseline, "--candidate", *candidate, "--out", str(out),
                           "--no-html", "--fail-on-worse", *extra], tmp_path, locust_env(), 120,
                          module="fourfold")
    with open(out / "report.csv", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    return proc.returncode, proc.stdout + proc.stderr, rows


def dirs(manifest: dict, tmp_path: Path, side: str | None = None) -> list[str]:
    return [str(tmp_path / r["run_dir"]) for r in manifest["runs"] if side is None or r["side"] == side]


@pytest.mark.timeout(600)
@pytest.mark.parametrize("level", ["l1", "l3", "l4"])
def test_one_version_against_itself_passes_the_gate(tmp_path, level):
    manifest = repeat(tmp_path, level, 4)
    runs = dirs(manifest, tmp_path)
    code, output, rows = compare(tmp_path, runs[0::2], runs[1::2])      # interleaved: 1, 3 against 2, 4
    decided = [(r["group"], r["metric"], r["verdict"], r["delta_pct"]) for r in rows
               if r["verdict"] in ("better", "worse")]
    assert code == 0 and not decided, (decided, output[-3000:])
    tested = [r for r in rows if r["p_value"]]
    assert len(tested) >= 5, output[-3000:]         # the rows were tested, not merely left without a verdict
    assert "gate: passed" in output and "sides sent different workloads" not in output


@pytest.mark.timeout(600)
def test_a_ttft_regression_of_15_percent_fails_the_gate_with_4_runs_a_side(tmp_path):
    base, slow = tmp_path / "base.json", tmp_path / "slow.json"
    base.write_text(json.dumps({"extends": "baseline", "ttft_ms": 400.0,
                                "description": "the baseline with a 400 ms first token"}))
    slow.write_text(json.dumps({"extends": "baseline", "ttft_ms": 460.0,
                                "description": "the same with its first token 15 % later"}))
    # On 2 shared cores (three other test workers, or two busy loops) the TTFT measured is the
    # profile's plus ~50 ms of waiting for a core, which drifts with the neighbours' load. Against an
    # 80 ms TTFT that drift is most of the reading: 4 runs a side decided +15 % (80 -> 92 ms) in most
    # CI runs, not all (once: inconclusive, the report asking for 5). At 400 ms the same drift is an
    # eighth of the reading and 4 runs a side decide +15 %. 4 users: less of the waiting is our own.
    manifest = repeat(tmp_path, "l1", 4, "--baseline-args", f"--sim-profile {base}",
                      "--candidate-args", f"--sim-profile {slow}", users=4)
    code, output, rows = compare(tmp_path, dirs(manifest, tmp_path, "baseline"),
                                 dirs(manifest, tmp_path, "candidate"))
    ttft = {r["metric"]: r for r in rows if r["metric"].startswith("ttft_")}
    assert code == 3 and ttft["ttft_p50"]["verdict"] == "worse", output[-3000:]
    assert 8 < float(ttft["ttft_p50"]["delta_pct"]) < 22 and "TTFT p50" in output

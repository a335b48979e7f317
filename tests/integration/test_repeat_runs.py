"""``fourfold repeat`` for real: 2 runs a side of L1 on the embedded simulator, baseline and candidate
profiles, each a fresh locust process (about 25 s on 2 cores)."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import locust_env, read_jsonl

pytestmark = pytest.mark.integration


def item_orders(run_dir: Path) -> dict[int, list[str]]:
    """Each user's items in the order it sent them."""
    orders: dict[int, list[str]] = {}
    for record in sorted(read_jsonl(run_dir / "records.jsonl"), key=lambda r: r["started_at"]):
        orders.setdefault(record["user_id"], []).append(record["item_id"])
    return orders


def same_prefix(a: dict[int, list[str]], b: dict[int, list[str]]) -> bool:
    return a.keys() == b.keys() and all(a[u][:len(b[u])] == b[u][:len(a[u])] for u in a)


def test_two_runs_a_side_interleaved_abba_with_a_seed_per_repetition(tmp_path, locustfile):
    command = [sys.executable, "-m", "fourfold", "repeat", "2", "--baseline-args", "--sim-profile baseline",
               "--candidate-args", "--sim-profile candidate", "--",
               "locust", "-f", locustfile("l1_throughput.py"),
               "--headless", "-u", "2", "-r", "2", "-t", "4s", "--max-tokens", "16"]
    proc = subprocess.run(command, cwd=tmp_path, env=locust_env(), capture_output=True, text=True,
                          timeout=150, check=False)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    [out] = [p for p in (tmp_path / "runs").iterdir() if p.name.startswith("repeat-")]
    manifest = json.loads((out / "repeat.json").read_text())
    runs = manifest["runs"]
    assert manifest["order"] == ["baseline", "candidate", "candidate", "baseline"]
    assert [(r["side"], r["repetition"], r["seed"], r["exit_code"]) for r in runs] == [
        ("baseline", 1, 1, 0), ("candidate", 1, 1, 0), ("candidate", 2, 2, 0), ("baseline", 2, 2, 0)]
    run_dirs = [tmp_path / r["run_dir"] for r in runs]
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == sorted(p.name for p in run_dirs)
    for run, run_dir in zip(runs, run_dirs):
        records = read_jsonl(run_dir / "records.jsonl")
        assert records and len(records) == run["records"]
        settings = json.loads((run_dir / "meta.json").read_text())["settings"]
        assert (settings["sim_profile"] == run["side"]
                and settings["seed"] == settings["sim_seed"] == run["seed"])
        assert (settings["shuffle"] is True
                and run_dir.name.endswith(f"-repeat-{run['side']}-{run['repetition']}"))
    # the simulator's plan carries its seed and profile: each run drew from its own repetition's seed
    plans = [{(rec["plan"]["seed"], rec["plan"]["profile"]) for rec in read_jsonl(p / "records.jsonl")
              if rec.get("plan")}
             for p in run_dirs]
    assert plans == [{(r["seed"], r["side"])} for r in runs]
    # --shuffle with the seed: a pair sends the same items in the same order per user, repetitions do not
    orders = [item_orders(p) for p in run_dirs]
    assert same_prefix(orders[0], orders[1]) and same_prefix(orders[2], orders[3])
    assert not same_prefix(orders[0], orders[3]) and not same_prefix(orders[1], orders[2])
    baseline = [r["run_dir"] for r in sorted(runs, key=lambda r: r["repetition"]) if r["side"] == "baseline"]
    candidate = [r["run_dir"] for r in sorted(runs, key=lambda r: r["repetition"])
                 if r["side"] == "candidate"]
    expected = f"fourfold compare --baseline {shlex.join(baseline)} --candidate {shlex.join(candidate)}"
    assert manifest["compare_command"] == expected
    assert proc.stdout.splitlines()[-1] == f"next: {expected}"
    assert f"baseline: {' '.join(baseline)}" in proc.stdout.splitlines()
    assert manifest["sides"]["candidate"]["args"] == ["--sim-profile", "candidate"]
    assert manifest["runs"][1]["command"].startswith(
        f"locust -f {shlex.quote(locustfile('l1_throughput.py'))}")
    assert Path(baseline[0]).parent == Path(manifest["out"])

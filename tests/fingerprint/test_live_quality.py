"""--score-live end to end: a headless L1 run against the embedded simulator scores a sample of its
answers in a child process, and the live figures are those ``fourfold score`` gives the same answers."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from tests.conftest import locust_env, only_run_dir, read_jsonl, run_locust

pytestmark = [pytest.mark.slow, pytest.mark.integration]


def test_live_similarity_equals_fourfold_score_of_the_same_answers(tmp_path, locustfile):
    proc = run_locust(["-f", locustfile("l1_throughput.py"), "--headless", "-u", "4", "-r", "4", "-t", "15s",
                       "--sim-profile", "flat", "--no-ignore-eos", "--score-live", "--score-live-every", "2",
                       "--score-live-max-per-s", "0"], tmp_path, timeout=150)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    run = only_run_dir(tmp_path)
    live = json.loads((run / "summary.json").read_text())["quality_live"]
    assert live["scored"] > 0 and live["scorer_ready"] and "error" not in live, live
    assert live["scored"] + live["pending"] + sum(live["skipped"].values()) == \
        live["sampled"] - live["dropped"]
    measured = [r for r in read_jsonl(run / "records.jsonl") if not r["warmup"] and r["error_class"] == "ok"]
    assert live["sampled"] == math.ceil(len(measured) / 2)         # 1 in 2 of the answers, no cap
    live_rows = {row["request_id"]: row for row in read_jsonl(run / "scores_live.jsonl")}
    assert len(live_rows) == live["scored"]

    score = subprocess.run([sys.executable, "-m", "fourfold", "score", str(run), "--no-cache",
                            "--threads", "1"], cwd=tmp_path, env=locust_env(), capture_output=True,
                           text=True, timeout=150, check=False)
    assert score.returncode == 0, score.stderr[-3000:]
    full = {row["request_id"]: row for row in read_jsonl(run / "scores.jsonl")}
    same = [full[request_id] for request_id in live_rows]              # every live-scored answer is scored
    mean = math.fsum(row["similarity"] for row in same) / len(same)
    assert live["similarity_mean"] == pytest.approx(mean, abs=1e-4)
    judged = [row["compliant"] for row in same if row["compliant"] is not None]
    assert live["structure_n"] == len(judged) > 0
    assert live["structure_compliance"] == pytest.approx(sum(judged) / len(judged), abs=1e-4)
    for request_id, row in live_rows.items():
        assert row["similarity"] == pytest.approx(full[request_id]["similarity"], abs=1e-4)
        assert row["delivered_items"] == full[request_id]["delivered_items"]

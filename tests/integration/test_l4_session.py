"""L4 through real locust processes: hand-computed sessions, sticky A/B, custom scripts, master + worker."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import defaultdict

import pytest

from fourfold.data import DATA_DIR
from fourfold.levels.l4_ab import assign_variant
from fourfold.levels.l4_scripts import load_scripts
from tests.conftest import LOCUST, free_port, locust_env, only_run_dir, read_jsonl, run_locust

pytestmark = pytest.mark.integration
SCRIPTS = load_scripts(DATA_DIR / "sessions" / "sessions.jsonl")
FAST = ["--think-scale", "0", "--sessions-per-user", "1"]


def sessions_of(records: list[dict]) -> dict[str, list[dict]]:
    by_session: dict[str, list[dict]] = defaultdict(list)
    for record in records:
        if "session_id" in record["extra"]:
            by_session[record["extra"]["session_id"]].append(record)
    return {sid: sorted(turns, key=lambda r: r["extra"]["turn"]) for sid, turns in by_session.items()}


def run_dir_of(tmp_path, proc):
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    run = only_run_dir(tmp_path)
    return (run, json.loads((run / "meta.json").read_text()), json.loads((run / "summary.json").read_text()),
            read_jsonl(run / "records.jsonl"), out)


def test_stepwise_completion_and_rounds_equal_the_hand_computation(tmp_path, locustfile):
    # stepwise: one goal fact per answer, so a script with n facts and max_turns m takes
    # min(n, m) turns and completes exactly when n <= m (no model, no randomness; with
    # --patience-scale 0 no timing either: a slow machine cannot make a persona leave).
    expected_rounds = [min(len(s.facts), s.max_turns) for s in SCRIPTS]
    expected_done = [len(s.facts) <= s.max_turns for s in SCRIPTS]
    n = len(SCRIPTS)
    proc = run_locust(["-f", locustfile("l4_session.py"), "--headless", "-u", str(n), "-r", str(n),
                       "-t", "60s", "--sim-profile", "stepwise", "--patience-scale", "0", *FAST],
                      tmp_path, timeout=90)
    run, meta, summary, records, out = run_dir_of(tmp_path, proc)
    assert "every user finished its sessions" in out and "fourfold sessions" in out
    total = summary["sessions"]["total"]
    assert (total["ended"], total["cut"], total["abandoned"]) == (n, 0, 0)
    assert total["completion_rate"] == sum(expected_done) / n
    assert 0 < total["completion_rate"] < 1  # the scripts include sessions that run out of turns
    assert total["rounds_mean"] == pytest.approx(sum(expected_rounds) / n, rel=1e-12)
    assert total["rounds_to_completion_mean"] == pytest.approx(
        sum(r for r, done in zip(expected_rounds, expected_done) if done) / sum(expected_done), rel=1e-12)
    assert meta["settings"]["dataset"].endswith("data/sessions/sessions.jsonl")
    # every session: its script's rounds, the history growing by two messages a turn, one final turn
    sessions = sessions_of([r for r in records if not r["warmup"]])
    assert len(sessions) == n
    rounds_by_script = {s.id: r for s, r in zip(SCRIPTS, expected_rounds)}
    for sid, turns in sessions.items():
        script_id = turns[0]["item_id"]
        assert len(turns) == rounds_by_script[script_id], sid
        assert [t["plan"]["messages"] for t in turns] == [2 * k + 1 for k in range(len(turns))]
        assert [t["extra"]["messages"] for t in turns] == [2 * k + 1 for k in range(len(turns))]
        assert [t["extra"]["final"] for t in turns] == [False] * (len(turns) - 1) + [True]
        assert [t["plan"]["session"]["revealed_before"] for t in turns] == list(range(len(turns)))
        last = turns[-1]["extra"]
        assert last["rounds"] == len(turns) and last["session_completed"] == (last["outcome"] == "completed")
        assert last["facts_covered"] == len(turns)
        assert 0 < last["session_duration_ms"] < 60_000
    assert summary["total"]["requests"] == sum(expected_rounds)     # per-turn latency: one record a turn


def test_ab_without_host_starts_baseline_and_candidate_and_keeps_users_sticky(tmp_path, locustfile):
    n = len(SCRIPTS)
    proc = run_locust(["-f", locustfile("l4_session.py"), "--headless", "-u", str(n), "-r", str(n),
                       "-t", "60s", "--ab-split", "50/50", "--sim-seed", "3", *FAST,
                       "--csv", str(tmp_path / "loc")], tmp_path, timeout=90)
    run, meta, summary, records, out = run_dir_of(tmp_path, proc)
    ab = meta["ab"]
    assert ab["share_a"] == 0.5 and ab["variants"]["A"]["profile"] == "baseline"
    assert ab["variants"]["B"]["profile"] == "candidate"
    assert ab["variants"]["A"]["host"] != ab["variants"]["B"]["host"]
    variants_of_user: dict[int, set[str]] = defaultdict(set)
    for record in records:
        variants_of_user[record["user_id"]].add(record["variant"])
        assert record["scenario"] == f"session@{record['variant']}"
        # routed right
        assert record["plan"]["profile"] == {"A": "baseline", "B": "candidate"}[record["variant"]]
    assert all(len(v) == 1 for v in variants_of_user.values())
    assert {u: v.pop() for u, v in variants_of_user.items()} == \
        {u: assign_variant(f"u{u}", 0.5) for u in range(n)}
    by_variant = summary["sessions"]["by_variant"]
    assert set(by_variant) == {"A", "B"} and by_variant["A"]["ended"] + by_variant["B"]["ended"] == n
    # the candidate's first answers state more of the goal: fewer rounds (the article: 4.2 -> 3.1)
    assert by_variant["B"]["rounds_mean"] < by_variant["A"]["rounds_mean"]
    groups = {g["scenario"] for g in summary["groups"]}
    assert groups == {"session@A", "session@B"}
    csv_text = (tmp_path / "loc_stats.csv").read_text()
    assert "l4:session@A" in csv_text and "l4:session@B" in csv_text
    assert "fourfold sessions" in out and "\nA " in out and "\nB " in out
    # the comparison report (reports/, `fourfold compare`) shows completion and rounds, A vs B
    pytest.importorskip("fourfold.reports.compare")
    report = subprocess.run([sys.executable, "-m", "fourfold", "compare", str(run), "--variants", "A", "B",
                             "--no-html", "--out", str(tmp_path / "report")], cwd=tmp_path, env=locust_env(),
                            capture_output=True, text=True, timeout=120, check=False)
    assert report.returncode == 0, report.stdout[-2000:] + report.stderr[-2000:]
    lines = report.stdout.lower().splitlines()
    rounds_row = next(line for line in lines if "rounds" in line and line.startswith("|"))
    assert (f"{by_variant['A']['rounds_mean']:.2f}" in rounds_row
            and f"{by_variant['B']['rounds_mean']:.2f}" in rounds_row)
    assert any("completion" in line and line.startswith("|") for line in lines)


def test_custom_scripts_reach_the_simulator_and_an_impatient_persona_abandons(tmp_path, locustfile):
    scripts = tmp_path / "mine.jsonl"
    lines = [{"id": f"tea-{k}", "prompt": f"How do I make tea number {k}?",
              "reference": "Boil the water. Add milk.",
              "facts": [{"key": "boil", "ask": "the water"}, {"key": "milk", "ask": "what to add"}],
              "max_turns": 3,
              "persona": {"think_time_s": [0, 0], "patience": {"ttft_ms": 20, "e2e_ms": 60000}}}
             for k in (1, 2)]
    scripts.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    proc = run_locust(["-f", locustfile("l4_session.py"), "--headless", "-u", "2", "-r", "2", "-t", "40s",
                       "--sim-profile", "stepwise", "--dataset", str(scripts), "--think-scale", "0",
                       "--sessions-per-user", "2", "--warmup-requests", "0"], tmp_path, timeout=60)
    run, meta, summary, records, out = run_dir_of(tmp_path, proc)
    total = summary["sessions"]["total"]
    # stepwise answers start after 50 ms: every session is abandoned on its first turn
    assert (total["ended"], total["abandoned"], total["abandoned_by"]["ttft"]) == (4, 4, 4)
    assert (total["abandonment_rate"] == 1.0 and total["completion_rate"] == 0.0
            and total["rounds"] == {"1": 4})
    assert {r["item_id"] for r in records} == {"tea-1", "tea-2"}
    assert all(r["plan"]["session"]["id"] == r["item_id"] for r in records)   # the simulator read the file
    assert all(r["extra"]["final"] and r["extra"]["abandon_reason"] == "ttft" for r in records)
    assert meta["settings"]["dataset"] == str(scripts)
    assert meta["l4"] == {"think_scale": 0.0, "patience_scale": 1.0, "sessions_per_user": 2,
                          "tool_latency_ms": 200.0, "agent_max_rounds": 6,
                          "ab_share_a": None, "ab_host": "", "ab_profile": "candidate", "ab_seed": 0}


def test_master_and_worker_route_variants_and_merge_sessions(tmp_path, locustfile):
    port = free_port()
    common = ["-f", locustfile("l4_session.py"), *FAST]
    master = subprocess.Popen(
        [*LOCUST, *common, "--master", "--master-bind-host", "127.0.0.1", "--master-bind-port", str(port),
         "--headless", "-u", "8", "-r", "8", "-t", "7s", "--expect-workers", "1", "--ab-split", "50/50",
         "--sim-profile", "stepwise", "--ab-profile", "flat"],
        cwd=tmp_path, env=locust_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    worker = subprocess.Popen([*LOCUST, *common, "--worker", "--master-host", "127.0.0.1",
                               "--master-port", str(port)],
                              cwd=tmp_path, env=locust_env(), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    try:
        master_out, _ = master.communicate(timeout=60)
        worker.communicate(timeout=30)
    finally:
        for proc in (master, worker):
            if proc.poll() is None:
                proc.kill()
    assert master.returncode == 0, master_out[-4000:]
    run = only_run_dir(tmp_path)
    records = read_jsonl(run / "records.jsonl")
    summary = json.loads((run / "summary.json").read_text())
    # the worker got B's host
    assert {r["plan"]["profile"] for r in records if r["variant"] == "B"} == {"flat"}
    assert {r["plan"]["profile"] for r in records if r["variant"] == "A"} == {"stepwise"}
    finals = [r for r in records if r["extra"].get("final")]
    total = summary["sessions"]["total"]
    assert total["ended"] == len(finals) == 8                      # merged on the master, each once
    by_variant = summary["sessions"]["by_variant"]
    assert {v: b["ended"] for v, b in by_variant.items()} == \
        {v: sum(r["variant"] == v for r in finals) for v in by_variant}
    # flat answers the whole reference at once: every B session completes in one round
    if "B" in by_variant:
        assert by_variant["B"]["rounds"] == {"1": by_variant["B"]["ended"]}

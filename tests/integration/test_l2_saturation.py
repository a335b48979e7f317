"""--stop-on-saturation (ladder and sweep) and --probe-request-rate through real locust processes.

The embedded simulator, profile ``flat`` (first token at 50 ms, then one every 10 ms, no jitter),
answers cut to 20 tokens: one answer takes S = 50 + 19 x 10 = 240 ms. With ``--sim-max-concurrency
C`` it generates C answers at once and queues the rest, so a closed loop of U > C users holds U - C
requests in its queue, each waiting about (U - C) / C x S.

A closed loop cannot keep growing (its queue holds at most the users), so its TTFT jumps when the
users go up and then holds: the ladder's stop comes from Little's law between steps (users x2,
output tokens/s flat, TTFT p50 up). An open loop above capacity does keep growing: the sweep's
step at 12/s against C = 2 (capacity 2 / S = 8.33/s) builds a queue that grows by 0.44 s per second.
"""

from __future__ import annotations

import csv
import json

import pytest

from fourfold.cli import main
from fourfold.levels.arrivals import ArrivalProcess, arrival_offsets
from fourfold.levels.l2_probe import PROBE_SEED_OFFSET
from tests.conftest import only_run_dir, read_jsonl, run_distributed, run_locust

pytestmark = pytest.mark.integration
ANSWER = ["--sim-profile", "flat", "--max-tokens", "20", "--ignore-eos", "--sim-over-limit", "queue"]
LADDER = ["--ladder", "4,8,16", "--ladder-hold-s", "5", "--stop-on-saturation", "--only-summary"]


def _run(tmp_path, args: list[str]) -> tuple[str, dict, list[dict]]:
    proc = run_locust(args, tmp_path, timeout=90)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    run = only_run_dir(tmp_path)
    return out, json.loads((run / "summary.json").read_text()), read_jsonl(run / "records.jsonl")


def test_a_ladder_past_saturation_ends_early_with_the_reason(tmp_path, locustfile):
    """4 slots: 4 users never wait; 8 users double nothing but the queue. The run ends at step 8,
    3.0 s in (the comparison waits max(3 s, hold / 4)), long before the ladder's 15 s."""
    out, summary, records = _run(tmp_path, ["-f", locustfile("l2_gateway.py"), "--headless", *LADDER, *ANSWER,
                                            "--sim-max-concurrency", "4"])
    ladder = summary["l2"]["ladder"]["ladder"]
    stopped = ladder["stopped"]
    assert stopped["step"] == 8 and 3.0 <= stopped["in_step_s"] <= 5.0 and stopped["at_s"] < 10.0, stopped
    assert stopped["reason"].startswith("past saturation: users 4 -> 8 (x2.0) but output tokens/s"), stopped
    assert "the added users wait in the server's queue (Little's law)" in stopped["reason"]
    assert [step["users"] for step in ladder["steps"]] == [4, 8]
    assert not any(r["scenario"] == "ladder@16" for r in records)
    four, eight = ladder["steps"]
    assert four["ttft_p50_ms"] < 70 and eight["ttft_p50_ms"] > 4 * four["ttft_p50_ms"]      # ~50 vs ~300 ms
    assert eight["output_tps"] < 1.1 * four["output_tps"]
    assert "L2 ladder 'ladder' stopped early at 8 users" in out and stopped["reason"] in out
    # the report says so too
    run = only_run_dir(tmp_path)
    assert main(["compare", str(run), str(run), "--out", str(tmp_path / "out"), "--no-plots"]) == 0
    report = (tmp_path / "out" / "report.md").read_text()
    assert "ladder 'ladder' stopped early at 8 users" in report


def test_a_healthy_ladder_with_the_option_runs_every_step(tmp_path, locustfile):
    """32 slots: every step keeps up (TTFT ~50 ms, tokens/s doubling): no verdict, all three steps."""
    out, summary, _ = _run(tmp_path, ["-f", locustfile("l2_gateway.py"), "--headless", *LADDER, *ANSWER,
                                      "--sim-max-concurrency", "32"])
    ladder = summary["l2"]["ladder"]["ladder"]
    assert "stopped" not in ladder and "stopped early" not in out
    assert [step["users"] for step in ladder["steps"]] == [4, 8, 16]
    assert all(step["ttft_p50_ms"] < 70 for step in ladder["steps"]), ladder["steps"]


def test_a_sweep_step_over_saturated_misses_with_the_reason(tmp_path, locustfile):
    """12/s against a capacity of 8.33/s: TTFT from arrival climbs all step long, and the SLO (5 s) alone
    would have passed it; 12 / 2.25 = 5.33/s is 64 % of capacity: no alarm."""
    out, summary, _ = _run(tmp_path, [
        "-f", locustfile("l2_open_loop.py"), "--headless", "--sweep", "--sweep-step-s", "6",
        "--arrival-rate", "12", "--arrival-process", "constant", "--slo", "ttft_p95<=5000ms",
        "--sweep-max-steps", "2",
        "--sim-max-concurrency", "2", "--warmup-requests", "0", "--stop-on-saturation", "--only-summary",
        *ANSWER])
    rates = {row["offered_rps"]: row for row in summary["l2"]["sweep"]["rates"]}
    over, under = rates[12.0], rates[5.333]
    assert not over["passed"] and over["saturated"], over
    assert over["reason"].startswith("over-saturated: TTFT from arrival rose "), over["reason"]
    assert "requests in flight and growing" in over["reason"]
    assert over["latency_ms"]["ttft_ms"]["p95"] < 5000          # the SLO alone: a pass
    assert under["passed"] and under["reason"] == "" and not under["saturated"], under
    assert "MISSES (over-saturated" in out


def test_the_probe_is_a_group_of_its_own_beside_a_ladder(tmp_path, locustfile):
    """4/s of 8-token probes beside a 2,4-user ladder on 4 slots: as many probes as the seeded Poisson
    schedule has in the run's 8 s, every one 8 tokens, in l2:probe only; the ladder's steps hold none,
    and ``fourfold compare`` has the probe's own TTFT rows."""
    out, summary, records = _run(tmp_path, [
        "-f", locustfile("l2_gateway.py"), "--headless", "--ladder", "2,4", "--ladder-hold-s", "4",
        "--probe-request-rate", "4", "--sim-max-concurrency", "4", *ANSWER])
    probes = [r for r in records if r["scenario"] == "probe"]
    schedule = arrival_offsets(ArrivalProcess("poisson", 4.0), 10.0, PROBE_SEED_OFFSET)
    # started with the test, stopped with it (8 s of ladder, give or take Locust's start and stop)
    assert len([t for t in schedule if t <= 7.0]) - 1 <= len(probes) <= len([t for t in schedule if t <= 9.0])
    assert all(r["level"] == "l2" and r["output_tokens"] == 8 for r in probes if r["error_class"] == "ok")
    assert all(r["output_tokens"] == 20 for r in records
               if r["scenario"] != "probe" and r["error_class"] == "ok")
    groups = {g["scenario"]: g for g in summary["groups"]}
    measured = [r for r in probes if not r["warmup"] and r["error_class"] != "cancelled"]
    assert groups["probe"]["requests"] == len(measured) >= 20
    block = summary["l2"]["probe"]
    assert block["rate_rps"] == 4.0 and block["max_tokens"] == 8 and block["requests"] == len(measured)
    assert block["ttft_ms"]["p50"] == groups["probe"]["ttft_ms"]["p50"]
    assert [s["users"] for s in summary["l2"]["ladder"]["ladder"]["steps"]] == [2, 4]
    assert sum(s["requests"] for s in summary["l2"]["ladder"]["ladder"]["steps"]) == sum(
        g["requests"] for name, g in groups.items() if name.startswith("ladder@"))
    assert "L2 interference probe (4/s, 8 tokens, group l2:probe)" in out
    run = only_run_dir(tmp_path)
    assert main(["compare", str(run), str(run), "--out", str(tmp_path / "out"), "--no-plots"]) == 0
    with open(tmp_path / "out" / "report.csv", newline="", encoding="utf-8") as fh:
        rows = {(row["group"], row["metric"]): row for row in csv.DictReader(fh)}
    probe_ttft = float(rows[("l2:probe", "ttft_p50")]["baseline_value"])
    assert probe_ttft == pytest.approx(block["ttft_ms"]["p50"], rel=0.05)
    assert ("l2:ladder@4", "ttft_p50") in rows
    print(f"probe TTFT p50 {probe_ttft:.1f} ms; ladder@2 {groups['ladder@2']['ttft_ms']['p50']:.1f}, "
          f"ladder@4 {groups['ladder@4']['ttft_ms']['p50']:.1f} ms")


def test_on_a_master_with_two_workers_one_worker_sends_the_probe(tmp_path, locustfile):
    """Worker 0 alone: the run's probes match one seeded schedule over its ~6 s, not two (at least
    its first 3 s: on a busy machine the workers start late and the run's 6 s count from the master's
    start; one CI run on six workers probed for 4 s)."""
    common = ["-f", locustfile("l2_gateway.py"), "--ladder", "off", "--probe-request-rate", "4", *ANSWER]
    run_distributed(common, ["-u", "2", "-r", "2", "-t", "6s"], tmp_path, workers=2, timeout=90)
    run = only_run_dir(tmp_path)
    probes = [r for r in read_jsonl(run / "records.jsonl") if r["scenario"] == "probe"]
    schedule = arrival_offsets(ArrivalProcess("poisson", 4.0), 10.0, PROBE_SEED_OFFSET)
    assert len([t for t in schedule if t <= 3.0]) - 1 <= len(probes) <= len([t for t in schedule if t <= 8.0])
    assert len({r["user_id"] for r in probes}) == 1          # one sender
    summary = json.loads((run / "summary.json").read_text())
    assert summary["l2"]["probe"]["requests"] == len([r for r in probes if not r["warmup"]
                                                      and r["error_class"] != "cancelled"])

"""L4 agentic sessions (issue 33, part 2): users offer the bundled sample's tools, run the tool the model
calls (a scripted result after --tool-latency-ms) and send it back until the answer is text; the history
goes out in each dialect's own shape, the simulator reads the tool's result and answers in text."""

from __future__ import annotations

import json

import pytest

from tests.conftest import only_run_dir, read_jsonl, run_locust

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("dialect", ["openai", "anthropic", "responses"])
def test_each_session_calls_a_tool_gets_its_result_and_ends_in_text(tmp_path, locustfile, dialect):
    proc = run_locust(["-f", locustfile("l4_agent.py"), "--headless", "-u", "4", "-r", "4", "-t", "30s",
                       "--dialect", dialect, "--think-scale", "0", "--tool-latency-ms", "80",
                       "--sessions-per-user", "2", "--warmup-requests", "0"], tmp_path)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    run = only_run_dir(tmp_path)
    records = read_jsonl(run / "records.jsonl")
    sessions: dict[str, list[dict]] = {}
    for r in records:
        assert r["error_class"] == "ok" and r["scenario"] == "agent", r["error_detail"]
        sessions.setdefault(r["extra"]["session_id"], []).append(r)
    assert len(sessions) == 8                                       # 4 users x 2 sessions, none cut
    for turns in sessions.values():
        turns.sort(key=lambda r: r["extra"]["turn"])
        first, *rest = turns
        if first["item_id"] == "tool-followup":        # it opens with a tool's result: text at once
            assert len(turns) == 1 and first["extra"]["outcome"] == "completed"
            continue
        assert len(turns) == 2 and not rest[0]["extra"].get("tool_calls")
        assert first["extra"]["tool_call_count"] == 1 and first["extra"]["tool_calls_invalid"] == 0
        # the second request carried the call and its result (3 chat messages), gap >= the tool's latency
        assert rest[0]["extra"]["messages"] == first["extra"]["messages"] + 2
        assert rest[0]["started_at"] - first["started_at"] >= (first["e2e_ms"] + 80) / 1000 - 0.005
        assert rest[0]["text"] and rest[0]["extra"]["final"] and rest[0]["extra"]["session_tool_calls"] == 1
        assert rest[0]["extra"]["rounds"] == 2 and rest[0]["extra"]["session_completed"]
    total = json.loads((run / "summary.json").read_text())["sessions"]["total"]
    followups = sum(t[0]["item_id"] == "tool-followup" for t in sessions.values())
    assert (total["started"], total["ended"], total["completed"], total["cut"]) == (8, 8, 8, 0)
    assert total["tool_calls_per_session"] == pytest.approx((8 - followups) / 8)
    assert total["rounds_mean"] == pytest.approx((2 * (8 - followups) + followups) / 8)

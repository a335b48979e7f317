"""Tool calls end to end (issue 33, part 2): an L1 run of the bundled tools sample against the embedded
simulator, one version calling with arguments that fit the offered tools, one breaking a quarter of them;
the records judge each call, summary.json and the report count them, the comparison flags the worse one."""

from __future__ import annotations

import csv
import json

import pytest

from fourfold.cli import main
from fourfold.data import DATA_DIR
from tests.conftest import only_run_dir, read_jsonl, run_locust

pytestmark = pytest.mark.integration
SAMPLE = DATA_DIR / "datasets" / "tools_sample.jsonl"


def _run(base, locustfile, invalid_rate: float, dialect: str):
    base.mkdir()
    profile = base / "profile.json"
    profile.write_text(json.dumps({"extends": "flat", "itl_ms": 2.0, "tool_call_invalid_rate": invalid_rate}))
    proc = run_locust(["-f", locustfile("l1_throughput.py"), "--headless", "-u", "4", "-r", "4", "-t", "4s",
                       "--sim-profile", str(profile), "--dataset", str(SAMPLE), "--dialect", dialect,
                       "--max-tokens", "120", "--no-ignore-eos", "--warmup-requests", "0"], base)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    return only_run_dir(base)


@pytest.mark.parametrize("dialect", ["openai", "anthropic"])
def test_calls_are_judged_counted_and_compared(tmp_path, locustfile, capsys, dialect):
    good = _run(tmp_path / "good", locustfile, 0.0, dialect)
    bad = _run(tmp_path / "bad", locustfile, 0.25, dialect)
    records = [r for r in read_jsonl(bad / "records.jsonl") if r["error_class"] != "cancelled"]
    assert len(records) >= 40
    for r in records:
        assert r["error_class"] == "ok", r["error_detail"]
        if r["item_id"] == "tool-followup":        # it ends with the tool's result: answered in text
            assert r["text"] and "tool_call_count" not in r["extra"]
            continue
        assert r["finish_reason"] == ("tool_calls" if dialect == "openai" else "tool_use") and r["text"] == ""
        (call,) = r["extra"]["tool_calls"]
        assert r["extra"]["tool_call_count"] == 1 and r["ttft_ms"] == r["ttfo_ms"]
        assert r["extra"]["tool_calls_invalid"] == int("tool_call_problem" in r["extra"])
        assert r["extra"]["tool_calls_invalid"] == r["plan"]["tool_call"]["broken"]   # as the simulator says
        assert call["name"] == r["plan"]["tool_call"]["name"]
    total = json.loads((bad / "summary.json").read_text())["total"]
    broken = sum(r["extra"].get("tool_calls_invalid", 0) for r in records)
    assert total["tool_calls_judged"] == sum(r["extra"].get("tool_call_count", 0) for r in records)
    assert total["tool_call_valid_share"] == pytest.approx(1 - broken / total["tool_calls_judged"])
    assert 0.5 < total["tool_call_valid_share"] < 0.95
    assert json.loads((good / "summary.json").read_text())["total"]["tool_call_valid_share"] == 1.0

    assert main(["compare", str(good), str(bad), "--out", str(tmp_path / "out"), "--no-plots"]) == 0
    with open(tmp_path / "out" / "report.csv", newline="", encoding="utf-8") as fh:
        rows = {row["metric"]: row for row in csv.DictReader(fh)}
    row = rows["tool_call_valid_share"]
    assert float(row["baseline_value"]) == 100.0
    assert float(row["candidate_value"]) == pytest.approx(100 * total["tool_call_valid_share"], abs=0.01)
    assert "tool calls that fit the offered tools" in (tmp_path / "out" / "report.md").read_text()
    capsys.readouterr()

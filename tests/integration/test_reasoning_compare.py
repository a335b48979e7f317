"""A reasoning-heavy and a reasoning-light version of one model, compared: the first token comes as
fast in both (TTFT: the first reasoning token), the first *answer* token far later in the heavy one
(TTFO). The rows move differently, which is why a reasoning model is gated on TTFO
(docs/metrics.md, "Reasoning models")."""

from __future__ import annotations

import json

import pytest

from fourfold.cli import main
from tests.conftest import only_run_dir, run_locust

pytestmark = pytest.mark.integration


def _run(base, locustfile, profile: str):
    base.mkdir()
    proc = run_locust(["-f", locustfile("l1_throughput.py"), "--headless", "-u", "8", "-r", "8", "-t", "6s",
                       "--sim-profile", profile, "--no-ignore-eos", "--max-tokens", "200"], base)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    return only_run_dir(base)


def test_ttft_holds_while_ttfo_moves(tmp_path, locustfile, capsys):
    heavy = _run(tmp_path / "heavy", locustfile, "thinking")
    light = _run(tmp_path / "light", locustfile, "thinking-light")
    summary = json.loads((heavy / "summary.json").read_text())["groups"][0]
    assert summary["reasoning_share"] > 0.7 and summary["ttfo_ms"]["p50"] > 1000
    assert main(["compare", str(light), str(heavy), "--out", str(tmp_path / "out"), "--no-plots"]) == 0
    rows = {row["metric"]: row for row in _csv_rows(tmp_path / "out" / "report.csv")}
    ttft_light, ttft_heavy = (float(rows["ttft_p50"][f"{side}_value"]) for side in ("baseline", "candidate"))
    ttfo_light, ttfo_heavy = (float(rows["ttfo_p50"][f"{side}_value"]) for side in ("baseline", "candidate"))
    assert abs(ttft_heavy - ttft_light) < 10                    # flat's 50 ms in both
    assert ttfo_light < 300 and ttfo_heavy > 1000               # most light answers do not reason
    share = rows["reasoning_share"]
    assert float(share["candidate_value"]) > float(share["baseline_value"])
    assert float(rows["answer_tps_p50"]["baseline_value"]) == pytest.approx(100, rel=0.1)   # 10 ms a token
    assert float(rows["reasoning_tps_p50"]["candidate_value"]) == pytest.approx(100, rel=0.1)   # the same
    report = (tmp_path / "out" / "report.md").read_text()
    assert "TTFO p50 (first answer token)" in report and "answers that reasoned" in report
    capsys.readouterr()


def _csv_rows(path):
    import csv
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))

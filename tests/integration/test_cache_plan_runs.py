"""The prefix-cache share a workload was built for, beside the one the server reported (issue 33, part
6): a --synthetic run whose prompts share a 1536-token prefix plans 1536 of every 2048 tokens after the
first prompt; the simulator's prefix cache serves them; the report shows both."""

from __future__ import annotations

import csv
import json

import pytest

from fourfold.cli import main
from tests.conftest import only_run_dir, run_locust

pytestmark = pytest.mark.integration


def test_the_planned_share_stands_beside_the_measured_one(tmp_path, locustfile, capsys):
    proc = run_locust(["-f", locustfile("l1_throughput.py"), "--headless", "-u", "1", "-r", "1", "-t", "3s",
                       "--synthetic", "input=2048,output=8,n=400,prefix=1536"], tmp_path, timeout=90)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    run = only_run_dir(tmp_path)
    planned = json.loads((run / "meta.json").read_text())["dataset_cache_hit_share"]
    assert planned == pytest.approx(399 * 1536 / (400 * 2048))
    measured = json.loads((run / "summary.json").read_text())["groups"][0]["cache_hit_share"]
    assert measured == pytest.approx(1536 / 2048)     # the warm-up request put the prefix in the cache
    assert main(["compare", str(run), str(run), "--out", str(tmp_path / "out"), "--no-plots"]) == 0
    with open(tmp_path / "out" / "report.csv", newline="", encoding="utf-8") as fh:
        rows = {row["metric"]: row for row in csv.DictReader(fh)}
    assert float(rows["cache_hit_planned"]["baseline_value"]) == pytest.approx(100 * planned, abs=0.01)
    assert float(rows["cache_hit_share"]["baseline_value"]) == pytest.approx(75.0, abs=0.01)
    assert rows["cache_hit_planned"]["verdict"] in ("n/a", "")
    capsys.readouterr()

"""`fourfold demo --quick`: both simulator profiles, L1 runs, the fingerprint, the report, end to end."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import locust_env

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_quick_demo_writes_the_report(tmp_path):
    out = tmp_path / "demo"       # given relative to the caller's directory, which is not the checkout
    proc = subprocess.run([sys.executable, "-m", "fourfold", "demo", "--quick", "--out", "demo"], cwd=tmp_path,
                          env=locust_env(), capture_output=True, text=True, timeout=240, check=False)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    for name in ("report.md", "report.html", "report.csv"):
        assert (out / name).is_file(), name
    runs = sorted(p.name for p in (out / "runs").iterdir())
    assert len(runs) == 2 and runs[0].endswith("demo-baseline-l1") and runs[1].endswith("demo-candidate-l1")
    table = [line for line in proc.stdout.splitlines() if line.startswith("| ") and "(ms)" in line]
    assert len(table) >= 10 and any(line.startswith("| TTFT p50 (ms) |") for line in table)
    assert "## Article check" in proc.stdout and "HTML report: demo/report.html" in proc.stdout
    assert (out / "runs" / runs[0] / "scores.jsonl").is_file()       # the fingerprint scored the runs
    assert "similarity mean" in (out / "report.md").read_text()

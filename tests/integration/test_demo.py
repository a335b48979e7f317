"""`fourfold demo --quick`: both simulator profiles, every level, the fingerprint, the report and the
article check, end to end."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import locust_env

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.mark.timeout(600)        # two runs of each profile and level, interleaved
def test_quick_demo_writes_the_report(tmp_path):
    out = tmp_path / "demo"       # given relative to the caller's directory, which is not the checkout
    proc = subprocess.run([sys.executable, "-m", "fourfold", "demo", "--quick", "--out", "demo"],
                          cwd=tmp_path, env=locust_env(), capture_output=True, text=True,
                          timeout=480, check=False)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    for name in ("report.md", "report.html", "report.csv"):
        assert (out / name).is_file(), name
    runs = sorted(p.name.split("-demo-")[1] for p in (out / "runs").iterdir())
    # every level, twice
    assert runs == sorted(f"{profile}-{level}-{repetition}" for profile in ("baseline", "candidate")
                          for level in ("l1", "l2", "l3", "l4") for repetition in (1, 2))
    assert all((path / "scores.jsonl").is_file() for path in (out / "runs").iterdir())   # all scored
    table = [line for line in proc.stdout.splitlines() if line.startswith("| ") and "(ms)" in line]
    assert len(table) >= 10 and any(line.startswith("| TTFT p50 (ms) † |") for line in table)
    report = (out / "report.md").read_text()
    assert all(f"### {group}" in report for group in ("l1:saturation", "l2:closed", "l3:rag", "l4:session"))
    assert "similarity mean" in report and "rounds per session" in report and "retrieval recall@k" in report

    # the demo ends with the article check: every row of the article, each with an outcome
    check = proc.stdout[proc.stdout.index("## Article check"):]
    rows = [line for line in check.splitlines() if line.startswith("| ") and not line.startswith("| effect")]
    assert len(rows) == 14
    assert all(line.rstrip(" |").split("| ")[-2].startswith(("reproduced", "not reproduced", "not measured"))
               for line in rows)
    measured = [line for line in rows if "not measured" not in line]
    # quick leaves out at most compliance (cut answers), telemetry...
    assert len(measured) >= 10, check
    assert "HTML report: demo/report.html" in proc.stdout
    page = (out / "report.html").read_text()
    assert "<h2>Article check</h2>" in page and "<pre>## Article check" not in page

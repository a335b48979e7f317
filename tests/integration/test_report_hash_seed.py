"""`fourfold compare` in two processes with different string hashing gives the same report (the
loading and its errors, in one process, are in tests/reports/test_report_load.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.rundirs import RunSpec, write_run

pytestmark = pytest.mark.integration


def test_report_does_not_depend_on_the_hash_seed(tmp_path):
    """A group that merges variants (saturation@A and @B compared as whole runs) pools their ITL
    samples in a fixed order, so two processes with different string hashing agree."""
    runs = [write_run(tmp_path / "a",
                      RunSpec("a", seed=1, n=200, pause_every=3, failure_every=7, variant_of=["A", "B"])),
            write_run(tmp_path / "b", RunSpec("b", seed=10, n=150, variant_of=["A", "B"]))]
    outputs = []
    for seed in ("0", "2"):
        out = tmp_path / f"out{seed}"
        subprocess.run([sys.executable, "-m", "fourfold", "compare", *map(str, runs), "--out", str(out),
                        "--no-html", "--no-cache", "--resamples", "300"], check=True, capture_output=True,
                       env={**os.environ, "PYTHONHASHSEED": seed})
        outputs.append((out / "report.csv").read_text())
    assert outputs[0] == outputs[1]

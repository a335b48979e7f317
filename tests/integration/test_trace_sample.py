"""The bundled trace sample is what fourfold/data/datasets/generate_trace.py writes, run in a process
of its own (the trace format and the sample's shape are tested in tests/unit/test_trace.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from fourfold.data import bundled

pytestmark = pytest.mark.integration
SAMPLE = bundled("datasets", "trace_sample.jsonl")


def test_the_sample_is_what_its_generator_writes(tmp_path):
    script = bundled("datasets", "generate_trace.py")
    code = (f"import runpy, pathlib; ns = runpy.run_path({str(script)!r}); "
            f"import json; print(''.join(json.dumps(x) + chr(10) for x in ns['generate']()), end='')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out == SAMPLE.read_text()

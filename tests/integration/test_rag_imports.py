"""The RAG service imports nothing of the load generator: importing its command, launcher and server
in a fresh interpreter leaves fourfold.measure and fourfold.fingerprint out of sys.modules (the
retrieval itself is tested in tests/unit/test_rag_retrieval.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]


def test_targets_rag_does_not_import_measure():
    code = ("import sys, fourfold.targets.rag.cli, fourfold.targets.rag.launch, fourfold.targets.rag.server; "
            "print(sorted(m for m in sys.modules if m.startswith(('fourfold.measure', 'fourfold.fingerprint'))))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"

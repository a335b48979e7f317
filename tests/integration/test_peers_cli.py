"""benchmarks/peers.py as a command: an unknown peer is a usage error that lists the valid ones
(the peers' output formats and the arithmetic are in tests/unit/test_peer_formats.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]


def test_unknown_peer_lists_the_valid_ones() -> None:
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / "peers.py"), "--peers", "llmperf"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "unknown peer(s) llmperf; valid: vllm, guidellm, aiperf" in done.stderr

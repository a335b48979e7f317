"""Every test module has its own basename: pytest imports them by basename from the rootdir, so two
``test_x.py`` in different folders break collection in a clean checkout (a stale ``__pycache__`` can
hide it locally)."""

from __future__ import annotations

import collections
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_no_two_test_modules_share_a_basename():
    names = collections.Counter(p.name for p in TESTS.rglob("test_*.py"))
    assert [name for name, n in names.items() if n > 1] == []

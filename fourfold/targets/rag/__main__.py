"""``python -m fourfold.targets.rag``: see :mod:`fourfold.targets.rag.cli`."""

from __future__ import annotations

import sys

from fourfold.targets.rag.cli import main

if __name__ == "__main__":
    sys.exit(main())

"""``python -m fourfold.targets.sim``: see :mod:`fourfold.targets.sim.cli`."""

from __future__ import annotations

import sys

from fourfold.targets.sim.cli import main

if __name__ == "__main__":
    sys.exit(main())

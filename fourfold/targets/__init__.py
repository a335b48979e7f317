"""Embedded default targets: the LLM simulator (``fourfold.targets.sim``) and its launcher.

Nothing here imports ``measure``: a simulator that shared the client's parsers could not catch
the client's wire-format bugs.
"""

from __future__ import annotations

from pathlib import Path

# The folder that holds the ``fourfold`` package (site-packages, or a checkout): put on a child
# process's PYTHONPATH so that ``python -m fourfold.targets.sim`` imports the same fourfold.
IMPORT_ROOT = Path(__file__).resolve().parents[2]

__all__ = ["IMPORT_ROOT"]

"""Embedded default targets: the LLM simulator (``targets.sim``) and its launcher.

Nothing here imports ``measure``: a simulator that shared the client's parsers could not catch
the client's wire-format bugs.
"""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]

__all__ = ["REPO_ROOT"]

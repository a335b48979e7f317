"""The stock locustfiles, shipped inside the wheel: ``locust -f "$(fourfold locustfile l3)"``.

Each file imports one concrete User from :mod:`fourfold.levels` and nothing else; this module
only names them, so the CLI can find the installed copy from any directory.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

__all__ = ["LOCUSTFILES", "LOCUSTFILE_DIR", "locustfile"]

LOCUSTFILE_DIR = Path(str(files(__name__)))

LOCUSTFILES = {
    "l1": "l1_throughput.py",
    "l2": "l2_gateway.py",
    "l2-open-loop": "l2_open_loop.py",
    "l2-protocols": "l2_protocols.py",
    "l3": "l3_rag.py",
    "l4": "l4_session.py",
    "embeddings": "embeddings.py",
}


def locustfile(level: str) -> Path | None:
    """The installed path of a level's locustfile (``l1`` … ``l4``, ``l2-open-loop``, ``l2-protocols``),
    or None for an unknown level."""
    name = LOCUSTFILES.get(level)
    return LOCUSTFILE_DIR / name if name else None

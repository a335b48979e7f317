"""``fourfold locustfile LEVEL`` prints a stock locustfile's installed path; ``fourfold run LEVEL
[locust options]`` runs ``locust -f`` on it."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from fourfold.errors import UsageError
from fourfold.locustfiles import LOCUSTFILES, locustfile

__all__ = ["add_arguments", "locustfile_path", "run", "run_locust"]


def add_arguments(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument("level", help=", ".join(LOCUSTFILES))


def locustfile_path(level: str) -> Path:
    path = locustfile(level)
    if path is None or not path.is_file():
        raise UsageError(f"unknown level {level!r}; available: {', '.join(LOCUSTFILES)}")
    return path


def run(args: argparse.Namespace, rest: list[str]) -> int:
    """``fourfold locustfile LEVEL``."""
    print(locustfile_path(args.level))
    return 0


def run_locust(args: argparse.Namespace, rest: list[str]) -> int:
    """``fourfold run LEVEL ...``: locust on the level's locustfile, the rest of the arguments passed on."""
    return subprocess.call([sys.executable, "-m", "locust", "-f", str(locustfile_path(args.level)), *rest],
                           env=dict(os.environ))

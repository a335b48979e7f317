"""``fourfold sim``: the embedded LLM simulator, standalone (its own options: ``fourfold sim --help``)."""

from __future__ import annotations

import argparse

from fourfold.targets.sim import main as sim_main

__all__ = ["ADD_HELP", "add_arguments", "run"]

ADD_HELP = False         # --help goes through to the simulator's own parser


def add_arguments(cmd: argparse.ArgumentParser) -> None:
    """None here: every argument goes through to :func:`fourfold.targets.sim.main`."""


def run(args: argparse.Namespace, rest: list[str]) -> int:
    return int(sim_main(rest) or 0)

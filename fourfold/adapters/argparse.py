"""argparse's insides that fourfold uses (checked against Python 3.11.7's argparse).

Locust hands fourfold its option parser (``init_command_line_parser``) after the options were
added; to change how some of them are shown, fourfold walks the parser's actions, which argparse
keeps in a list it does not document.
"""

from __future__ import annotations

import argparse

__all__ = ["actions"]


def actions(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """Every action (option or positional) ``parser`` holds, in the order they were added, help
    included. The list itself, not a copy: edit the actions, not the list.

    Private name: ``ArgumentParser._actions`` (configargparse's and Locust's parsers are
    subclasses); checked against Python 3.11.7."""
    return parser._actions

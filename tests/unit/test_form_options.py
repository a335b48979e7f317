"""The web UI's start form shows the options of the level that was loaded (issue 19)."""

from __future__ import annotations

import pytest
from locust.argument_parser import LocustArgumentParser

from fourfold.levels import hooks, l2_gateway, l3_rag, l4_session
from fourfold.levels.l4_options import L4_DESTS

L4_ONLY = set(L4_DESTS)


@pytest.mark.parametrize(("add_arguments", "shows_l4"), [
    (hooks.add_arguments, False),           # L1
    (l2_gateway.add_arguments, False),
    (l3_rag.add_arguments, False),
    (l4_session.add_arguments, True),
])
def test_form_shows_l4_options_only_for_l4(add_arguments, shows_l4: bool) -> None:
    parser = LocustArgumentParser()
    add_arguments(parser)
    in_form = set(parser.args_included_in_web_ui)
    assert "stall_ms" in in_form
    assert (L4_ONLY <= in_form) if shows_l4 else not (L4_ONLY & in_form)
    # parsed by all
    assert parser.parse_args(["--think-scale", "0.5", "--ab-split", "50/50"]).think_scale == 0.5


def test_l4_options_dests_are_the_registered_ones() -> None:
    parser = LocustArgumentParser()
    hooks.add_arguments(parser)
    dests = {a.dest for a in parser._actions}
    assert L4_ONLY <= dests

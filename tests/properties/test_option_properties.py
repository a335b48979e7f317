"""Every option, given random and extreme values, is either accepted or one UsageError line, fast
(fourfold#32 item 8): the checks a run makes at ``init`` (:func:`fourfold.levels.inputs.check_options`)
on the options of each level, one option at a time, with hypothesis choosing the value. No other
exception, no hang: the run would print that line and exit 2 before anything starts."""

from __future__ import annotations

import functools
import math
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from locust.argument_parser import LocustArgumentParser

from fourfold.errors import UsageError
from fourfold.levels import hooks, l2_gateway, l3_rag, l4_session
from fourfold.levels.inputs import check_options
from fourfold.levels.l1_throughput import ThroughputUser

LEVELS = {
    "l1": (hooks.add_arguments, ThroughputUser),
    "l2": (l2_gateway.add_arguments, l2_gateway.OpenLoopUser),
    "l3": (l3_rag.add_arguments, l3_rag.RagUser),
    "l4": (l4_session.add_arguments, l4_session.SessionUser),
}
# what a user could type, or a config file could hold, for a value
NUMBERS = (st.floats(allow_nan=True, allow_infinity=True) | st.integers(-(2**70), 2**70)
           | st.sampled_from([0, -1, 1e-300, 1e300, 2**63, -(2**63), 0.5, 1e-9]))
TEXTS = (st.text(max_size=40)
         | st.sampled_from(["", " ", "off", "nan", "-1", "1e999", "input=1e9", "x=y,", "@", "@/dev/null",
                            "/dev/null", ".", "..", "\x00", "\ud800", "input=100±99999999999", "Name: value",
                            ":", "a" * 5000]))
TIME_LIMIT_S = 5.0


def _parser(level: str) -> LocustArgumentParser:
    parser = LocustArgumentParser()
    LEVELS[level][0](parser)
    return parser


@functools.cache
def _level_parser(level: str) -> tuple[LocustArgumentParser, list[Any]]:
    """The level's parser and fourfold's options in it, built once for all of a test's examples
    (parsing leaves a parser as it was; building one costs more than the example itself)."""
    parser = _parser(level)
    return parser, _ours(parser)


def _ours(parser: LocustArgumentParser) -> list[Any]:
    """fourfold's options (the actions Locust's own parser does not have)."""
    locust_only = {a.dest for a in LocustArgumentParser()._actions}
    return [a for a in parser._actions if a.dest not in locust_only and a.dest != "help"]


def _typed(action: Any) -> Any:
    """What a user could type for ``action``: numbers written every way, any text, its choices."""
    if action.nargs == 0:                    # store_true / store_false: the flag alone
        return st.just(None)
    typed = NUMBERS.map(str) | NUMBERS.map(repr) if action.type in (int, float) else st.nothing()
    choices = st.sampled_from([str(c) for c in action.choices]) if action.choices else st.nothing()
    return typed | choices | TEXTS


@pytest.mark.parametrize("level", sorted(LEVELS))
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_any_value_of_any_option_is_accepted_or_one_usage_error(level: str, data: Any) -> None:
    """As the command line reaches init: argparse converts the text (refusing what its type does not
    read, Locust's own usage error), then fourfold checks every option and dataset."""
    parser, ours = _level_parser(level)
    action = data.draw(st.sampled_from(ours), label="option")
    text = data.draw(_typed(action), label=action.option_strings[0])
    argv = [action.option_strings[0]] + ([] if text is None else [text])
    try:
        options = parser.parse_args(argv)
    except SystemExit as exc:                # argparse: "error: argument --x: invalid int value"
        assert exc.code == 2
        event("refused by argparse")
        return
    started = time.monotonic()
    try:
        check_options(options, [LEVELS[level][1]])
        event("accepted")
    except UsageError as exc:
        line = str(exc)
        assert line and "\n" not in line and "Traceback" not in line
        event("one usage error")
    assert time.monotonic() - started < TIME_LIMIT_S


@pytest.mark.parametrize("flag, value", [
    ("--arrival-rate", 1e12), ("--burstiness", 1e-12), ("--sample-interval", 1e-12),
    ("--read-timeout", math.inf),
    ("--max-tokens", 2**63), ("--synthetic", "input=100±99999999999"), ("--trace-speed", 1e300),
    ("--dataset", "/dev/null"), ("--max-in-flight", 2**40),
])
def test_the_extremes_the_issue_found_are_usage_errors(flag: str, value: Any) -> None:
    parser = _parser("l2")
    options = parser.parse_args([])
    setattr(options, next(a.dest for a in parser._actions if flag in a.option_strings), value)
    with pytest.raises(UsageError):
        check_options(options, [l2_gateway.OpenLoopUser])

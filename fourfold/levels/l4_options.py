"""L4's options (session flow and sticky A/B), registered by :func:`fourfold.levels.options.register`.

They read into a frozen :class:`SessionSettings` (what a session user needs beyond the common
:class:`fourfold.levels.options.Settings`). This module imports nothing of Locust or the levels, so the
common option registration can call it without import cycles.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fourfold.adapters.locust import show_in_web_ui as show_options_in_web_ui
from fourfold.levels.declare import add_options, check_rules, declared, option, read_options, within
from fourfold.levels.l4_ab import parse_split


def register(parser: Any) -> None:
    """Add the L4 options to Locust's argument parser: every level parses them (command line,
    ``LOCUST_*``, locust.conf), the web UI's start form shows them only for L4 (:func:`show_in_web_ui`)."""
    add_options(parser, SessionSettings, web_ui=False)


def show_in_web_ui(parser: Any) -> None:
    """L4's own parser listener: its options in the web UI's start form
    (:func:`fourfold.adapters.locust.show_in_web_ui`)."""
    show_options_in_web_ui(parser, L4_DESTS)


def _ab_share(split: str) -> float | None:
    split = str(split).strip()
    return parse_split(split) if split else None


def _host(value: str) -> str:
    return str(value).rstrip("/")


@dataclass(frozen=True)
class SessionSettings:
    """L4's options, each declared once (:mod:`fourfold.levels.declare`)."""

    think_scale: float = option(1.0, "--think-scale", "session", type=float, rule=within(0, 1000),
                                help="L4: multiply every persona's think time between turns (0 = no think "
                                     "time)")
    patience_scale: float = option(1.0, "--patience-scale", "session", type=float, rule=within(0, 1000),
                                   help="L4: multiply every persona's patience (TTFT and E2E limits); 0 = "
                                        "users never leave a slow session")
    sessions_per_user: int = option(0, "--sessions-per-user", "session", type=int, rule=within(0, 1e9),
                                    help="L4: each user stops after this many sessions (0 = until the run "
                                         "ends); a local run ends once every user has stopped")
    tool_latency_ms: float = option(200.0, "--tool-latency-ms", "session", type=float, rule=within(0, 600000),
                                    help="L4 agent (l4_agent.py): ms a user takes to run a tool the model "
                                         "called before it sends the result back")
    agent_max_rounds: int = option(6, "--agent-max-rounds", "session", type=int, rule=within(1, 1000),
                                   help="L4 agent: requests a session may take before it ends at max_turns "
                                        "(the model still calling tools)")
    ab_share_a: float | None = option(None, "--ab-split", "session", raw_default="", read=_ab_share,
                                      help="L4 sticky A/B: share of users on variant A (--host), the rest on "
                                           "B (--ab-host): 0.95, 95%%, 95/5 or 50/50; empty = no A/B")
    ab_host: str = option("", "--ab-host", "session", read=_host,
                          help="L4 sticky A/B: variant B's target; default with no --host: a second embedded "
                               "simulator")
    ab_profile: str = option("candidate", "--ab-profile", "session",
                             help="L4 sticky A/B: profile of the embedded simulator of variant B (variant A "
                                  "uses --sim-profile)")
    ab_seed: int = option(0, "--ab-seed", "session", type=int,
                          help="L4 sticky A/B: seed of the user -> variant hash")

    def __post_init__(self) -> None:
        check_rules(self)

    @property
    def ab(self) -> bool:
        return self.ab_share_a is not None

    @classmethod
    def from_options(cls, options: Any) -> SessionSettings:
        """Read from Locust's parsed options (missing attributes take the defaults)."""
        return cls(**read_options(cls, options))


L4_DESTS = tuple(opt.parsed_name for _, opt in declared(SessionSettings))   # shown in the form for L4 only


__all__ = ["SessionSettings", "register"]

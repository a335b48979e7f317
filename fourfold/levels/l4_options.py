"""L4's options (session flow and sticky A/B), registered by :func:`fourfold.levels.options.register`.

They read into a frozen :class:`SessionSettings` (what a session user needs beyond the common
:class:`fourfold.levels.options.Settings`). This module imports nothing of Locust or the levels, so the
common option registration can call it without import cycles.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from fourfold.adapters.locust import show_in_web_ui as show_options_in_web_ui
from fourfold.levels.l4_ab import parse_split

L4_DESTS = ("think_scale", "patience_scale", "sessions_per_user", "ab_split", "ab_host", "ab_profile",
            "ab_seed")


def register(parser: Any) -> None:
    """Add the L4 options to Locust's argument parser: every level parses them (command line,
    ``LOCUST_*``, locust.conf), the web UI's start form shows them only for L4 (:func:`show_in_web_ui`)."""

    def add(*args: Any, **kwargs: Any) -> Any:
        return parser.add_argument(*args, include_in_web_ui=False, **kwargs)

    add("--think-scale", type=float, default=1.0,
        help="L4: multiply every persona's think time between turns (0 = no think time)")
    add("--patience-scale", type=float, default=1.0,
        help="L4: multiply every persona's patience (TTFT and E2E limits); 0 = users never leave a slow "
             "session")
    add("--sessions-per-user", type=int, default=0,
        help="L4: each user stops after this many sessions (0 = until the run ends); "
             "a local run ends once every user has stopped")
    add("--ab-split", default="",
        help="L4 sticky A/B: share of users on variant A (--host), the rest on B (--ab-host): "
             "0.95, 95%%, 95/5 or 50/50; empty = no A/B")
    add("--ab-host", default="",
        help="L4 sticky A/B: variant B's target; default with no --host: a second embedded simulator")
    add("--ab-profile", default="candidate",
        help="L4 sticky A/B: profile of the embedded simulator of variant B (variant A uses --sim-profile)")
    add("--ab-seed", type=int, default=0, help="L4 sticky A/B: seed of the user -> variant hash")


def show_in_web_ui(parser: Any) -> None:
    """L4's own parser listener: its options in the web UI's start form
    (:func:`fourfold.adapters.locust.show_in_web_ui`)."""
    show_options_in_web_ui(parser, L4_DESTS)


@dataclass(frozen=True)
class SessionSettings:
    think_scale: float = 1.0
    patience_scale: float = 1.0
    sessions_per_user: int = 0
    ab_share_a: float | None = None      # None: no A/B split
    ab_host: str = ""
    ab_profile: str = "candidate"
    ab_seed: int = 0

    @property
    def ab(self) -> bool:
        return self.ab_share_a is not None

    @classmethod
    def from_options(cls, options: Any) -> SessionSettings:
        """Build from Locust's parsed options (missing attributes take the defaults)."""
        def get(name: str, default: Any) -> Any:
            value = getattr(options, name, default) if options is not None else default
            return default if value is None else value

        split = str(get("ab_split", "")).strip()
        think_scale, patience_scale = float(get("think_scale", 1.0)), float(get("patience_scale", 1.0))
        if not (0 <= think_scale < math.inf and 0 <= patience_scale < math.inf):
            raise ValueError(f"--think-scale {think_scale} / --patience-scale {patience_scale}: "
                             "must be numbers >= 0")
        sessions_per_user = int(get("sessions_per_user", 0))
        if sessions_per_user < 0:
            raise ValueError("--sessions-per-user must be >= 0 (0: until the run ends), "
                             f"got {sessions_per_user}")
        return cls(
            think_scale=think_scale,
            patience_scale=patience_scale,
            sessions_per_user=sessions_per_user,
            ab_share_a=parse_split(split) if split else None,
            ab_host=str(get("ab_host", "")).rstrip("/"),
            ab_profile=str(get("ab_profile", "candidate")),
            ab_seed=int(get("ab_seed", 0)),
        )


__all__ = ["SessionSettings", "register"]

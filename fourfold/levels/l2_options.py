"""L2 gateway options: registered on Locust's parser by the L2 locustfiles, read into GatewaySettings.

Like :mod:`fourfold.levels.options` (the options every level shares, including the embedded simulator's
gateway knobs ``--sim-max-concurrency``, ``--sim-over-limit``, ``--sim-keepalive-timeout-s``)
they work from the command line, ``LOCUST_*`` environment variables, ``locust.conf`` /
``[tool.locust]`` and the web UI's start form; they are registered only when an L2 locustfile
is loaded, so other levels' forms stay short.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from fourfold.levels.arrivals import PROCESSES, ArrivalProcess
from fourfold.levels.declare import (
    POSITIVE,
    add_options,
    check_rules,
    option,
    read_options,
    within,
)

DEFAULT_LADDER = "8,16,32,64"
OFF_WORDS = frozenset({"", "off", "none", "no", "0"})     # --ladder values that mean no ladder
IN_FLIGHT_POLICIES = ("wait", "drop")


def parse_ladder(text: str | Sequence[int] | None) -> tuple[int, ...]:
    """``"8,16,32,64"`` -> (8, 16, 32, 64); ``""``/``"off"`` -> () (no ladder).

    Steps must be positive integers in strictly increasing order.
    """
    if text is None:
        return ()
    if isinstance(text, str):
        if text.strip().lower() in OFF_WORDS:
            return ()
        parts = [p.strip() for p in re.split(r"[,\s]+", text.strip()) if p.strip()]
        try:
            steps = tuple(int(p) for p in parts)
        except ValueError:
            raise ValueError(f"--ladder {text!r}: expected user counts like '8,16,32,64' "
                             "(or 'off')") from None
    else:
        steps = tuple(int(p) for p in text)
    if any(s < 1 for s in steps):
        raise ValueError(f"--ladder {text!r}: every step must be at least 1 user")
    if any(b <= a for a, b in zip(steps, steps[1:])):
        raise ValueError(f"--ladder {text!r}: steps must increase (e.g. 8,16,32,64)")
    return steps


def _url(value: str) -> str:
    return str(value).strip().rstrip("/")


def register(parser: Any) -> None:
    """Add the L2 options to Locust's argument parser (an init_command_line_parser listener)."""
    add_options(parser, GatewaySettings)


@dataclass(frozen=True)
class GatewaySettings:
    """L2's options, each declared once (:mod:`fourfold.levels.declare`)."""

    ladder: tuple[int, ...] = option((8, 16, 32, 64), "--ladder", "gateway", raw_default=DEFAULT_LADDER,
                                     read=parse_ladder,
                                     help="Concurrency ladder: user counts stepped through in order ('off': "
                                          "plain -u/-r/-t)")
    ladder_hold_s: float = option(20.0, "--ladder-hold-s", "gateway", type=float, rule=within(0.1, 604800),
                                  help="Seconds each ladder step is held")
    slo_ttft_p95_ms: float = option(450.0, "--slo-ttft-p95-ms", "gateway", type=float, rule=POSITIVE,
                                    help="The ladder's knee: the highest step whose TTFT p95 stays at or "
                                         "below this (ms)")
    think_time_s: float = option(0.0, "--think-time-s", "gateway", type=float, rule=within(0, 86400),
                                 help="Closed loop: seconds each user waits between requests")
    honour_retry_after: bool = option(False, "--honour-retry-after", "gateway", action="store_true",
                                      help="After a 429/503 with Retry-After, the user waits that long "
                                           "(capped) before its next request")
    retry_after_cap_s: float = option(30.0, "--retry-after-cap-s", "gateway", type=float,
                                      rule=within(0, 86400),
                                      help="Longest Retry-After wait honoured (s)")
    direct_host: str = option("", "--direct-host", "gateway", read=_url,
                              help="Gateway overhead: the backend behind --host; each closed-loop user "
                                   "alternates its requests between --host (variant gateway) and this "
                                   "(variant direct), per ladder step (docs/l2-gateway.md)")
    arrival_process: str = option("poisson", "--arrival-process", "gateway", choices=list(PROCESSES),
                                  help="Open loop: gaps between arrivals (gamma uses --burstiness)")
    arrival_rate: float = option(10.0, "--arrival-rate", "gateway", type=float, rule=within(0.001, 100000),
                                 help="Open loop: arrivals per second for the whole run (split across "
                                      "workers)")
    burstiness: float = option(1.0, "--burstiness", "gateway", type=float, rule=within(0.01, 1000),
                               help="Open loop, gamma: shape of the gaps (vLLM's --burstiness: 1 Poisson, "
                                    "<1 burstier, >1 more regular)")
    arrival_seed: int = option(0, "--arrival-seed", "gateway", type=int,
                               help="Open loop: seed of the arrival draws")
    max_in_flight: int = option(256, "--max-in-flight", "gateway", type=int, rule=within(1, 100000),
                                help="Open loop: most requests in flight per dispatcher; arrivals beyond it "
                                     "wait or drop")
    max_in_flight_policy: str = option("wait", "--max-in-flight-policy", "gateway",
                                       choices=list(IN_FLIGHT_POLICIES),
                                       help="Open loop: an arrival that finds --max-in-flight requests in "
                                            "flight waits (queues) or is dropped")
    sweep: bool = option(False, "--sweep", "gateway", action="store_true",
                         help="Open loop: step the offered rate (from --arrival-rate) by a search until it "
                              "brackets the highest rate whose SLO (--slo, else --slo-ttft-p95-ms) holds; "
                              "then the test stops (docs/sweep.md)")
    sweep_step_s: float = option(10.0, "--sweep-step-s", "gateway", type=float,
                                 help="--sweep: seconds each rate is offered")
    sweep_tolerance: float = option(0.10, "--sweep-tolerance", "gateway", type=float,
                                    help="--sweep: stop when (first miss - last pass) / last pass <= this")
    sweep_max_steps: int = option(12, "--sweep-max-steps", "gateway", type=int,
                                  help="--sweep: rates offered at most")

    stop_on_saturation: bool = option(False, "--stop-on-saturation", "gateway", action="store_true",
                                      help="Ladder: end the run at the first step past saturation (latency "
                                           "still climbing, or users up with tokens/s flat); --sweep: such a "
                                           "step misses, with the reason (docs/l2-gateway.md)")
    probe_request_rate: float = option(0.0, "--probe-request-rate", "gateway", type=float,
                                       rule=within(0, 1000),
                                       help="Interference probe: small requests at this Poisson rate (per "
                                            "second) beside the main load, scenario 'probe' (0: off)")
    probe_max_tokens: int = option(8, "--probe-max-tokens", "gateway", type=int, rule=within(1, 100000),
                                   help="Interference probe: max_tokens of each probe request")

    def __post_init__(self) -> None:
        check_rules(self)
        if not (1 <= self.sweep_step_s <= 86400 and 0 < self.sweep_tolerance < 1
                and 2 <= self.sweep_max_steps <= 100):
            raise ValueError("--sweep-step-s must be within [1, 86400], --sweep-tolerance within (0, 1) "
                             f"and --sweep-max-steps within [2, 100], got {self.sweep_step_s}, "
                             f"{self.sweep_tolerance} and {self.sweep_max_steps}")
        if self.max_in_flight_policy not in IN_FLIGHT_POLICIES:
            raise ValueError(f"--max-in-flight-policy must be one of {', '.join(IN_FLIGHT_POLICIES)}, "
                             f"got {self.max_in_flight_policy!r}")
        ArrivalProcess(self.arrival_process, self.arrival_rate, self.burstiness)   # checks kind and numbers

    @property
    def arrivals(self) -> ArrivalProcess:
        """The open loop's arrival process (--arrival-process, --arrival-rate, --burstiness)."""
        return ArrivalProcess(self.arrival_process, self.arrival_rate, self.burstiness)

    @classmethod
    def from_options(cls, options: Any) -> GatewaySettings:
        """From Locust's parsed options (missing attributes take the defaults); ValueError when invalid."""
        return cls(**read_options(cls, options))

    def meta_block(self, open_loop: bool) -> dict[str, Any]:
        """meta.json's ``l2`` block: these settings, and whether an open-loop dispatcher sends (then
        ``arrivals`` rule what is sent, not ``-u``; :mod:`fourfold.reports.comparability` reads it)."""
        block = {**asdict(self), "arrivals": asdict(self.arrivals), "open_loop": open_loop}
        for name in ("arrival_process", "arrival_rate", "burstiness"):     # as "arrivals", one block
            del block[name]
        return block


__all__ = ["DEFAULT_LADDER", "GatewaySettings", "register"]

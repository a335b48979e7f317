"""L2 gateway options: registered on Locust's parser by the L2 locustfiles, read into GatewaySettings.

Like :mod:`fourfold.levels.options` (the options every level shares, including the embedded simulator's
gateway knobs ``--sim-max-concurrency``, ``--sim-over-limit``, ``--sim-keepalive-timeout-s``)
they work from the command line, ``LOCUST_*`` environment variables, ``locust.conf`` /
``[tool.locust]`` and the web UI's start form; they are registered only when an L2 locustfile
is loaded, so other levels' forms stay short.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from fourfold.levels.arrivals import PROCESSES, ArrivalProcess

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


def register(parser: Any) -> None:
    """Add the L2 options to Locust's argument parser (an init_command_line_parser listener)."""
    add = parser.add_argument
    add("--ladder", default=DEFAULT_LADDER,
        help="Concurrency ladder: user counts stepped through in order ('off': plain -u/-r/-t)")
    add("--ladder-hold-s", type=float, default=20.0, help="Seconds each ladder step is held")
    add("--slo-ttft-p95-ms", type=float, default=450.0,
        help="The ladder's knee: the highest step whose TTFT p95 stays at or below this (ms)")
    add("--think-time-s", type=float, default=0.0,
        help="Closed loop: seconds each user waits between requests")
    add("--honour-retry-after", action="store_true", default=False,
        help="After a 429/503 with Retry-After, the user waits that long (capped) before its next request")
    add("--retry-after-cap-s", type=float, default=30.0, help="Longest Retry-After wait honoured (s)")
    add("--arrival-process", default="poisson", choices=list(PROCESSES),
        help="Open loop: gaps between arrivals (gamma uses --burstiness)")
    add("--arrival-rate", type=float, default=10.0,
        help="Open loop: arrivals per second for the whole run (split across workers)")
    add("--burstiness", type=float, default=1.0,
        help="Open loop, gamma: shape of the gaps (vLLM's --burstiness: 1 Poisson, <1 burstier, "
             ">1 more regular)")
    add("--arrival-seed", type=int, default=0, help="Open loop: seed of the arrival draws")
    add("--max-in-flight", type=int, default=256,
        help="Open loop: most requests in flight per dispatcher; arrivals beyond it wait or drop")
    add("--max-in-flight-policy", default="wait", choices=list(IN_FLIGHT_POLICIES),
        help="Open loop: an arrival that finds --max-in-flight requests in flight waits (queues) or is "
             "dropped")
    add("--sweep", action="store_true", default=False,
        help="Open loop: step the offered rate (from --arrival-rate) by a search until it brackets the "
             "highest rate whose SLO (--slo, else --slo-ttft-p95-ms) holds; then the test stops "
             "(docs/sweep.md)")
    add("--sweep-step-s", type=float, default=10.0, help="--sweep: seconds each rate is offered")
    add("--sweep-tolerance", type=float, default=0.10,
        help="--sweep: stop when (first miss - last pass) / last pass <= this")
    add("--sweep-max-steps", type=int, default=12, help="--sweep: rates offered at most")


@dataclass(frozen=True)
class GatewaySettings:
    ladder: tuple[int, ...] = (8, 16, 32, 64)
    ladder_hold_s: float = 20.0
    slo_ttft_p95_ms: float = 450.0
    think_time_s: float = 0.0
    honour_retry_after: bool = False
    retry_after_cap_s: float = 30.0
    arrivals: ArrivalProcess = ArrivalProcess("poisson", 10.0)
    arrival_seed: int = 0
    max_in_flight: int = 256
    max_in_flight_policy: str = "wait"
    sweep: bool = False
    sweep_step_s: float = 10.0
    sweep_tolerance: float = 0.10
    sweep_max_steps: int = 12

    def __post_init__(self) -> None:
        if not (1 <= self.sweep_step_s < math.inf and 0 < self.sweep_tolerance < 1
                and self.sweep_max_steps >= 2):
            raise ValueError("--sweep-step-s must be >= 1, --sweep-tolerance within (0, 1) and "
                             f"--sweep-max-steps >= 2, got {self.sweep_step_s}, {self.sweep_tolerance} "
                             f"and {self.sweep_max_steps}")
        if not 0 < self.ladder_hold_s < math.inf:
            raise ValueError(f"--ladder-hold-s must be a number > 0, got {self.ladder_hold_s}")
        if not 0 < self.slo_ttft_p95_ms < math.inf:
            raise ValueError(f"--slo-ttft-p95-ms must be a number > 0, got {self.slo_ttft_p95_ms}")
        if not (0 <= self.think_time_s < math.inf and 0 <= self.retry_after_cap_s < math.inf):
            raise ValueError(f"--think-time-s and --retry-after-cap-s must be numbers >= 0, got "
                             f"{self.think_time_s} and {self.retry_after_cap_s}")
        if self.max_in_flight < 1:
            raise ValueError(f"--max-in-flight must be at least 1, got {self.max_in_flight}")
        if self.max_in_flight_policy not in IN_FLIGHT_POLICIES:
            raise ValueError(f"--max-in-flight-policy must be one of {', '.join(IN_FLIGHT_POLICIES)}, "
                             f"got {self.max_in_flight_policy!r}")

    @classmethod
    def from_options(cls, options: Any) -> GatewaySettings:
        """From Locust's parsed options (missing attributes take the defaults); ValueError when invalid."""
        def get(name: str, default: Any) -> Any:
            value = getattr(options, name, default) if options is not None else default
            return default if value is None else value

        return cls(
            ladder=parse_ladder(get("ladder", DEFAULT_LADDER)),
            ladder_hold_s=float(get("ladder_hold_s", 20.0)),
            slo_ttft_p95_ms=float(get("slo_ttft_p95_ms", 450.0)),
            think_time_s=float(get("think_time_s", 0.0)),
            honour_retry_after=bool(get("honour_retry_after", False)),
            retry_after_cap_s=float(get("retry_after_cap_s", 30.0)),
            arrivals=ArrivalProcess(str(get("arrival_process", "poisson")), float(get("arrival_rate", 10.0)),
                                    float(get("burstiness", 1.0))),
            arrival_seed=int(get("arrival_seed", 0)),
            max_in_flight=int(get("max_in_flight", 256)),
            max_in_flight_policy=str(get("max_in_flight_policy", "wait")),
            sweep=bool(get("sweep", False)),
            sweep_step_s=float(get("sweep_step_s", 10.0)),
            sweep_tolerance=float(get("sweep_tolerance", 0.10)),
            sweep_max_steps=int(get("sweep_max_steps", 12)),
        )

    def meta_block(self, open_loop: bool) -> dict[str, Any]:
        """meta.json's ``l2`` block: these settings, and whether an open-loop dispatcher sends (then
        ``arrivals`` rule what is sent, not ``-u``; :mod:`fourfold.reports.comparability` reads it)."""
        return {**asdict(self), "open_loop": open_loop}


__all__ = ["DEFAULT_LADDER", "GatewaySettings", "register"]

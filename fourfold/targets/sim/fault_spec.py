"""What a profile says about faults: each kind's rate and the parameters of the kinds that take one
(``"faults"`` in a profile, ``--fault KIND=RATE`` on the command line). The kinds themselves, and
how the simulator misbehaves for each, are described in :mod:`fourfold.targets.sim.faults`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from fourfold.errors import FaultError

__all__ = ["FAULT_KINDS", "PARAMS", "FaultSpec", "parse_fault_arg"]

FAULT_KINDS = ("mid_stream_disconnect", "malformed_json", "invalid_utf8", "missing_done", "http_429",
               "http_500", "http_503", "slow_headers", "stall", "huge_chunk", "wrong_content_type", "endless")


@dataclass(frozen=True)
class FaultSpec:
    """Rates per fault kind (in ``FAULT_KINDS`` order, whatever order they were given in) and the
    parameters of the kinds that take one."""

    rates: tuple[tuple[str, float], ...] = ()
    stall_s: float = 70.0                    # longer than fourfold's default --read-timeout (60 s)
    slow_headers_s: float = 70.0
    huge_chunk_bytes: int = 17 * 1024 * 1024  # above fourfold's default 16 MiB response limit
    retry_after_s: int = 1

    @property
    def total_rate(self) -> float:
        return sum(rate for _, rate in self.rates)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = dict(self.rates)
        out.update({name: getattr(self, name) for name in PARAMS})
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FaultSpec:
        """``{"malformed_json": 0.1, "stall": 0.05, "stall_s": 3}`` -> FaultSpec (checked)."""
        rates: dict[str, float] = {}
        params: dict[str, Any] = {}
        for key, value in data.items():
            if key in FAULT_KINDS:
                if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
                    raise FaultError(f"fault rate {key}={value!r} must be a number between 0 and 1")
                if value:
                    rates[key] = float(value)
            elif key in PARAMS:
                if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                    raise FaultError(f"fault parameter {key}={value!r} must be a number >= 0")
                params[key] = PARAMS[key](value)
            else:
                raise FaultError(f"unknown fault {key!r}; valid kinds: {', '.join(FAULT_KINDS)}; "
                                 f"parameters: {', '.join(PARAMS)}")
        total = sum(rates.values())
        if total > 1 + 1e-9:
            raise FaultError(f"fault rates add up to {total:g}; at most 1 (one fault per request)")
        return cls(tuple((kind, rates[kind]) for kind in FAULT_KINDS if kind in rates), **params)


PARAMS: dict[str, type] = {f.name: (int if f.type in ("int", int) else float)
                           for f in fields(FaultSpec) if f.name != "rates"}


def parse_fault_arg(text: str) -> tuple[str, Any]:
    """``"malformed_json=0.2"`` / ``"stall_s=3"`` -> (name, number); checked by FaultSpec later."""
    name, sep, raw = text.partition("=")
    name = name.strip()
    if not sep or not name:
        raise FaultError(f"--fault expects KIND=RATE or PARAM=VALUE, got {text!r}; kinds: "
                         f"{', '.join(FAULT_KINDS)}")
    if name not in FAULT_KINDS and name not in PARAMS:
        raise FaultError(f"unknown fault {name!r}; valid kinds: {', '.join(FAULT_KINDS)}; "
                         f"parameters: {', '.join(PARAMS)}")
    try:
        value = float(raw)
    except ValueError:
        raise FaultError(f"--fault {text!r}: {raw!r} is not a number") from None
    return name, value

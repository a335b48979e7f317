"""fourfold's state on a Locust Environment: one typed object, ``environment.fourfold``.

Each part fourfold keeps per Environment (the :class:`~fourfold.levels.runtime.Runtime`, the SLO
gate, L2's, L3's and L4's aggregates, the web UI's tabs, live scoring) is held once, under its
class: ``state_of(environment).get(Gate)`` is a ``Gate`` or None, typed, without this module
importing the levels that define the parts. Nothing else is set on the Environment; what travels
to workers goes in ``parsed_options`` (see the ``*_ATTR`` names of the levels) or in messages.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["ATTR", "FourfoldState", "state_of"]

ATTR = "fourfold"
T = TypeVar("T")


class FourfoldState:
    """The parts of one Environment, one per class, and the exit code the SLO gate last set."""

    def __init__(self) -> None:
        self._parts: dict[type, Any] = {}
        self.exit_code: int | None = None       # the SLO gate's last exit code (slogate.finish)

    def get(self, kind: type[T]) -> T | None:
        return self._parts.get(kind)

    def put(self, part: T, kind: type[T] | None = None) -> T:
        """Hold ``part`` as the environment's ``kind`` (default: its own class); returns it."""
        self._parts[kind or type(part)] = part
        return part

    def setdefault(self, kind: type[T], make: Callable[[], T]) -> T:
        """The environment's ``kind``, made now by ``make`` when it has none."""
        found = self.get(kind)
        return found if found is not None else self.put(make(), kind)

    def __repr__(self) -> str:
        return f"FourfoldState({', '.join(k.__name__ for k in self._parts)}, exit_code={self.exit_code})"


def state_of(environment: Any) -> FourfoldState:
    """The environment's fourfold state, made on first use."""
    state = getattr(environment, ATTR, None)
    if state is None:
        state = FourfoldState()
        setattr(environment, ATTR, state)
    return state

"""What the levels add to a run beyond the shared figures: one registry per Environment.

Each level (and ``--score-live``) registers here, through :func:`fourfold.levels.hooks.register_level`,
what it contributes; the shared plumbing (:mod:`fourfold.levels.runtime`, :mod:`fourfold.levels.hooks`)
calls them without knowing the levels:

- ``meta``: blocks for meta.json, set at init or test start (a level's settings, the embedded
  target, what a test sends). Kept across the tests of one process.
- ``summary``: blocks for this test's summary.json, set by the finishers (``l2``, ``rag``,
  ``sessions``, ``quality_live``, ``server_metrics``...). Emptied when a new test begins.
- finishers, ``fn(environment)``: run by :meth:`finish` before each summary.json is written, the
  last registered first (a level's block is in ``summary`` before ``--score-live``'s, registered
  with ``first=True``, reads it).
- record listeners, ``fn(record)``: each record the run directory took, in order.
- live blocks, ``fn(environment) -> {"rag": {...}}``: a level's summary block over the data so far
  (the one its finisher writes), for the web UI's live panels.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fourfold.measure.record import RequestRecord

__all__ = ["BlockFn", "Extras", "Finisher", "RecordListener"]

Finisher = Callable[[Any], None]
BlockFn = Callable[[Any], "dict[str, Any] | None"]
RecordListener = Callable[[RequestRecord], None]


class Extras:
    """The levels' contributions to meta.json, summary.json and the live panels (module docstring)."""

    def __init__(self) -> None:
        self.meta: dict[str, Any] = {}
        self.summary: dict[str, Any] = {}
        self._finishers: list[Finisher] = []
        self._listeners: list[RecordListener] = []
        self._blocks: list[BlockFn] = []

    # ---- registration ----
    def on_finish(self, finisher: Finisher, *, first: bool = False) -> None:
        """Run ``finisher`` before each summary.json; ``first``: before every one registered so far
        has run, i.e. after them (finishers run the last registered first)."""
        if first:
            self._finishers.insert(0, finisher)
        else:
            self._finishers.append(finisher)

    def on_record(self, listener: RecordListener) -> None:
        self._listeners.append(listener)

    def on_block(self, block: BlockFn) -> None:
        self._blocks.append(block)

    @property
    def has_blocks(self) -> bool:
        return bool(self._blocks)

    # ---- use ----
    def new_test(self) -> None:
        """A new test in the same process (web UI: Stop, then New): its own summary blocks."""
        self.summary = {}

    def finish(self, environment: Any) -> None:
        for finisher in reversed(self._finishers):
            finisher(environment)

    def record(self, record: RequestRecord) -> None:
        for listener in self._listeners:
            listener(record)

    def live(self, environment: Any) -> dict[str, Any]:
        """Every level's block over the data so far."""
        blocks: dict[str, Any] = {}
        for block in self._blocks:
            blocks.update(block(environment) or {})
        return blocks

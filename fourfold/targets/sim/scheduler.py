"""One scheduler for every stream: a heap of (due time, job), woken at the earliest due time.

Each wake-up is one "decode step": every job with something due is stepped once and writes all
of its due tokens in a single ``transport.write``. Due times are absolute (request receipt +
planned offset), so a late wake-up never shifts later tokens: a job that fell behind catches up
by sending several tokens in one write, exactly as the plan says.

A job is anything with ``step(now_s, horizon_s) -> float | None``: it writes what is due up to
``horizon_s`` and returns its next due time, or None when it has finished (or was cancelled).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
from typing import Protocol


class Job(Protocol):
    def step(self, now_s: float, horizon_s: float) -> float | None: ...


class TokenScheduler:
    """Runs :class:`Job` steps at their due times on one event loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop, early_s: float = 0.0) -> None:
        self._loop = loop
        self._heap: list[tuple[float, int, Job]] = []
        self._order = itertools.count()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_due_s = math.inf
        self.early_s = early_s          # tokens due within this window are sent in the current pass
        self.wakeups = 0

    def __len__(self) -> int:
        return len(self._heap)

    def add(self, job: Job, due_s: float) -> None:
        """Schedule ``job`` to be stepped at ``due_s`` (loop time, seconds)."""
        heapq.heappush(self._heap, (due_s, next(self._order), job))
        if due_s < self._timer_due_s:
            self._arm(due_s)

    def _arm(self, due_s: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer_due_s = due_s
        self._timer = self._loop.call_at(due_s - self.early_s, self._tick)

    def _tick(self) -> None:
        self._timer = None
        self._timer_due_s = math.inf
        self.wakeups += 1
        heap = self._heap
        time = self._loop.time
        now_s = time()
        horizon_s = now_s + self.early_s
        pop, push = heapq.heappop, heapq.heappush
        while heap and heap[0][0] <= horizon_s:
            _, order, job = pop(heap)
            next_due_s = job.step(time(), horizon_s)
            if next_due_s is not None:
                push(heap, (next_due_s, order, job))
        if heap:
            self._arm(heap[0][0])

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._heap.clear()

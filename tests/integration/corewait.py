"""How late this machine wakes a sleeping process, measured beside a timing test.

On cores shared with other work a process that sleeps until a due time is woken late by however long
it waits for a core (docs/development.md): a few ms with two CPU hogs on two cores, ~0.1 ms on a quiet
machine. A timing test whose bound is about fourfold's own code adds what the machine added in the
same seconds::

    with core_wait() as wait:
        ...                                         # the run whose lateness is asserted
    assert p99_ms <= 5.0 + wait.p99_ms

``core_wait`` runs a probe process for the length of the block: it sleeps 2 ms at a time (in
``select``, as an event loop does) and records how late each wake-up came. Its percentiles are
nearest-rank, like the tests'.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

PROBE = r"""
import json, select, sys, time
late_ms = []
while True:
    t = time.perf_counter()
    if select.select([sys.stdin], [], [], 0.002)[0]:       # the test's block ended (stdin closed)
        break
    late_ms.append((time.perf_counter() - t - 0.002) * 1000)
print(json.dumps(late_ms))
"""


@dataclass
class CoreWait:
    late_ms: list[float] = field(default_factory=list)

    def quantile_ms(self, q: float) -> float:
        ordered = sorted(self.late_ms)
        return ordered[max(0, math.ceil(q * len(ordered)) - 1)] if ordered else 0.0

    @property
    def p99_ms(self) -> float:
        return self.quantile_ms(0.99)

    @property
    def max_ms(self) -> float:
        return max(self.late_ms, default=0.0)


@contextmanager
def core_wait() -> Iterator[CoreWait]:
    found = CoreWait()
    probe = subprocess.Popen([sys.executable, "-c", PROBE], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True)
    try:
        yield found
    finally:
        out, _ = probe.communicate("", timeout=30)           # closing stdin ends the probe
        found.late_ms = json.loads(out or "[]")

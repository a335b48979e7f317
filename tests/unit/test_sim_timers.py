"""The simulator's event loop (targets.sim.precise): timers never fire early, I/O is not held up.

Run in a child process: the test process has gevent's monkey-patching, which replaces the
``selectors`` module the simulator's loop is built on.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

SCRIPT = r"""
import asyncio, json, socket, time
from targets.sim import precise

async def main():
    loop = asyncio.get_running_loop()
    early, late = [], []
    for i in range(60):
        delay = 0.0002 + (i % 7) * 0.00037          # sub-millisecond remainders of every size
        due = loop.time() + delay
        fired = loop.create_future()
        loop.call_at(due, lambda f=fired: f.set_result(loop.time()))
        at = await fired
        (early if at < due else late).append((at - due) * 1000)
    # a readable socket wakes the loop while a timer is pending far in the future
    a, b = socket.socketpair()
    a.setblocking(False)
    got = loop.create_future()
    loop.add_reader(a.fileno(), lambda: got.done() or got.set_result(loop.time()))
    loop.call_later(5.0, lambda: None)
    sent = loop.time()
    loop.call_later(0.02, b.send, b"x")
    woke = await got
    print(json.dumps({"early": early, "late_median_ms": sorted(late)[len(late) // 2],
                      "io_wait_ms": (woke - sent) * 1000,
                      "selector": type(loop._selector).__name__}))

loop = precise.new_event_loop()
loop.run_until_complete(main())
"""


def test_timers_never_fire_early_and_io_still_wakes_the_loop() -> None:
    out = subprocess.run([sys.executable, "-c", SCRIPT], cwd=REPO, capture_output=True, text=True, timeout=60,
                         check=True)
    result = json.loads(out.stdout)
    assert result["selector"] == "PreciseEpollSelector"
    assert result["early"] == []                    # a token is never written before its plan says
    assert 20 <= result["io_wait_ms"] < 500         # readable at 20 ms: not held until the 5 s timer

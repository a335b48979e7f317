"""L2 gateway: open-loop arrivals. `locust -f locustfiles/l2_open_loop.py --arrival-rate 20 -t 1m`.

One dispatcher (OpenLoopUser, fixed_count 1: -u adds nothing) draws --arrival-process gaps at
--arrival-rate and sends each request at its intended time, up to --max-in-flight at once.
Distributed: run with -u >= the number of workers; each worker gets one dispatcher and its share.
"""

from fourfold.levels.l2_gateway import OpenLoopUser

__all__ = ["OpenLoopUser"]

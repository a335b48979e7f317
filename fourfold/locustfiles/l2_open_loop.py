"""L2 gateway: open-loop arrivals. `locust -f locustfiles/l2_open_loop.py --arrival-rate 20 -t 1m`.

One dispatcher (OpenLoopUser, fixed_count 1: -u adds nothing) draws --arrival-process gaps at
--arrival-rate and sends each request at its intended time, up to --max-in-flight at once.
Distributed: run with -u >= the number of workers; each worker gets one dispatcher and its share.
"""

from locust import events

from fourfold.levels import OpenLoopUser

events.init_command_line_parser.add_listener(OpenLoopUser.add_arguments)
events.init.add_listener(OpenLoopUser.register)

__all__ = ["OpenLoopUser"]

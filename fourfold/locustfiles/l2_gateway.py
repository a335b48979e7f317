"""L2 gateway: the concurrency ladder. `locust -f locustfiles/l2_gateway.py` (no --host: embedded simulator).

GatewayUser climbs --ladder (default 8,16,32,64 users, --ladder-hold-s each) and reports the knee;
with --ladder off, -u/-r/-t drive a plain closed loop. LadderShape is a Locust LoadTestShape: being
in this namespace makes Locust use it (in the web UI, --class-picker offers "Default" instead).
"""

from locust import events

from fourfold.levels import GatewayUser, LadderShape

events.init_command_line_parser.add_listener(GatewayUser.add_arguments)
events.init.add_listener(GatewayUser.register)

__all__ = ["GatewayUser", "LadderShape"]

"""L1 single-model throughput. `locust -f locustfiles/l1_throughput.py` (no --host: embedded simulator)."""

from locust import events

from fourfold.levels import ThroughputUser

events.init_command_line_parser.add_listener(ThroughputUser.add_arguments)
events.init.add_listener(ThroughputUser.register)

__all__ = ["ThroughputUser"]

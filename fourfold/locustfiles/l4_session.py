"""L4 user session flow. `locust -f locustfiles/l4_session.py` (no --host: embedded simulator;
--ab-split 50/50 without --host: two simulators, baseline and candidate)."""

from locust import events

from fourfold.levels import SessionUser

events.init_command_line_parser.add_listener(SessionUser.add_arguments)
events.init.add_listener(SessionUser.register)

__all__ = ["SessionUser"]

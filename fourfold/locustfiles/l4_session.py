"""L4 user session flow. `locust -f locustfiles/l4_session.py` (no --host: embedded simulator;
--ab-split 50/50 without --host: two simulators, baseline and candidate)."""

from fourfold.levels.l4_session import SessionUser

__all__ = ["SessionUser"]

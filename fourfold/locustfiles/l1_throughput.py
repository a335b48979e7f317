"""L1 single-model throughput. `locust -f locustfiles/l1_throughput.py` (no --host: embedded simulator)."""

from fourfold.levels.l1_throughput import ThroughputUser

__all__ = ["ThroughputUser"]

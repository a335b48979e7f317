"""L1 single-model throughput: one model at saturation.

Closed-loop users with no think time send long generations (``--ignore-eos`` is implied against
the embedded simulator, so every answer runs to ``max_tokens``); the run reports output tokens/s,
TTFT, ITL, TPOT and E2E, and the server-metrics sampler records the target's running/waiting
requests, KV-cache usage and GPU / memory-bandwidth utilisation (Prometheus ``/metrics`` of
vLLM, SGLang, TGI or a DCGM exporter, and ``nvidia-smi`` when it is on this machine).
"""

from __future__ import annotations

from locust import task

from fourfold.levels.base import LLMUser


class ThroughputUser(LLMUser):
    """Saturates the target: every user sends the next prompt as soon as the last one ended."""

    level = "l1"
    scenario = "saturation"
    samples_server_metrics = True
    ignore_eos_on_simulator = True

    @task
    def generate(self) -> None:
        self.request(self.next_item())

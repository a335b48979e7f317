"""Simulated server and GPU metrics, rendered in Prometheus text format (vLLM + DCGM names).

The gauges are derived from the simulator's own state: running sequences, waiting requests,
and tokens held in the (simulated) KV cache. GPU utilisation rises with the batch and saturates;
memory-bandwidth utilisation follows the decode load: with ``mem_bw_full_tokens_per_s`` set, it
rises linearly with the output tokens/s of the last few seconds (:class:`TokenRate`, measured at
each scrape) to ``mem_bw_max_pct`` at that rate, else with the batch to ``mem_bw_max_pct`` at
``max_batch`` (the article: below 42% before, up to 92% after). ``fourfold_sim_send_lag_seconds`` is the
simulator's own scheduling accuracy: how late each token left versus its plan.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

from fourfold.targets.sim.profile import Profile

LAG_RESOLUTION_MS = 0.01
LAG_SLOTS = 100_000                       # 0 .. 1000 ms in 0.01 ms slots, the last slot is "above"
LAG_BUCKETS_S = (0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)


class LagHistogram:
    """Fixed 0.01 ms slots: cheap to record on the hot path, exact enough for p50/p99."""

    __slots__ = ("counts", "count", "sum_ms", "max_ms")

    def __init__(self) -> None:
        self.counts = [0] * (LAG_SLOTS + 1)
        self.count = 0
        self.sum_ms = 0.0
        self.max_ms = 0.0

    def record(self, lag_ms: float) -> None:
        if lag_ms < 0.0:
            lag_ms = 0.0
        slot = int(lag_ms * 100.0)
        self.counts[slot if slot < LAG_SLOTS else LAG_SLOTS] += 1
        self.count += 1
        self.sum_ms += lag_ms
        if lag_ms > self.max_ms:
            self.max_ms = lag_ms

    def record_run(self, now_s: float, dues_s: list[float], start: int, stop: int) -> None:
        """Record the lag of tokens ``start .. stop - 1`` all written at ``now_s`` (one call per step)."""
        if stop <= start:
            return
        counts = self.counts
        top = LAG_SLOTS
        total_s = 0.0
        for due_s in dues_s[start:stop]:
            lag_s = now_s - due_s
            if lag_s <= 0.0:
                counts[0] += 1
                continue
            slot = int(lag_s * 100_000.0)
            counts[slot if slot < top else top] += 1
            total_s += lag_s
        self.count += stop - start
        self.sum_ms += total_s * 1000.0
        worst_ms = (now_s - dues_s[start]) * 1000.0   # dues ascend: the first token waited longest
        if worst_ms > self.max_ms:
            self.max_ms = worst_ms

    def quantile_ms(self, q: float) -> float:
        """Upper edge of the slot holding the q-quantile (0 when empty)."""
        if not self.count:
            return 0.0
        rank = max(1, math.ceil(q * self.count))
        seen = 0
        for slot, n in enumerate(self.counts):
            seen += n
            if seen >= rank:
                return min((slot + 1) * LAG_RESOLUTION_MS, self.max_ms)
        return self.max_ms

    def cumulative_le_ms(self, bounds_ms: tuple[float, ...]) -> list[int]:
        """Counts at or below each bound (ascending bounds), in one pass over the slots."""
        out = []
        seen = 0
        start = 0
        for bound_ms in bounds_ms:
            stop = min(LAG_SLOTS, int(round(bound_ms * 100.0)))
            seen += sum(self.counts[start:stop])
            start = max(start, stop)
            out.append(seen)
        return out


class TokenRate:
    """Output tokens/s over the last ``window_s`` seconds, from (time, total) pairs seen at scrapes."""

    def __init__(self, window_s: float = 5.0) -> None:
        self.window_s = window_s
        self._seen: deque[tuple[float, int]] = deque()

    def observe(self, now_s: float, total: int) -> float | None:
        """Record ``total`` at ``now_s``; the rate since the oldest sample within the window (or the
        newest one before it), None at the first scrape."""
        seen = self._seen
        while len(seen) > 1 and seen[1][0] <= now_s - self.window_s:
            seen.popleft()
        rate = None
        if seen and now_s > seen[0][0]:
            rate = max(0.0, (total - seen[0][1]) / (now_s - seen[0][0]))
        seen.append((now_s, total))
        return rate


@dataclass
class SimCounters:
    """Monotonic counters and live gauges the server updates."""

    running: int = 0
    waiting: int = 0
    kv_tokens: int = 0
    requests_total: int = 0
    prompt_tokens_total: int = 0
    generation_tokens_total: int = 0
    finished: dict[str, int] = field(default_factory=lambda: {"stop": 0, "length": 0, "abort": 0})
    rejected_total: int = 0
    received_total: int = 0                    # generation requests parsed (faulted or not)
    faults: dict[str, int] = field(default_factory=dict)   # injected faults by kind
    lag: LagHistogram = field(default_factory=LagHistogram)
    token_rate: TokenRate = field(default_factory=TokenRate)


@dataclass(frozen=True)
class GpuGauges:
    gpu_util_pct: float
    mem_bw_util_pct: float
    kv_cache_usage: float


def gpu_gauges(profile: Profile, running: int, kv_tokens: int,
               tokens_per_s: float | None = None) -> GpuGauges:
    """Simulated GPU state for a batch of ``running`` sequences writing ``tokens_per_s`` (pure)."""
    load = min(1.0, running / profile.max_batch)
    util = profile.gpu_util_idle_pct
    if running:
        util += (profile.gpu_util_max_pct - profile.gpu_util_idle_pct) * math.sqrt(load)
    kv = min(1.0, kv_tokens / profile.kv_cache_capacity_tokens) if profile.kv_cache_capacity_tokens else 0.0
    return GpuGauges(round(util, 2), round(mem_bw_pct(profile, load, tokens_per_s), 2), round(kv, 6))


def mem_bw_pct(profile: Profile, load: float, tokens_per_s: float | None) -> float:
    """Memory-bandwidth utilisation: linear in tokens/s up to ``mem_bw_full_tokens_per_s`` when the
    profile sets it (decode reads the weights once per step: bandwidth follows the token rate),
    else linear in the batch share ``load``; at most ``mem_bw_max_pct``."""
    full = profile.mem_bw_full_tokens_per_s
    if full > 0:
        return profile.mem_bw_max_pct * min(1.0, (tokens_per_s or 0.0) / full)
    return profile.mem_bw_max_pct * load


def _metric(lines: list[str], name: str, kind: str, help_text: str, samples: list[tuple[str, float]]) -> None:
    lines.append(f"# HELP {name} {help_text}")
    lines.append(f"# TYPE {name} {kind}")
    for labels, value in samples:
        number = repr(float(value)) if isinstance(value, float) else str(value)
        lines.append(f"{name}{{{labels}}} {number}")


def render_metrics(profile: Profile, counters: SimCounters, now_s: float | None = None) -> str:
    """The /metrics page (Prometheus text exposition format 0.0.4); ``now_s`` (a monotonic clock)
    feeds the token rate behind memory bandwidth."""
    rate = counters.token_rate.observe(now_s, counters.generation_tokens_total) if now_s is not None else None
    gauges = gpu_gauges(profile, counters.running, counters.kv_tokens, rate)
    model = f'model_name="{profile.model}"'
    gpu = ('gpu="0",UUID="GPU-fourfold-sim-0",device="nvidia0",'
           'modelName="fourfold simulated GPU",Hostname="fourfold-sim"')
    lines: list[str] = []
    _metric(lines, "vllm:num_requests_running", "gauge", "Number of requests currently running on GPU.",
            [(model, counters.running)])
    _metric(lines, "vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.",
            [(model, counters.waiting)])
    _metric(lines, "vllm:gpu_cache_usage_perc", "gauge", "GPU KV-cache usage. 1 means 100 percent usage.",
            [(model, gauges.kv_cache_usage)])
    _metric(lines, "vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.",
            [(model, gauges.kv_cache_usage)])
    _metric(lines, "vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed.",
            [(model, counters.prompt_tokens_total)])
    _metric(lines, "vllm:generation_tokens_total", "counter", "Number of generation tokens processed.",
            [(model, counters.generation_tokens_total)])
    _metric(lines, "vllm:request_success_total", "counter", "Count of successfully processed requests.",
            [(f'{model},finished_reason="{reason}"', n) for reason, n in counters.finished.items()
             if reason != "abort"])
    _metric(lines, "DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", [(gpu, gauges.gpu_util_pct)])
    _metric(lines, "DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %).",
            [(gpu, gauges.mem_bw_util_pct)])
    idle_w, max_w = profile.gpu_power_idle_w, profile.gpu_power_max_w
    power = idle_w + (max_w - idle_w) * gauges.gpu_util_pct / 100
    _metric(lines, "DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", [(gpu, round(power, 3))])
    _metric(lines, "fourfold_sim_requests_total", "counter", "Requests admitted by the simulator.",
            [(model, counters.requests_total)])
    _metric(lines, "fourfold_sim_aborted_total", "counter", "Generations aborted by a client disconnect.",
            [(model, counters.finished["abort"])])
    _metric(lines, "fourfold_sim_rejected_total", "counter", "Requests rejected by the concurrency limit.",
            [(model, counters.rejected_total)])
    _metric(lines, "fourfold_sim_received_total", "counter",
            "Generation requests received (admitted, rejected or answered by a fault).",
            [(model, counters.received_total)])
    _metric(lines, "fourfold_sim_faults_total", "counter",
            "Faults injected, by kind (fourfold.targets.sim.faults).",
            [(f'{model},fault="{kind}"', n) for kind, n in sorted(counters.faults.items())])
    lag = counters.lag
    lines.append("# HELP fourfold_sim_send_lag_seconds How late each token was written versus its plan.")
    lines.append("# TYPE fourfold_sim_send_lag_seconds histogram")
    cumulative = lag.cumulative_le_ms(tuple(b * 1000.0 for b in LAG_BUCKETS_S))
    for bound_s, n in zip(LAG_BUCKETS_S, cumulative):
        lines.append(f'fourfold_sim_send_lag_seconds_bucket{{{model},le="{bound_s}"}} {n}')
    lines.append(f'fourfold_sim_send_lag_seconds_bucket{{{model},le="+Inf"}} {lag.count}')
    lines.append(f"fourfold_sim_send_lag_seconds_sum{{{model}}} {lag.sum_ms / 1000.0!r}")
    lines.append(f"fourfold_sim_send_lag_seconds_count{{{model}}} {lag.count}")
    lines.append("# HELP fourfold_sim_send_lag_quantile_seconds "
                 "Send lag quantiles since start (0.01 ms slots).")
    lines.append("# TYPE fourfold_sim_send_lag_quantile_seconds gauge")
    for q in (0.5, 0.99):
        lines.append(f'fourfold_sim_send_lag_quantile_seconds{{{model},quantile="{q}"}} '
                     f'{lag.quantile_ms(q) / 1000.0!r}')
    return "\n".join(lines) + "\n"

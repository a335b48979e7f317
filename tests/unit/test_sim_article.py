"""The simulator's profiles differ where the article's versions differ (issue #18, item 2):
a heavy E2E tail on the candidate, connection reuse, memory bandwidth that follows tokens/s."""

from __future__ import annotations

from fourfold.targets.sim.answers import Answer
from fourfold.targets.sim.cli import build_parser, config_from_args
from fourfold.targets.sim.gateway import GatewayConfig
from fourfold.targets.sim.metrics import SimCounters, TokenRate, gpu_gauges, render_metrics
from fourfold.targets.sim.plan import RequestFacts, make_plan
from fourfold.targets.sim.profile import load_profile


def _plan(profile, index: int, words: int = 80):
    return make_plan(profile, Answer("word " * words), RequestFacts("p", 1, request_index=index), 0)


def test_candidate_stalls_every_33rd_request_mid_stream() -> None:
    profile = load_profile("candidate", {"pulse.probability": 0.0})     # pulses off: only the stall
    stalled = [i for i in range(99) if _plan(profile, i).pauses]
    assert stalled == [32, 65, 98]                       # a count, not a draw: n // 33 per run
    plan = _plan(profile, 32)
    [(at, ms)] = plan.pauses
    assert at == plan.output_tokens // 2 and 1500 < ms < 3500
    assert plan.duration_ms > _plan(profile, 31).duration_ms + 1500
    assert not any(_plan(load_profile("baseline"), i).pauses for i in range(99))


def test_tail_stall_raises_p99_while_p95_falls() -> None:
    """Plans alone (no server): 330 requests of each profile, the candidate's P99 above the
    baseline's, its P95 below."""
    def quantiles(name: str) -> tuple[float, float]:
        profile = load_profile(name)
        e2e = sorted(_plan(profile, i, 40 + (i * 7) % 60).duration_ms for i in range(330))
        return e2e[int(0.95 * 330)], e2e[int(0.99 * 330)]
    (b95, b99), (c95, c99) = quantiles("baseline"), quantiles("candidate")
    assert c95 < b95 and c99 > b99 + 1000


def test_keepalive_max_requests_by_profile() -> None:
    config = GatewayConfig(keepalive_max_requests=4)
    assert [config.keeps_alive(n) for n in range(1, 6)] == [True, True, True, False, False]
    assert GatewayConfig().keeps_alive(10_000)
    parse = build_parser().parse_args
    assert config_from_args(parse(["--profile", "baseline"])).gateway.keepalive_max_requests == 4
    assert config_from_args(parse(["--profile", "candidate"])).gateway.keepalive_max_requests == 10
    assert config_from_args(parse(["--profile", "flat"])).gateway.keepalive_max_requests == 0
    assert config_from_args(parse(["--profile", "baseline", "--keepalive-max-requests", "0"])
                            ).gateway.keepalive_max_requests == 0


def test_token_rate_over_a_window() -> None:
    rate = TokenRate(window_s=5.0)
    assert rate.observe(0.0, 0) is None
    assert rate.observe(1.0, 400) == 400.0
    assert rate.observe(2.0, 1000) == 500.0
    for t in range(3, 10):
        rate.observe(float(t), 1000 + 100 * (t - 2))
    assert abs(rate.observe(10.0, 1800) - 100.0) < 1e-9     # only the last 5 s count


def test_memory_bandwidth_follows_tokens_per_second() -> None:
    baseline, candidate = load_profile("baseline"), load_profile("candidate")
    assert gpu_gauges(baseline, 8, 0, 0.0).mem_bw_util_pct == 0.0
    assert gpu_gauges(baseline, 8, 0, 200.0).mem_bw_util_pct == 21.0
    assert gpu_gauges(baseline, 8, 0, 5000.0).mem_bw_util_pct == 42.0
    # the demo's L1 (8 users): ~390 tokens/s on baseline, ~520 on candidate
    assert gpu_gauges(baseline, 8, 0, 390.0).mem_bw_util_pct < 42 < gpu_gauges(candidate, 8, 0, 520.0).mem_bw_util_pct
    assert gpu_gauges(candidate, 8, 0, 520.0).mem_bw_util_pct > 80
    counters = SimCounters(running=8)
    render_metrics(candidate, counters, 100.0)
    counters.generation_tokens_total = 1100
    text = render_metrics(candidate, counters, 102.0)
    [line] = [x for x in text.splitlines() if x.startswith("DCGM_FI_DEV_MEM_COPY_UTIL{")]
    assert line.endswith(" 92.0")                          # 550 tokens/s: the candidate's full rate

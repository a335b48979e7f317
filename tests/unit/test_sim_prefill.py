"""The simulator's prefill cost and prefix cache (fourfold#22): TTFT grows with input tokens by the
profile's ms per 1k tokens, and a cached prefix costs only (1 - discount) of that."""

from __future__ import annotations

import pytest

from fourfold.errors import ProfileError
from fourfold.targets.sim.answers import Answer
from fourfold.targets.sim.plan import RequestFacts, make_plan, prefill_ms
from fourfold.targets.sim.prefix import PrefixCache
from fourfold.targets.sim.profile import load_profile
from fourfold.workloads.synthetic import block_text, make_text

ANSWER = Answer("A short answer.", "x", None)


def test_baseline_says_its_prefill_cost_and_flat_has_none():
    baseline = load_profile("baseline")
    assert baseline.prefill_ms_per_1k_tokens == 40.0 and baseline.prefix_cache_block_tokens == 16
    assert load_profile("candidate").prefill_ms_per_1k_tokens == 40.0           # extends baseline
    assert load_profile("flat").prefill_ms_per_1k_tokens == 0.0                 # timing benchmarks stay exact
    assert load_profile("reference").prefill_ms_per_1k_tokens == 0.0


@pytest.mark.parametrize(("input_tokens", "cached", "expected_ms"), [
    (0, 0, 0.0), (128, 0, 5.12), (1000, 0, 40.0), (2048, 0, 81.92),
    (2048, 1536, 40 * (2048 - 0.9 * 1536) / 1000), (100, 500, 40 * (100 - 90) / 1000),
])
def test_prefill_is_linear_in_input_tokens_with_a_discount_for_cached_ones(input_tokens, cached, expected_ms):
    assert prefill_ms(load_profile("baseline"), input_tokens, cached) == pytest.approx(expected_ms)


def test_the_plans_ttft_includes_the_prefill_and_says_so():
    profile = load_profile("baseline", {"ttft_jitter_ms": 0, "cold_requests": 0})
    short = make_plan(profile, ANSWER, RequestFacts(prompt="p", input_tokens=128), seed=1)
    long = make_plan(profile, ANSWER, RequestFacts(prompt="p", input_tokens=2048), seed=1)
    cached = make_plan(profile, ANSWER,
                       RequestFacts(prompt="p", input_tokens=2048, cached_tokens=1536), seed=1)
    assert long.ttft_ms - short.ttft_ms == pytest.approx(40 * 1920 / 1000)
    assert long.ttft_ms - cached.ttft_ms == pytest.approx(40 * 0.9 * 1536 / 1000)
    assert long.summary()["prefill_ms"] == pytest.approx(81.92, abs=1e-3)
    assert cached.summary()["cached_tokens"] == 1536
    flat = make_plan(load_profile("flat"), ANSWER, RequestFacts(prompt="p", input_tokens=2048), seed=1)
    assert flat.ttft_ms == 50.0 and "prefill_ms" not in flat.summary()        # the header is unchanged


def test_bad_prefill_fields_are_refused():
    with pytest.raises(ProfileError):
        load_profile("baseline", {"prefill_ms_per_1k_tokens": -1})
    with pytest.raises(ProfileError):
        load_profile("baseline", {"prefix_cache_discount": 1.5})


def test_the_prefix_cache_finds_the_shared_leading_blocks():
    cache = PrefixCache(block_tokens=16, capacity_tokens=100_000)
    prefix = make_text(512, "shared")                  # 512 simulator tokens (the estimate is its count)
    first = f"{prefix} {make_text(100, 1)}"
    assert cache.admit(first) == 0                      # nothing seen yet
    assert cache.admit(first) == 608                    # every full block of 612 tokens
    assert cache.admit(f"{prefix} {make_text(100, 2)}") == 512
    assert cache.admit(make_text(612, 3)) == 0          # a different start shares nothing
    assert cache.admit(f"x {prefix}") == 0              # blocks are chained from the start


def test_the_prefix_cache_evicts_the_least_recently_used_blocks():
    cache = PrefixCache(block_tokens=16, capacity_tokens=64)          # four blocks
    a, b = block_text(1, 64), block_text(2, 64)
    cache.admit(a)
    cache.admit(b)                                      # a's blocks go
    assert len(cache) == 4 and cache.admit(b) == 64 and cache.admit(a) == 0
    assert PrefixCache(block_tokens=0, capacity_tokens=64).admit(a) == 0


def test_the_app_discounts_a_shared_prefix(tmp_path):
    import asyncio

    from fourfold.targets.sim.app import SimApp, SimConfig
    from fourfold.targets.sim.wire import ParsedRequest

    profile = load_profile("baseline", {"ttft_jitter_ms": 0, "cold_requests": 0})
    loop = asyncio.new_event_loop()
    try:
        app = SimApp(SimConfig(profile=profile, seed=1), loop)
        prefix = make_text(1536, "p")
        plans = []
        for i in range(3):
            prompt = f"{prefix} {make_text(512, i)}"
            parsed = ParsedRequest(dialect="openai", model="m", prompt=prompt, input_tokens=2048, stream=True,
                                   messages=(("user", prompt),))
            plans.append(app.plan(parsed))
    finally:
        loop.close()
    assert [p.cached_tokens for p in plans] == [0, 1536, 1536]
    assert plans[0].ttft_ms - plans[1].ttft_ms == pytest.approx(40 * 0.9 * 1536 / 1000)

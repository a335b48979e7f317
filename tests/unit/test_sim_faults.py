"""fourfold.targets.sim.faults without sockets: specs, the seeded draw, and what each wrapper writes."""

from __future__ import annotations

import collections

import pytest

from fourfold.errors import FaultError
from fourfold.targets.sim import wire_anthropic, wire_openai, wire_triton
from fourfold.targets.sim.fault_spec import FAULT_KINDS, FaultSpec, parse_fault_arg
from fourfold.targets.sim.faults import (
    INVALID_UTF8,
    MALFORMED_EVENT,
    FaultInjector,
    drop_last_event,
    fault_reply,
    shape_plan,
    wrap_encoder,
)
from fourfold.targets.sim.plan import Plan
from fourfold.targets.sim.profile import ProfileError, load_profile, profile_from_dict


def plan(n: int = 6) -> Plan:
    tokens = [f"t{i} " for i in range(n)]
    return Plan(seed=0, profile="flat", tokens=tokens, offsets_ms=[50.0 + 10 * i for i in range(n)],
                ttft_ms=50.0, itl_ms=10.0, orchestrator_ms=0.0, input_tokens=3, finish_reason="stop")


def test_spec_orders_rates_canonically_and_drops_zeros() -> None:
    spec = FaultSpec.from_dict({"endless": 0.1, "http_429": 0.05, "stall": 0, "stall_s": 3})
    assert spec.rates == (("http_429", 0.05), ("endless", 0.1)) and spec.stall_s == 3.0
    assert FaultSpec.from_dict(spec.to_dict()) == spec


@pytest.mark.parametrize(("data", "message"), [
    ({"meteor": 0.1}, "unknown fault 'meteor'; valid kinds: mid_stream_disconnect"),
    ({"stall": 1.5}, "between 0 and 1"),
    ({"stall": True}, "between 0 and 1"),
    ({"stall_s": -1}, ">= 0"),
    ({"http_500": 0.6, "http_503": 0.6}, "add up to 1.2"),
])
def test_bad_specs_say_what_is_valid(data: dict, message: str) -> None:
    with pytest.raises(FaultError, match=message):
        FaultSpec.from_dict(data)


@pytest.mark.parametrize(("text", "expected"), [("malformed_json=0.2", ("malformed_json", 0.2)),
                                                ("stall_s=3", ("stall_s", 3.0)),
                                                (" endless = 1", ("endless", 1.0))])
def test_parse_fault_arg(text: str, expected: tuple) -> None:
    assert parse_fault_arg(text) == expected


@pytest.mark.parametrize("text", ["malformed_json", "=0.2", "bogus=0.1", "stall=lots"])
def test_parse_fault_arg_rejects(text: str) -> None:
    with pytest.raises(FaultError):
        parse_fault_arg(text)


def test_the_draw_is_deterministic_under_the_seed_and_follows_the_rates() -> None:
    spec = FaultSpec.from_dict({kind: 0.2 / len(FAULT_KINDS) for kind in FAULT_KINDS})
    prompts = [f"prompt {i}" for i in range(40)] * 150

    def draws(seed: int) -> list[str]:
        injector = FaultInjector(spec, seed)
        return [injector.choose(p) for p in prompts]

    first = draws(1)
    assert first == draws(1) and first != draws(2)
    counts = collections.Counter(first)
    assert abs(sum(n for kind, n in counts.items() if kind) / len(prompts) - 0.2) < 0.02
    assert set(counts) == {"", *FAULT_KINDS}
    assert not FaultInjector(None, 0) and FaultInjector(None, 0).choose("x") == ""


def test_head_fault_replies() -> None:
    spec = FaultSpec(retry_after_s=7)
    assert fault_reply("http_429", spec).headers == [("retry-after", "7")]
    assert fault_reply("http_503", spec).status == 503
    html = fault_reply("wrong_content_type", spec)
    assert (html.status, html.content_type) == (200, "text/html; charset=utf-8") \
        and html.body.startswith(b"<!DOCTYPE")


def test_stall_is_a_pause_in_the_plan_at_the_middle_token() -> None:
    p = plan(6)
    shape_plan(p, "stall", FaultSpec(stall_s=2))
    assert p.offsets_ms == [50, 60, 70, 2080, 2090, 2100] and p.pauses == [(3, 2000.0)]
    assert p.summary()["fault"] == "stall"


@pytest.mark.parametrize(("events", "expected"), [
    (b"data: a\n\ndata: [DONE]\n\n", b"data: a\n\n"),
    (b"event: x\ndata: 1\n\nevent: message_stop\ndata: {}\n\n", b"event: x\ndata: 1\n\n"),
    (b"data: [DONE]\n\n", b""),
    (b"", b""),
])
def test_drop_last_event(events: bytes, expected: bytes) -> None:
    assert drop_last_event(events) == expected


def encoders(p: Plan):
    return {"openai": wire_openai.ChatEncoder(p, "r1", "m", include_usage=True),
            "anthropic": wire_anthropic.MessagesEncoder(p, "r1", "m"),
            "triton": wire_triton.GenerateEncoder(p, "m")}


@pytest.mark.parametrize("dialect", ["openai", "anthropic", "triton"])
def test_encoder_faults_touch_only_the_middle_token_whatever_the_batching(dialect: str) -> None:
    p = plan(6)
    clean = encoders(p)[dialect]
    whole = clean.tokens(0, p.tokens)
    for kind in ("malformed_json", "invalid_utf8", "huge_chunk", "missing_done"):
        encoder = wrap_encoder(encoders(p)[dialect], p, kind, FaultSpec(huge_chunk_bytes=100))
        one_step = encoder.tokens(0, p.tokens)
        per_token = b"".join(encoder.tokens(i, [t]) for i, t in enumerate(p.tokens))
        assert one_step == per_token                   # the same bytes in any batching of tokens
        if kind == "malformed_json":
            assert one_step.replace(MALFORMED_EVENT, b"") == whole and one_step.count(MALFORMED_EVENT) == 1
        elif kind == "invalid_utf8":
            assert one_step.count(INVALID_UTF8) == 1 and one_step.replace(INVALID_UTF8, b"") == whole
        elif kind == "huge_chunk":
            assert one_step.count(b"x" * 100) == 1 and len(one_step) > len(whole) + 100
        else:
            assert one_step == whole and encoder.closing() == drop_last_event(clean.closing())


def test_non_streamed_bodies_carry_the_fault() -> None:
    p = plan(6)
    clean = wire_openai.ChatEncoder(p, "r1", "m", include_usage=False).body()
    body = {kind: wrap_encoder(wire_openai.ChatEncoder(p, "r1", "m", include_usage=False), p, kind,
                               FaultSpec(huge_chunk_bytes=10)).body()
            for kind in ("malformed_json", "missing_done", "invalid_utf8", "huge_chunk", "stall")}
    assert body["malformed_json"] == body["missing_done"] == clean[:len(clean) // 2]
    assert body["invalid_utf8"] == clean.replace(b'"t0 ', b'"t0 ' + INVALID_UTF8, 1)   # inside the answer
    assert body["huge_chunk"].endswith(b',"fault_pad":"xxxxxxxxxx"}')
    assert body["stall"] == clean


def test_profile_faults_field_faulty_profile_and_overrides() -> None:
    faulty = load_profile("faulty")
    assert faulty.faults is not None and abs(faulty.faults.total_rate - 0.2) < 1e-9
    assert {kind for kind, _ in faulty.faults.rates} == set(FAULT_KINDS)
    tuned = load_profile("faulty", {"faults.stall_s": 2, "faults.endless": 0})
    assert tuned.faults.stall_s == 2.0 and "endless" not in dict(tuned.faults.rates)
    assert profile_from_dict(faulty.to_dict()) == faulty                        # round trip
    assert load_profile("baseline").faults is None
    with pytest.raises(ProfileError, match="unknown fault 'meteor'"):
        load_profile("baseline", {"faults.meteor": 0.1})

"""The plan for one request (pure): which tokens, and when each is due.

A plan is decided the moment a request has been fully received (offsets are milliseconds from
that moment) and never changes afterwards; the server only executes it. It is published in the
``x-fourfold-plan`` response header, so a client can compare what it measured with what the
simulator intended.

Determinism: every random draw comes from a per-request ``random.Random`` seeded with
``(seed, prompt, n-th occurrence of that prompt)`` and the draws happen in a fixed order
(perturbation, generation, TTFT, orchestrator, cold start, pulse, tail stall, inter-token gaps).
The only input that depends on timing is ``running`` (load), which is 0 for sequential requests.
"""

from __future__ import annotations

import dataclasses
import json
import random
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any

from fourfold.targets.sim.answers import Answer
from fourfold.targets.sim.paraphrase import GenerationKnobs, Slip, generate
from fourfold.targets.sim.perturb import QualityKnobs, perturb
from fourfold.targets.sim.profile import MAX_REASONING_TOKENS, Profile
from fourfold.targets.sim.tokens import cycle_tokens, tokenize
from fourfold.targets.sim.toolcalls import ToolCall


@dataclass(frozen=True)
class RequestFacts:
    """What the planner needs to know about one request (already parsed from its dialect)."""

    prompt: str                  # last user message text
    input_tokens: int            # token count of every message content (system included)
    max_tokens: int | None = None
    ignore_eos: bool = False
    occurrence: int = 0          # how many times this prompt was seen before (0 = first)
    request_index: int = 0       # how many requests the server admitted before this one
    running: int = 0             # sequences already generating when this one was admitted
    cached_tokens: int = 0       # leading input tokens the prefix cache held (fourfold.targets.sim.prefix)


@dataclass
class Plan:
    """Tokens and their due offsets (ms since the request was fully received)."""

    seed: int
    profile: str
    tokens: list[str]
    offsets_ms: list[float]
    ttft_ms: float
    itl_ms: float
    orchestrator_ms: float
    input_tokens: int
    finish_reason: str           # "stop" or "length"
    structured: bool = False
    item_id: str = ""
    load_factor: float = 1.0
    pauses: list[tuple[int, float]] = field(default_factory=list)
    queued_ms: float = 0.0       # set by the server when a concurrency limit queued the request
    fault: str = ""               # the injected fault (fourfold.targets.sim.faults), "" for none
    messages: int = 0             # chat messages in the request (the history a client sent)
    session: dict[str, Any] = field(default_factory=dict)   # turn facts (fourfold.targets.sim.sessions)
    prefill_ms: float = 0.0       # the part of ttft_ms spent reading the prompt (prefill_ms())
    cached_tokens: int = 0        # input tokens the prefix cache held
    slips: list[Slip] = field(default_factory=list)   # planted errors (fourfold.targets.sim.paraphrase)
    reasoning: int = 0            # the first `reasoning` tokens are reasoning, the rest the answer
    reasoning_field: str = "reasoning_content"   # the OpenAI delta field they go in (the profile's)
    tokens_per_event: int = 1     # tokens an event carries (the profile's; the encoders join them)
    tool_call: ToolCall | None = None   # the answer is this call; its tokens are the arguments' text

    @property
    def output_tokens(self) -> int:
        return len(self.tokens)

    @property
    def text(self) -> str:
        """The answer (reasoning left out)."""
        return "".join(self.tokens[self.reasoning:])

    @property
    def reasoning_text(self) -> str:
        return "".join(self.tokens[:self.reasoning])

    @property
    def answer_ms(self) -> float | None:
        """The planned offset of the first answer token (None: the answer has no token)."""
        return self.offsets_ms[self.reasoning] if self.reasoning < len(self.offsets_ms) else None

    @property
    def duration_ms(self) -> float:
        return self.offsets_ms[-1] if self.offsets_ms else 0.0

    def summary(self, detail: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {
            "seed": self.seed,
            "profile": self.profile,
            "ttft_ms": round(self.ttft_ms, 3),
            "itl_ms": round(self.itl_ms, 3),
            "orchestrator_ms": round(self.orchestrator_ms, 3),
            "output_tokens": self.output_tokens,
            "input_tokens": self.input_tokens,
            "pauses": [[i, round(ms, 3)] for i, ms in self.pauses],
            "finish_reason": self.finish_reason,
            "structured": self.structured,
            "item_id": self.item_id,
            "load_factor": round(self.load_factor, 4),
            "queued_ms": round(self.queued_ms, 3),
        }
        if self.fault:
            out["fault"] = self.fault
        if self.messages:
            out["messages"] = self.messages
        if self.session:
            out["session"] = self.session
        if self.slips:
            out["slips"] = [[s.kind, s.right, s.wrong] for s in self.slips]
        if self.reasoning:
            out["reasoning_tokens"] = self.reasoning
            answer_ms = self.answer_ms
            out["answer_ms"] = round(answer_ms, 3) if answer_ms is not None else None
        if self.tool_call is not None:
            out["tool_call"] = {"name": self.tool_call.name, "broken": self.tool_call.broken}
        if self.prefill_ms or self.cached_tokens:
            out["prefill_ms"] = round(self.prefill_ms, 3)
            out["cached_tokens"] = self.cached_tokens
        if detail:
            out["offsets_ms"] = [round(offset_ms, 3) for offset_ms in self.offsets_ms]
        return out

    def header_value(self, detail: bool = False, extra: dict[str, Any] | None = None) -> str:
        """Compact JSON for the ``x-fourfold-plan`` header (ASCII only, as headers must be)."""
        data = self.summary(detail)
        if extra:
            data.update(extra)
        return json.dumps(data, separators=(",", ":"), ensure_ascii=True)


def request_rng(seed: int, prompt: str, occurrence: int) -> random.Random:
    """The per-request generator; str seeds are hashed with SHA-512, so stable across processes."""
    return random.Random(f"{seed}\x1f{prompt}\x1f{occurrence}")


def knobs_of(profile: Profile) -> QualityKnobs:
    return QualityKnobs(profile.drop_sentence_rate, profile.filler_sentence_rate, profile.list_item_drop_rate)


def generation_knobs(profile: Profile) -> GenerationKnobs:
    """The profile's generation rates (its fields of the same names)."""
    return GenerationKnobs(**{f.name: getattr(profile, f.name) for f in dataclasses.fields(GenerationKnobs)})


def choose_tokens(text: str, max_tokens: int | None, ignore_eos: bool) -> tuple[list[str], str]:
    """Tokens to send and the finish reason, honouring max_tokens and ``ignore_eos``."""
    tokens = tokenize(text)
    if max_tokens is not None and ignore_eos:
        return cycle_tokens(tokens, max_tokens), "length"
    if max_tokens is not None and len(tokens) > max_tokens:
        return tokens[:max_tokens], "length"
    return tokens, "stop"


def make_plan(profile: Profile, answer: Answer, facts: RequestFacts, seed: int, reword: bool = True,
              tool_call: ToolCall | None = None) -> Plan:
    """Decide tokens and timing for one request (see module docstring); ``reword`` False keeps the
    answer's wording (a session turn, whose facts are found by their key phrases); ``tool_call``: the
    answer is that call (its arguments' tokens, no reasoning; cut at max_tokens, ``ignore_eos`` aside)."""
    rng = request_rng(seed, facts.prompt, facts.occurrence)
    text = perturb(answer.text, knobs_of(profile), rng, answer.requested_items)
    slips: list[Slip] = []
    if reword:
        text, slips = generate(text, generation_knobs(profile), rng, facts.prompt)
    reasoning = reasoning_count(profile, seed, facts) if tool_call is None else 0
    answer_max = facts.max_tokens - reasoning if facts.max_tokens is not None else None
    if tool_call is None:
        tokens, finish_reason = choose_tokens(text, answer_max, facts.ignore_eos)
    else:
        tokens, finish_reason = choose_tokens(tool_call.arguments, answer_max, False)
        finish_reason, slips = ("tool_calls" if finish_reason == "stop" else finish_reason), []
    if reasoning:
        tokens = cycle_tokens(tokenize(thinking_text(facts.prompt)), reasoning) + tokens
    structured = profile.is_structured(facts.prompt)

    prefill = prefill_ms(profile, facts.input_tokens, facts.cached_tokens)
    ttft_ms = _gauss(rng, profile.ttft_ms, profile.ttft_jitter_ms) + prefill
    orchestrator_ms = 0.0
    input_tokens = facts.input_tokens
    if structured and (profile.orchestrator_ms or profile.orchestrator_input_tokens):
        orchestrator_ms = _gauss(rng, profile.orchestrator_ms, profile.orchestrator_jitter_ms)
        input_tokens += profile.orchestrator_input_tokens
    ttft_ms += orchestrator_ms
    if facts.request_index < profile.cold_requests:
        low, high = profile.cold_extra_ttft_ms
        ttft_ms += rng.uniform(low, high)

    load_factor = max(1.0, (facts.running + 1) / profile.max_batch)
    itl_ms = profile.itl_ms * load_factor
    pauses, burst = pulse_schedule(profile, rng, len(tokens))
    pauses = tail_stall(profile, rng, facts.request_index, len(tokens), pauses)
    offsets_ms = token_offsets(profile, rng, len(tokens), ttft_ms, itl_ms, load_factor, dict(pauses), burst)
    if profile.tokens_per_event > 1:
        offsets_ms = group_offsets(offsets_ms, profile.tokens_per_event, reasoning)
    return Plan(
        seed=seed,
        profile=profile.name,
        tokens=tokens,
        offsets_ms=offsets_ms,
        ttft_ms=ttft_ms,
        itl_ms=itl_ms,
        orchestrator_ms=orchestrator_ms,
        input_tokens=input_tokens,
        finish_reason=finish_reason,
        structured=structured,
        item_id=answer.item_id,
        load_factor=load_factor,
        pauses=pauses,
        prefill_ms=prefill,
        cached_tokens=facts.cached_tokens,
        slips=slips,
        reasoning=reasoning,
        reasoning_field=profile.reasoning_field,
        tokens_per_event=profile.tokens_per_event,
        tool_call=tool_call,
    )


def group_offsets(offsets_ms: list[float], k: int, split: int) -> list[float]:
    """Tokens ``k`` to an event: every token of a group is due when the group's last one is; the
    first ``split`` tokens (the reasoning) and the rest are grouped apart."""
    out = list(offsets_ms)
    for start, end in ((0, min(split, len(out))), (min(split, len(out)), len(out))):
        for i in range(start, end, k):
            last = min(i + k, end) - 1
            out[i:last + 1] = [out[last]] * (last + 1 - i)
    return out


def reasoning_count(profile: Profile, seed: int, facts: RequestFacts) -> int:
    """How many reasoning tokens precede this answer (0 for most profiles), at most ``max_tokens``.
    Drawn from a generator of its own, so the other draws (module docstring) stay as they were."""
    if not profile.reasoning_share or not profile.reasoning_tokens:
        return 0
    rng = random.Random(f"{seed}\x1freasoning\x1f{facts.prompt}\x1f{facts.occurrence}")
    if rng.random() >= profile.reasoning_share:
        return 0
    count = min(MAX_REASONING_TOKENS,
                max(1, round(_gauss(rng, profile.reasoning_tokens, profile.reasoning_tokens_jitter))))
    return min(count, facts.max_tokens) if facts.max_tokens is not None else count


def thinking_text(prompt: str) -> str:
    """What the simulated model "thinks" before answering (its words do not matter, their count does)."""
    topic = " ".join(prompt.split()[:12]) or "the question"
    return (f"Let me think about this. The user asks: {topic}. I should recall the key facts, check them "
            "against each other and put the answer in a clear order. ")


def prefill_ms(profile: Profile, input_tokens: int, cached_tokens: int = 0) -> float:
    """The first token's wait for the prompt: ``prefill_ms_per_1k_tokens`` per 1,000 input tokens,
    cached tokens at ``1 - prefix_cache_discount`` of that (a linear model; docs/simulator.md)."""
    per_token_ms = profile.prefill_ms_per_1k_tokens / 1000
    if not per_token_ms:
        return 0.0
    cached = min(max(0, cached_tokens), max(0, input_tokens))
    return per_token_ms * (input_tokens - cached * profile.prefix_cache_discount)


def pulse_schedule(profile: Profile, rng: random.Random,
                   n_tokens: int) -> tuple[list[tuple[int, float]], set[int]]:
    """Pauses ([(token index, extra ms)]) and the indexes of tokens sent at burst speed."""
    pulse = profile.pulse
    if pulse is None or n_tokens < pulse.min_output_tokens or rng.random() >= pulse.probability:
        return [], set()
    starts = [0]
    pauses = []
    index = pulse.burst_tokens
    while 0 < index < n_tokens:
        pauses.append((index, _gauss(rng, pulse.pause_ms, pulse.pause_jitter_ms)))
        starts.append(index)
        index += max(1, pulse.every_tokens)
    burst = {i for s in starts for i in range(s + 1, min(s + pulse.burst_tokens, n_tokens))}
    return pauses, burst


def tail_stall(profile: Profile, rng: random.Random, request_index: int, n_tokens: int,
               pauses: list[tuple[int, float]]) -> list[tuple[int, float]]:
    """``pauses`` plus, on every ``pulse.stall_every_requests``-th admitted request (the N-th, 2N-th,
    ...), one stall of ``pulse.stall_ms`` before the middle token (added to a pause already there).
    A count, not a draw: a run of n requests holds exactly n // N stalls, so the tail it makes is
    the same size in every run (the article's P99 up while P95 goes down)."""
    pulse = profile.pulse
    if pulse is None or not pulse.stall_every_requests or n_tokens < 2 \
            or (request_index + 1) % pulse.stall_every_requests:
        return pauses
    stall_ms = _gauss(rng, pulse.stall_ms, pulse.stall_jitter_ms)
    middle = n_tokens // 2
    merged = dict(pauses)
    merged[middle] = merged.get(middle, 0.0) + stall_ms
    return sorted(merged.items())


def token_offsets(
    profile: Profile,
    rng: random.Random,
    n_tokens: int,
    ttft_ms: float,
    itl_ms: float,
    load_factor: float,
    pauses: dict[int, float],
    burst: set[int],
) -> list[float]:
    """Due offset (ms) of every token: the first at ttft, then one gap per token."""
    if n_tokens == 0:
        return []
    jitter_ms = profile.itl_jitter_ms * load_factor
    floor_ms = profile.itl_floor_ms
    if jitter_ms:
        gauss = rng.gauss
        gaps = [max(floor_ms, gauss(itl_ms, jitter_ms)) for _ in range(n_tokens - 1)]
    else:
        gaps = [itl_ms] * (n_tokens - 1)
    if burst:
        burst_itl_ms = profile.pulse.burst_itl_ms if profile.pulse else itl_ms
        for i in burst:
            gaps[i - 1] = burst_itl_ms
    for i, pause_ms in pauses.items():
        gaps[i - 1] += pause_ms
    return list(accumulate(gaps, initial=ttft_ms))


def _gauss(rng: random.Random, mean: float, sd: float) -> float:
    if not sd:
        return max(0.0, mean)
    return max(0.0, rng.gauss(mean, sd))

"""Simulator profiles: timing, quality and load behaviour of one simulated LLM "version".

A profile is a JSON file in ``targets/profiles/`` (``NAME.json``) loaded by name; a file may
start from another with ``"extends": "baseline"``. Every field is documented in
``targets/profiles/README.md``. Overrides (``--set pulse.pause_ms=150``) are applied to the
merged JSON before it becomes a frozen :class:`Profile`.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fourfold.errors import FaultError, ProfileError
from fourfold.targets.sim.fault_spec import FaultSpec

MAX_REASONING_TOKENS = 100_000   # one answer's reasoning (a plan holds every token: 1e300 would not fit)
MAX_TOKENS_PER_EVENT = 64
MAX_EMBED_DIMS = 8192
PROFILES_DIR = Path(__file__).resolve().parents[1] / "profiles"

DEFAULT_STRUCTURED_PATTERNS = (
    r"\bin (?:two|three|four|five|six|seven|eight|nine|ten|\d+) (?:points|steps|bullets|parts|items|ways)\b",
    r"\bstep[- ]by[- ]step\b",
    r"\bcompare\b.+\b(?:and|with|vs\.?|versus)\b",
    r"\bin a (?:table|list)\b",
    r"\b(?:list|give|name|outline|describe) (?:two|three|four|five|six|seven|eight|nine|ten|\d+)\b",
    r"请.*[分列].*[点条步]",
    r"列出\s*[\d一二三四五六七八九十两]+\s*[个条项点]",
    r"对比.+[和与].+",
    r"表格",
    r"按步骤|分步",
)


@dataclass(frozen=True)
class PulseSpec:
    """Pulsed output: fast bursts separated by pauses (the candidate's stream rhythm)."""

    burst_tokens: int = 10          # tokens after the first token / each pause sent at burst_itl_ms
    burst_itl_ms: float = 5.0
    pause_ms: float = 200.0
    pause_jitter_ms: float = 20.0   # gaussian sd of each pause
    every_tokens: int = 20          # a pause before token burst_tokens, burst_tokens + every_tokens, ...
    min_output_tokens: int = 60     # answers shorter than this never pulse
    probability: float = 0.5        # share of long answers that pulse
    stall_every_requests: int = 0   # every N-th admitted request (0: none) gets one long stall ...
    stall_ms: float = 0.0           # ... of this many ms before its middle token (the heavy tail)
    stall_jitter_ms: float = 0.0    # gaussian sd of that stall


@dataclass(frozen=True)
class Profile:
    """Everything the planner needs to know about a simulated version (see profiles/README.md)."""

    name: str = "custom"
    description: str = ""
    model: str = "fourfold-sim"
    # timing
    ttft_ms: float = 80.0
    ttft_jitter_ms: float = 6.0
    itl_ms: float = 20.0
    itl_jitter_ms: float = 1.5
    itl_floor_ms: float = 0.2
    orchestrator_ms: float = 0.0
    orchestrator_jitter_ms: float = 0.0
    orchestrator_input_tokens: int = 0
    structured_patterns: tuple[str, ...] = DEFAULT_STRUCTURED_PATTERNS
    pulse: PulseSpec | None = None
    cold_requests: int = 0
    cold_extra_ttft_ms: tuple[float, float] = (10.0, 200.0)
    # prefill: the first token also waits for the prompt to be read (docs/simulator.md)
    prefill_ms_per_1k_tokens: float = 0.0
    prefix_cache_block_tokens: int = 16     # 0: no prefix cache
    prefix_cache_discount: float = 0.9      # share of a cached token's prefill cost saved
    # reasoning (a thinking model): this share of answers is preceded by reasoning tokens, streamed as
    # reasoning (OpenAI: delta field reasoning_field; Anthropic: a thinking block); they count in
    # max_tokens and in the usage's completion_tokens_details.reasoning_tokens
    reasoning_share: float = 0.0
    reasoning_tokens: float = 0.0           # mean reasoning tokens of an answer that reasons
    reasoning_tokens_jitter: float = 0.0    # their gaussian sd
    reasoning_field: str = "reasoning_content"   # or "reasoning" (newer vLLM, Ollama)
    # tokens sent in one event (speculative decoding's accepted tokens, vLLM's --stream-interval): a
    # group's tokens are all due when its last one is (reasoning and answer grouped apart); OpenAI chat,
    # Responses and Anthropic; the usage still counts every token
    tokens_per_event: int = 1
    # a request that offers tools is answered by a call this share of the time; this share of the calls
    # breaks the tool's schema (fourfold.targets.sim.toolcalls)
    tool_call_share: float = 1.0
    tool_call_invalid_rate: float = 0.0
    # quality
    drop_sentence_rate: float = 0.0
    filler_sentence_rate: float = 0.0
    list_item_drop_rate: float = 0.0
    # generation (fourfold.targets.sim.paraphrase): reworded, reordered, factual slips
    paraphrase_rate: float = 0.0
    reorder_rate: float = 0.0
    slip_rate: float = 0.0
    chatter_rate: float = 0.0
    shorten_rate: float = 0.0
    aside_rate: float = 0.0
    # multi-turn sessions (fourfold.targets.sim.sessions): how much of a goal each answer states
    session_first_share: float = 1.0
    session_facts_per_turn: int = 1
    session_miss_rate: float = 0.0
    # load
    max_batch: int = 256
    kv_cache_capacity_tokens: int = 200_000
    gpu_util_idle_pct: float = 0.0
    gpu_util_max_pct: float = 98.0
    mem_bw_max_pct: float = 42.0
    gpu_power_idle_w: float = 90.0          # DCGM_FI_DEV_POWER_USAGE: idle, and at full GPU utilisation
    gpu_power_max_w: float = 700.0          # (an H100 SXM's TDP), linear in the GPU utilisation between
    mem_bw_full_tokens_per_s: float = 0.0   # > 0: bandwidth follows output tokens/s, max at this rate
    # gateway defaults (fourfold.targets.sim.gateway; --keepalive-timeout-s / --keepalive-max-requests win)
    keepalive_timeout_s: float = 0.0        # close idle keep-alive connections after this long (0: never)
    keepalive_max_requests: int = 0         # close a connection after this many requests (0: never)
    # the version's RAG configuration (fourfold.targets.rag --profile): first stage and re-ranker
    rag_retriever: str = "bm25"
    rag_rerank: str = "none"
    # embeddings and rerank (fourfold.targets.sim.wire_embed): the reply is due after
    # embed_ms + embed_ms_per_input x inputs + embed_ms_per_1k_tokens x input tokens / 1000
    embed_ms: float = 5.0
    embed_ms_per_input: float = 1.0
    embed_ms_per_1k_tokens: float = 20.0
    embed_dims: int = 384
    # API surface
    beta_features: tuple[str, ...] | None = None   # None: accept any anthropic-beta value
    # misbehaviour (fourfold.targets.sim.faults): rates per fault kind and their parameters
    faults: FaultSpec | None = None

    def __post_init__(self) -> None:
        try:
            compiled = tuple(re.compile(p, re.IGNORECASE) for p in self.structured_patterns)
        except re.error as exc:
            raise ProfileError(f"profile {self.name!r}: bad structured pattern: {exc}") from exc
        object.__setattr__(self, "_structured_res", compiled)
        if self.itl_ms < 0 or self.ttft_ms < 0 or self.max_batch < 1:
            raise ProfileError(f"profile {self.name!r}: ttft_ms/itl_ms must be >= 0 and max_batch >= 1")
        if not (self.prefill_ms_per_1k_tokens >= 0 and self.prefix_cache_block_tokens >= 0
                and 0 <= self.prefix_cache_discount <= 1):
            raise ProfileError(f"profile {self.name!r}: prefill_ms_per_1k_tokens and "
                               "prefix_cache_block_tokens must be >= 0 and prefix_cache_discount "
                               "within [0, 1]")
        if not 0 <= self.gpu_power_idle_w <= self.gpu_power_max_w <= 100_000:
            raise ProfileError(f"profile {self.name!r}: gpu_power_idle_w and gpu_power_max_w must satisfy "
                               "0 <= idle <= max <= 100000")
        if not (0 <= self.tool_call_share <= 1 and 0 <= self.tool_call_invalid_rate <= 1):
            raise ProfileError(f"profile {self.name!r}: tool_call_share and tool_call_invalid_rate must be "
                               "within [0, 1]")
        if not 1 <= self.tokens_per_event <= MAX_TOKENS_PER_EVENT:
            raise ProfileError(f"profile {self.name!r}: tokens_per_event must be within "
                               f"[1, {MAX_TOKENS_PER_EVENT}]")
        if not (0 <= self.reasoning_share <= 1 and 0 <= self.reasoning_tokens <= MAX_REASONING_TOKENS
                and 0 <= self.reasoning_tokens_jitter <= MAX_REASONING_TOKENS
                and self.reasoning_field in ("reasoning_content", "reasoning")):
            raise ProfileError(f"profile {self.name!r}: reasoning_share must be within [0, 1], "
                               "reasoning_tokens and reasoning_tokens_jitter within "
                               f"[0, {MAX_REASONING_TOKENS}], reasoning_field 'reasoning_content' or "
                               "'reasoning'")

        if not (self.embed_ms >= 0 and self.embed_ms_per_input >= 0 and self.embed_ms_per_1k_tokens >= 0
                and self.embed_ms + self.embed_ms_per_input + self.embed_ms_per_1k_tokens <= 60_000
                and 1 <= self.embed_dims <= MAX_EMBED_DIMS):
            raise ProfileError(f"profile {self.name!r}: embed_ms, embed_ms_per_input and "
                               "embed_ms_per_1k_tokens must be >= 0 (together at most 60000), embed_dims "
                               f"within [1, {MAX_EMBED_DIMS}]")

    def is_structured(self, prompt: str) -> bool:
        """True when the prompt asks for a structure (points, steps, table, comparison)."""
        return any(rx.search(prompt) for rx in self._structured_res)  # type: ignore[attr-defined]

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["faults"] = self.faults.to_dict() if self.faults is not None else None
        return data


PROFILE_FIELDS = tuple(f.name for f in dataclasses.fields(Profile))
PULSE_FIELDS = tuple(f.name for f in dataclasses.fields(PulseSpec))


def available_profiles() -> list[str]:
    """Names of the bundled profiles (files in targets/profiles/)."""
    return sorted(p.stem for p in PROFILES_DIR.glob("*.json"))


_COERCE = {"float": float, "int": int, "str": str}


def _coerce(owner: str, fields: dict[str, str], data: dict[str, Any]) -> dict[str, Any]:
    """Numbers and strings of the declared type (``--set itl_ms=12`` gives an int, ``abc`` an error)."""
    out = dict(data)
    for key, value in data.items():
        convert = _COERCE.get(fields.get(key, ""))
        if convert is None or value is None:
            continue
        if isinstance(value, bool) or (convert is not str and not isinstance(value, (int, float))):
            raise ProfileError(f"{owner} field {key!r} must be a {fields[key]}, got {value!r}")
        out[key] = convert(value)
    return out


_PROFILE_TYPES = {f.name: str(f.type) for f in dataclasses.fields(Profile)}
_PULSE_TYPES = {f.name: str(f.type) for f in dataclasses.fields(PulseSpec)}


def _read_json(name_or_path: str, seen: tuple[str, ...] = ()) -> dict[str, Any]:
    path = Path(name_or_path)
    if not name_or_path.endswith(".json"):
        path = PROFILES_DIR / f"{name_or_path}.json"
    if not path.is_file():
        valid = ", ".join(available_profiles())
        raise ProfileError(f"unknown profile {name_or_path!r}; valid profiles: {valid} (or a path to a "
                           f".json file)")
    if str(path) in seen:
        raise ProfileError(f"profile {name_or_path!r} extends itself (cycle: {' -> '.join(seen)})")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ProfileError(f"{path}: not valid JSON ({exc})") from exc
    parent = data.pop("extends", None)
    data.setdefault("name", path.stem)
    if parent:
        merged = _read_json(parent, seen + (str(path),))
        pulse = data.get("pulse")
        if isinstance(pulse, dict) and isinstance(merged.get("pulse"), dict):
            data["pulse"] = {**merged["pulse"], **pulse}
        faults = data.get("faults")
        if isinstance(faults, dict) and isinstance(merged.get("faults"), dict):
            data["faults"] = {**merged["faults"], **faults}
        merged.update(data)
        data = merged
    return data


def parse_override(text: str) -> tuple[str, Any]:
    """``"key=value"`` -> (key, value); the value is JSON when it parses, else a string."""
    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise ProfileError(f"--set expects key=value, got {text!r}")
    try:
        value = json.loads(raw)
    except ValueError:
        value = raw
    return key.strip(), value


def apply_overrides(data: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``data`` with overrides applied; ``pulse.X`` keys edit the pulse spec."""
    data = dict(data)
    for key, value in overrides.items():
        head, _, sub = key.partition(".")
        if head == "faults" and sub:
            data["faults"] = {**(data.get("faults") or {}), sub: value}
        elif head == "pulse" and sub:
            if sub not in PULSE_FIELDS:
                raise ProfileError(f"unknown pulse field {sub!r}; valid: {', '.join(PULSE_FIELDS)}")
            data["pulse"] = {**(data.get("pulse") or {}), sub: value}
        elif sub or head not in PROFILE_FIELDS:
            raise ProfileError(f"unknown profile field {key!r}; valid: {', '.join(PROFILE_FIELDS)}, "
                               f"pulse.<field>")
        else:
            data[head] = value
    return data


def profile_from_dict(data: dict[str, Any]) -> Profile:
    """Build a Profile, checking field names and converting lists to tuples."""
    unknown = sorted(set(data) - set(PROFILE_FIELDS))
    if unknown:
        raise ProfileError(f"unknown profile field(s) {unknown}; valid: {', '.join(PROFILE_FIELDS)}")
    kwargs = _coerce("profile", _PROFILE_TYPES, data)
    pulse = kwargs.get("pulse")
    if isinstance(pulse, dict):
        bad = sorted(set(pulse) - set(PULSE_FIELDS))
        if bad:
            raise ProfileError(f"unknown pulse field(s) {bad}; valid: {', '.join(PULSE_FIELDS)}")
        kwargs["pulse"] = PulseSpec(**_coerce("pulse", _PULSE_TYPES, pulse))
    elif pulse is not None:
        raise ProfileError(f"profile field 'pulse' must be null or an object, got {pulse!r}")
    faults = kwargs.get("faults")
    if isinstance(faults, dict):
        try:
            kwargs["faults"] = FaultSpec.from_dict(faults) if faults else None
        except FaultError as exc:
            raise ProfileError(f"profile {data.get('name')!r}: {exc}") from exc
    elif faults is not None:
        raise ProfileError(f"profile field 'faults' must be null or an object, got {faults!r}")
    for name in ("structured_patterns", "cold_extra_ttft_ms", "beta_features"):
        if isinstance(kwargs.get(name), list):
            kwargs[name] = tuple(kwargs[name])
    try:
        return Profile(**kwargs)
    except TypeError as exc:
        raise ProfileError(f"profile {data.get('name')!r}: {exc}") from exc


def load_profile(name: str, overrides: dict[str, Any] | None = None) -> Profile:
    """Load a bundled profile by name (or a JSON file by path) and apply overrides."""
    return profile_from_dict(apply_overrides(_read_json(name), overrides or {}))

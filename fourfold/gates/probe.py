"""The article's three-step verification of a new version (§3.1), as small probes.

- :func:`feature_probe`: does the target accept a version/beta header? A 2xx means yes; a 400
  whose body says the feature is unknown / unsupported means the backend does not have it.
- :func:`inflection_probe`: prompt A ("Briefly explain quantum annealing.") vs prompt B
  ("Explain quantum annealing in three points."), N requests each, interleaved, each on a fresh
  connection (no reuse) with a pause between requests; the first-token delta B − A with a 95 %
  confidence interval. The old stack paid 58 ± 12 ms for the structured prompt; the new one
  should stay within a few milliseconds (threshold 3 ms by default).
- :func:`token_probe`: the same prompt on each target; the input and output tokens its usage
  reports, and the difference to the first target (the article: 12–18 fewer input tokens for
  "Compare CNN and RNN in a table.").

Statistics are pure functions (:func:`welch_interval`); the probes send real requests through
:func:`fourfold.client.stream.send` and never raise for what a target does.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from statistics import fmean, variance

from fourfold.client.dialects import RequestOptions, get_dialect
from fourfold.client.factory import make_http_client
from fourfold.client.stream import send
from fourfold.measure.record import RequestRecord
from fourfold.workloads.items import Item

PROMPT_A = "Briefly explain quantum annealing."
PROMPT_B = "Explain quantum annealing in three points."
TOKEN_PROMPT = "Compare CNN and RNN in a table."
_UNKNOWN_FEATURE_WORDS = ("unknown", "unsupported", "not supported", "invalid", "unrecognized", "not enabled")


@dataclass(frozen=True)
class Interval:
    mean: float
    low: float
    high: float

    def contains_only_within(self, threshold: float) -> bool:
        """True when the whole interval lies inside [-threshold, +threshold]."""
        return -threshold <= self.low and self.high <= threshold


def welch_interval(a: Sequence[float], b: Sequence[float], z: float = 1.96) -> Interval:
    """Mean of b − a with a normal-approximation (Welch) 95 % interval."""
    if len(a) < 2 or len(b) < 2:
        raise ValueError("need at least two samples on each side")
    diff = fmean(b) - fmean(a)
    se = math.sqrt(variance(a) / len(a) + variance(b) / len(b))
    return Interval(round(diff, 3), round(diff - z * se, 3), round(diff + z * se, 3))


def _item(prompt: str, item_id: str) -> Item:
    return Item(id=item_id, messages=({"role": "user", "content": prompt},))


def _one(url: str, dialect_name: str, item: Item, options: RequestOptions, headers: dict[str, str],
         fresh: bool = True) -> RequestRecord:
    dialect = get_dialect(dialect_name)
    request = dialect.build(item, options)
    request.headers.update(headers)
    if fresh:
        request.headers["Connection"] = "close"
    with make_http_client(url, read_timeout_s=60.0) as client:
        return send(client, dialect, request, RequestRecord(item_id=item.id, dialect=dialect.name,
                                                            endpoint=request.path))


# ---- feature flag ----
@dataclass
class FeatureResult:
    target: str
    status: int
    verdict: str          # "enabled" | "not enabled" | "inconclusive"
    detail: str


def classify_feature(status: int, body: str) -> str:
    if 200 <= status < 300:
        return "enabled"
    if status == 400 and any(word in body.lower() for word in _UNKNOWN_FEATURE_WORDS):
        return "not enabled"
    return "inconclusive"


def feature_probe(urls: Sequence[str], header: tuple[str, str], dialect: str = "anthropic",
                  model: str = "fourfold-sim") -> list[FeatureResult]:
    results = []
    for url in urls:
        record = _one(url, dialect, _item("Say hello.", "feature-probe"),
                      RequestOptions(model=model, max_tokens=8), {header[0]: header[1]})
        body = record.error_detail.partition(": ")[2] if record.status >= 400 else ""
        verdict = classify_feature(record.status, body) if record.status else "inconclusive"
        detail = record.error_detail[:200] if record.error_class != "ok" else "accepted"
        results.append(FeatureResult(url, record.status, verdict, detail))
    return results


# ---- first-token inflection ----
@dataclass
class InflectionResult:
    target: str
    n: int
    ttft_a_ms: float
    ttft_b_ms: float
    delta: Interval
    threshold_ms: float
    failures: int
    within_threshold: bool = field(init=False)

    def __post_init__(self) -> None:
        self.within_threshold = self.delta.contains_only_within(self.threshold_ms)


def inflection_probe(urls: Sequence[str], n: int = 100, prompt_a: str = PROMPT_A, prompt_b: str = PROMPT_B,
                     pause_ms: float = 20.0, threshold_ms: float = 3.0, dialect: str = "openai",
                     model: str = "fourfold-sim", max_tokens: int = 4, warmup: int = 10,
                     progress: Callable[[str], None] | None = None) -> list[InflectionResult]:
    """Interleave A and B (A, B, A, B, ...) on fresh connections, one at a time, per target,
    after ``warmup`` requests that are not measured (cold starts vary by 10–200 ms)."""
    options = RequestOptions(model=model, max_tokens=max_tokens)
    results = []
    for url in urls:
        for i in range(warmup):
            _one(url, dialect, _item(prompt_a if i % 2 == 0 else prompt_b, "inflection-warmup"), options, {})
        ttft: dict[str, list[float]] = {"a": [], "b": []}
        failures = 0
        for i in range(2 * n):
            key = "a" if i % 2 == 0 else "b"
            record = _one(url, dialect, _item(prompt_a if key == "a" else prompt_b, f"inflection-{key}"),
                          options, {})
            if record.ok and record.ttft_ms is not None:
                ttft[key].append(record.ttft_ms)
            else:
                failures += 1
            time.sleep(pause_ms / 1000.0)
        if progress:
            progress(f"{url}: {len(ttft['a'])} + {len(ttft['b'])} requests")
        results.append(InflectionResult(url, n, round(fmean(ttft["a"]), 3), round(fmean(ttft["b"]), 3),
                                        welch_interval(ttft["a"], ttft["b"]), threshold_ms, failures))
    return results


# ---- token usage ----
@dataclass
class TokenResult:
    target: str
    prompt: str
    input_tokens: int | None
    output_tokens: int | None
    input_delta: int | None      # vs the first target (or the first prompt)
    output_delta: int | None
    error: str = ""


def token_probe(urls: Sequence[str], prompts: Sequence[str] = (TOKEN_PROMPT,), dialect: str = "openai",
                model: str = "fourfold-sim", max_tokens: int = 256) -> list[TokenResult]:
    """Usage for every (target, prompt) pair; deltas against the first pair."""
    options = RequestOptions(model=model, max_tokens=max_tokens, stream=False)
    results: list[TokenResult] = []
    for url in urls:
        for prompt in prompts:
            record = _one(url, dialect, _item(prompt, "token-probe"), options, {}, fresh=False)
            usage_out = record.output_tokens if record.output_tokens_source == "usage" else None
            first = results[0] if results else None

            def delta(value: int | None, base: int | None) -> int | None:
                return None if value is None or base is None else value - base
            results.append(TokenResult(
                url, prompt, record.input_tokens, usage_out,
                delta(record.input_tokens, first.input_tokens if first else record.input_tokens),
                delta(usage_out, first.output_tokens if first else usage_out),
                "" if record.ok else f"{record.error_class}: {record.error_detail[:120]}"))
    return results

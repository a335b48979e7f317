"""Synthetic prompts of a chosen length (``--synthetic 'input=1024±128,output=256±32,n=500'``).

Prompt text comes from a bundled text written for fourfold (``fourfold/data/synthetic/text.md``):
each prompt starts at a random word of a random sentence and goes on with sentences drawn at
random (from a per-prompt seed), so two prompts share no long run of words unless asked to
(``prefix=N``, or equal Mooncake ``hash_ids`` through :func:`block_text`).

Lengths are **exact** with the target's tokenizer (:mod:`fourfold.workloads.tokenizer`): a prompt of
``n`` tokens counts ``n`` with that tokenizer, special tokens and the server's chat template not
included. Without one they follow :func:`estimate_tokens`, the **estimate**: one token per word
(letters and digits, with an inner apostrophe) and one per other non-space character
(punctuation, a CJK character). That is the simulator's own count, and within a few per cent of
BPE tokenizers on this text's plain words (``docs/datasets.md`` gives the measured ratio).

Lengths per item are drawn from a normal distribution with the given mean and standard deviation
(AIPerf's ``--isl-stddev``), rounded and clipped at 1 token (input: at ``prefix + 1``), from
``random.Random(seed)`` in item order, input then output. Pure functions; the only I/O is reading
the bundled text once.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Protocol

from fourfold.data import bundled
from fourfold.errors import OptionError
from fourfold.workloads.items import Item

__all__ = ["SyntheticSpec", "block_text", "estimate_tokens", "make_items", "make_text",
           "parse_synthetic", "sample_lengths", "trace_text"]

# the simulator's token rule (fourfold/targets/sim/tokens.py) without the whitespace it carries
_ESTIMATE_RE = re.compile(r"[A-Za-z0-9]+(?:['’][A-Za-z]+)*|[^\sA-Za-z0-9]")
_WORD_RE = re.compile(r"[A-Za-z0-9]+(?:['’][A-Za-z]+)*")
_SENTENCE_END = (".", ";", "?", "!")
_FILL_TRIES = 64
_GROW_TRIES = 64          # rounds of growing a text toward a tokenizer's count before giving up
MAX_TOKENS = 10**7        # one prompt's or answer's length, and a spread's SD
MAX_TOTAL_TOKENS = 2 * 10**7  # all the prompts of a spec: bounds the text written at start-up


class Counter(Protocol):
    """What the exact path needs of a tokenizer (:class:`fourfold.workloads.tokenizer.Tokenizer`)."""

    def count(self, text: str) -> int: ...

    def offsets(self, text: str) -> list[tuple[int, int]]: ...


def estimate_tokens(text: str) -> int:
    """The documented estimate: one token per word and one per other non-space character."""
    return sum(1 for _ in _ESTIMATE_RE.finditer(text))


@lru_cache(maxsize=1)
def _sentences() -> tuple[tuple[str, ...], ...]:
    words = bundled("synthetic", "text.md").read_text(encoding="utf-8").split()
    sentences: list[tuple[str, ...]] = []
    current: list[str] = []
    for word in words:
        current.append(word)
        if word.endswith(_SENTENCE_END):
            sentences.append(tuple(current))
            current = []
    if current:
        sentences.append(tuple(current))
    return tuple(sentences)


def _words(rng: random.Random) -> Iterator[str]:
    """An endless word stream: a random word of a random sentence, then random whole sentences."""
    sentences = _sentences()
    first = rng.choice(sentences)
    yield from first[rng.randrange(len(first)):]
    while True:
        yield from rng.choice(sentences)


def _bare(word: str) -> str:
    """The word without punctuation (one estimated token), or "" when it has no letters."""
    match = _WORD_RE.search(word)
    return match.group(0) if match else ""


def _estimated(words: Iterator[str], n_tokens: int) -> list[str]:
    """Words whose estimate sums to exactly ``n_tokens`` (a word that would overshoot loses its
    punctuation)."""
    out: list[str] = []
    total = 0
    while total < n_tokens:
        word = next(words)
        cost = estimate_tokens(word)
        if total + cost > n_tokens:
            word = _bare(word)
            cost = 1 if word else 0
        if cost:
            out.append(word)
            total += cost
    return out


def _join(head: str, tail: str) -> str:
    return f"{head} {tail}" if head and tail else head or tail


def _exact(head: str, words: Iterator[str], n_tokens: int, tokenizer: Counter) -> str:
    """``head`` followed by words, cut and filled so that ``tokenizer`` counts ``n_tokens`` in all."""
    text = head
    count = tokenizer.count(text)
    for _ in range(_GROW_TRIES):                            # grow past the target, then cut back
        if count >= n_tokens:
            break
        text = _join(text, " ".join(_estimated(words, max(1, n_tokens - count))))
        count = tokenizer.count(text)
    else:
        if count < n_tokens:
            raise OptionError(f"--tokenizer: it counts {count} tokens in a text of {len(text):,} characters "
                                 f"written for {n_tokens}: it does not count text as a tokenizer does")
    if count > n_tokens:
        spans = tokenizer.offsets(text)
        cut = spans[n_tokens - 1][1]
        if cut < len(text) and not text[cut].isspace():     # mid-word: back off to the word's start
            cut = text.rfind(" ", 0, cut) if " " in text[:cut] else 0
        text = text[:max(cut, len(head))].rstrip()
        count = tokenizer.count(text)
        while count > n_tokens and len(text) > len(head):   # rare: a merge across the cut
            text = text[:max(text.rfind(" "), len(head))].rstrip()
            count = tokenizer.count(text)
    for _ in range(_FILL_TRIES):                            # fill with bare words, one token at a time
        if count >= n_tokens:
            break
        word = _bare(next(words))
        candidate = _join(text, word)
        candidate_count = tokenizer.count(candidate)
        if candidate_count <= n_tokens:
            text, count = candidate, candidate_count
    return text


def make_text(n_tokens: int, seed: int | str, tokenizer: Counter | None = None) -> str:
    """A prompt of ``n_tokens`` tokens: exact with ``tokenizer``, else by :func:`estimate_tokens`."""
    if n_tokens <= 0:
        return ""
    words = _words(random.Random(f"fourfold-synthetic\x1f{seed}"))
    if tokenizer is None:
        return " ".join(_estimated(words, n_tokens))
    return _exact("", words, n_tokens, tokenizer)


def block_text(hash_id: int, n_tokens: int, tokenizer: Counter | None = None) -> str:
    """The text of one prefix block (Mooncake's ``hash_ids``): equal ids give equal text, and a
    shorter block of an id starts like the longer one (the estimate path is an exact prefix)."""
    return make_text(n_tokens, f"block\x1f{hash_id}", tokenizer)


def trace_text(hash_ids: list[int], input_length: int, seed: int | str = 0, block_tokens: int = 512,
               tokenizer: Counter | None = None) -> str:
    """A trace request's prompt: one block per hash id (the last one cut to fit), then unique text
    (from ``seed``) if the blocks are too few. With a tokenizer it is exactly ``input_length``
    tokens: only the last part is cut or filled, so the shared blocks before it stay equal."""
    ids = list(hash_ids)[:max(0, -(-input_length // block_tokens))]
    covered = len(ids) * block_tokens >= input_length
    whole = ids[:-1] if covered else ids
    head = " ".join(block_text(hash_id, block_tokens, tokenizer) for hash_id in whole)
    seed_text = f"block\x1f{ids[-1]}" if covered and ids else f"trace\x1f{seed}"
    if tokenizer is None:
        return _join(head, make_text(input_length - len(whole) * block_tokens, seed_text))
    words = _words(random.Random(f"fourfold-synthetic\x1f{seed_text}"))
    return _exact(head, words, input_length, tokenizer)


# ---- the --synthetic spec ----

SPEC_KEYS = ("input", "output", "n", "seed", "prefix")
_MEAN_SD_RE = re.compile(r"^\s*(\d+)\s*(?:(?:±|\+-|\+/-)\s*(\d+(?:\.\d+)?))?\s*$")


@dataclass(frozen=True)
class SyntheticSpec:
    """``--synthetic``: input/output length mean and standard deviation, items, seed, shared prefix."""

    input_mean: int
    input_sd: float = 0.0
    output_mean: int | None = None
    output_sd: float = 0.0
    n: int = 100
    seed: int = 0
    prefix: int = 0

    def describe(self) -> str:
        out = "" if self.output_mean is None else f",output={self.output_mean}±{self.output_sd:g}"
        prefix = f",prefix={self.prefix}" if self.prefix else ""
        return f"input={self.input_mean}±{self.input_sd:g}{out},n={self.n},seed={self.seed}{prefix}"


def parse_synthetic(text: str, option: str = "--synthetic") -> SyntheticSpec:
    """``'input=1024±128,output=256±32,n=500,seed=1,prefix=512'`` -> spec; OptionError naming the part."""
    fields: dict[str, str] = {}
    for part in str(text).split(","):
        key, sep, value = part.partition("=")
        key = key.strip().lower()
        if not part.strip():
            continue
        if not sep or key not in SPEC_KEYS:
            raise OptionError(f"{option} {text!r}: {part.strip()!r} is not KEY=VALUE with KEY one of "
                              f"{', '.join(SPEC_KEYS)} (e.g. 'input=1024±128,output=256,n=500')")
        if key in fields:
            raise OptionError(f"{option} {text!r}: {key!r} is given twice")
        fields[key] = value
    if "input" not in fields:
        raise OptionError(f"{option} {text!r}: needs input=TOKENS (e.g. 'input=1024±128,output=256')")
    input_mean, input_sd = _mean_sd(option, text, "input", fields["input"])
    output_mean, output_sd = (None, 0.0) if "output" not in fields else _mean_sd(option, text, "output",
                                                                                fields["output"])
    n = _integer(option, text, "n", fields.get("n", "100"), 1, 1_000_000)
    seed = _integer(option, text, "seed", fields.get("seed", "0"), 0, 2**63)
    prefix = _integer(option, text, "prefix", fields.get("prefix", "0"), 0, 10**7)
    if n * (input_mean + input_sd) > MAX_TOTAL_TOKENS:
        raise OptionError(f"{option} {text!r}: n x (input mean + SD) is {n * (input_mean + input_sd):,.0f} "
                          f"tokens, more than {MAX_TOTAL_TOKENS:,} (about {MAX_TOTAL_TOKENS // 600_000} s "
                          f"to write at start-up); lower n or the input length")
    if prefix and prefix >= input_mean:
        raise OptionError(f"{option} {text!r}: prefix={prefix} must be less than the input length "
                          f"({input_mean}); the prefix is part of every prompt's input")
    return SyntheticSpec(input_mean, input_sd, output_mean, output_sd, n, seed, prefix)


def _mean_sd(option: str, text: str, key: str, value: str) -> tuple[int, float]:
    match = _MEAN_SD_RE.match(value)
    if not match or int(match.group(1)) < 1:
        raise OptionError(f"{option} {text!r}: {key}={value.strip()!r} must be TOKENS or TOKENS±SD "
                          f"(a positive integer mean, '±' or '+-', a standard deviation >= 0)")
    mean, sd = int(match.group(1)), float(match.group(2) or 0.0)
    if mean > MAX_TOKENS or sd > MAX_TOKENS:
        raise OptionError(f"{option} {text!r}: {key}={value.strip()!r}: the mean and the SD must each be at "
                          f"most {MAX_TOKENS:,} tokens")
    return mean, sd


def _integer(option: str, text: str, key: str, value: str, low: int, high: int) -> int:
    try:
        number = int(value.strip())
    except ValueError:
        number = low - 1
    if not low <= number <= high:
        raise OptionError(f"{option} {text!r}: {key}={value.strip()!r} must be an integer from {low} to "
                          f"{high:,}")
    return number


def sample_lengths(spec: SyntheticSpec) -> list[tuple[int, int | None]]:
    """(input tokens, output tokens or None) per item: normal draws, rounded, clipped (module docstring)."""
    rng = random.Random(spec.seed)
    lengths: list[tuple[int, int | None]] = []
    for _ in range(spec.n):
        input_tokens = max(spec.prefix + 1, _draw(rng, spec.input_mean, spec.input_sd))
        output_tokens = (None if spec.output_mean is None
                         else max(1, _draw(rng, spec.output_mean, spec.output_sd)))
        lengths.append((input_tokens, output_tokens))
    return lengths


def _draw(rng: random.Random, mean: int, sd: float) -> int:
    return min(MAX_TOKENS, round(rng.gauss(mean, sd))) if sd else mean


def make_items(spec: SyntheticSpec, tokenizer: Any | None = None) -> list[Item]:
    """The spec's items, ``syn-0`` ... ``syn-{n-1}``: one user message each, ``max_tokens`` = the
    output length, and ``meta["synthetic"]`` with the asked lengths and how input was counted."""
    prefix_text = make_text(spec.prefix, f"prefix\x1f{spec.seed}", tokenizer) if spec.prefix else ""
    counted = "tokenizer" if tokenizer is not None else "estimate"
    items = []
    for index, (input_tokens, output_tokens) in enumerate(sample_lengths(spec)):
        words = _words(random.Random(f"fourfold-synthetic\x1f{spec.seed}\x1f{index}"))
        if tokenizer is not None:
            text = _exact(prefix_text, words, input_tokens, tokenizer)
        else:
            text = _join(prefix_text, " ".join(_estimated(words, input_tokens - spec.prefix)))
        meta: dict[str, Any] = {"input_tokens": input_tokens, "output_tokens": output_tokens,
                                "input_count": counted, "prefix_tokens": spec.prefix}
        if tokenizer is not None:
            meta["tokenizer"] = getattr(tokenizer, "name", "")
        items.append(Item(id=f"syn-{index}", messages=({"role": "user", "content": text},),
                          max_tokens=output_tokens, meta={"synthetic": meta}))
    return items

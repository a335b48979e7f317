"""Generate the bundled trace sample ``trace_sample.jsonl`` (fixed seed, same bytes every time).

    python fourfold/data/datasets/generate_trace.py     # rewrites trace_sample.jsonl next to it

A Mooncake-layout trace (what AIPerf replays): one line per request with ``timestamp`` (ms),
``input_length``, ``output_length`` and ``hash_ids`` (one id per 512-token block of the input).
200 requests over about 5 s of Poisson arrivals (40/s) with two short bursts. The prefix reuse is
the kind a chat service sees: four "system prompts" (1-3 shared blocks each) that most requests
start with, and follow-up turns that repeat their conversation's earlier blocks and add new ones;
a tenth of the requests share nothing. Everything is numbers drawn here; no text, nothing copied.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

SEED = 20261201
HERE = Path(__file__).resolve().parent
BLOCK = 512
ENTRIES = 200
RATE_PER_S = 40.0
BURSTS_MS = (1500.0, 3600.0)         # 10 requests within 20 ms at each


def generate(seed: int = SEED) -> list[dict[str, object]]:
    rng = random.Random(seed)
    next_id = 0

    def new_blocks(n: int) -> list[int]:
        nonlocal next_id
        ids = list(range(next_id, next_id + n))
        next_id += n
        return ids

    systems = [new_blocks(n) for n in (1, 2, 2, 3)]
    conversations: list[list[int]] = []
    lines: list[dict[str, object]] = []
    t_ms = 0.0
    bursts = list(BURSTS_MS)
    while len(lines) < ENTRIES:
        if bursts and t_ms >= bursts[0]:
            burst_at = bursts.pop(0)
            times = [burst_at + rng.uniform(0, 20) for _ in range(10)]
        else:
            times = [t_ms]
        for at in sorted(times):
            roll = rng.random()
            if roll < 0.1:                                   # nothing shared
                blocks = new_blocks(rng.randint(1, 3))
            elif roll < 0.45 and conversations:              # a follow-up turn: its history, then more
                history = rng.choice(conversations)
                blocks = history + new_blocks(rng.randint(1, 2))
                conversations[conversations.index(history)] = blocks
            else:                                            # a new conversation on a system prompt
                blocks = rng.choice(systems) + new_blocks(rng.randint(0, 2))
                conversations.append(blocks)
            if len(blocks) > 6:                              # keep prompts <= 3k tokens
                blocks = blocks[:6]
            last = rng.randint(BLOCK // 8, BLOCK)            # the last block is partial
            lines.append({"timestamp": round(at), "input_length": (len(blocks) - 1) * BLOCK + last,
                          "output_length": rng.randint(8, 48), "hash_ids": blocks})
            if len(lines) == ENTRIES:
                break
        t_ms += rng.expovariate(RATE_PER_S / 1000.0)
    lines.sort(key=lambda line: line["timestamp"])           # type: ignore[arg-type,return-value]
    return lines


def main() -> None:
    text = "".join(json.dumps(line) + "\n" for line in generate())
    (HERE / "trace_sample.jsonl").write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()

"""The simulator's prefix cache (pure): which leading tokens of a prompt were seen recently.

A real engine keeps the KV cache of recent prompts in fixed-size blocks and reuses the longest
run of leading blocks a new prompt shares with one it has seen (vLLM's automatic prefix caching,
SGLang's radix cache). This does the bookkeeping without the tensors: a prompt's tokens (the
simulator's tokenizer, :mod:`fourfold.targets.sim.tokens`) are cut into blocks of
``block_tokens``; block *i*'s key chains the key of block *i-1* with its own tokens, so a key
stands for the whole prefix up to it. A lookup counts the leading keys already present; storing a
prompt adds its full blocks. The least recently used blocks go when more than ``capacity_tokens``
are held. Only full blocks are cached, as in vLLM.

The hit count depends on what arrived before, so, like the load factor, it makes a plan depend on
request order (sequential requests stay deterministic).
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict

from fourfold.targets.sim.tokens import tokenize


class PrefixCache:
    """Leading-block keys of recent prompts, least recently used evicted first."""

    def __init__(self, block_tokens: int, capacity_tokens: int) -> None:
        self.block_tokens = max(0, int(block_tokens))
        self.capacity_blocks = capacity_tokens // self.block_tokens if self.block_tokens else 0
        self._blocks: OrderedDict[bytes, None] = OrderedDict()
        self.hits_tokens = 0          # cached tokens found, over every lookup
        self.lookup_tokens = 0        # tokens looked up

    def __len__(self) -> int:
        return len(self._blocks)

    def keys(self, text: str) -> list[bytes]:
        """The chained key of every full block of ``text``'s tokens."""
        size = self.block_tokens
        if not size:
            return []
        tokens = tokenize(text)
        keys: list[bytes] = []
        previous = b""
        for start in range(0, len(tokens) - size + 1, size):
            previous = hashlib.blake2b("".join(tokens[start:start + size]).encode("utf-8", "surrogatepass"),
                                       key=previous[:64], digest_size=16).digest()
            keys.append(previous)
        return keys

    def admit(self, text: str) -> int:
        """Tokens at the start of ``text`` already cached (whole blocks); then cache its blocks."""
        keys = self.keys(text)
        blocks = self._blocks
        hits = 0
        for key in keys:
            if key not in blocks:
                break
            hits += 1
        for key in keys:
            blocks[key] = None
            blocks.move_to_end(key)
        while len(blocks) > self.capacity_blocks:
            blocks.popitem(last=False)
        cached = hits * self.block_tokens
        self.hits_tokens += cached
        self.lookup_tokens += len(keys) * self.block_tokens
        return cached

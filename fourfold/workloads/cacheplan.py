"""The prefix-cache hit rate a workload was built for (pure): the share of its prompt tokens an unbounded
prefix cache would serve when its items are sent once, in order. meta.json keeps it
(``dataset_cache_hit_share``) and the report shows it beside the share the server reported
(``cache_hit_share``, docs/metrics.md).

- ``--synthetic ...,prefix=P``: every prompt opens with the same ``P`` tokens, so every prompt after
  the first finds them: ``(n - 1) P / sum(input)``;
- a trace with ``hash_ids`` (Mooncake): an entry's leading blocks whose ids an earlier entry carried
  are found (512 tokens each, the last at most what is left of its input):
  ``sum(found) / sum(input_length)``;
- any other dataset plans no share (None).

A server's cache is bounded and has its own block size (vLLM 16 tokens, SGLang one), so the measured
share falls short of the plan when it evicts or when a shared run is cut mid-block, and passes it when
items are sent again (a run longer than its dataset cycles it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fourfold.workloads.items import Item
from fourfold.workloads.trace import BLOCK_TOKENS

__all__ = ["planned_cache_hit_share"]


def _whole(value: Any) -> int | None:
    return value if type(value) is int and value >= 0 else None


def planned_cache_hit_share(items: Sequence[Item]) -> float | None:
    """See the module docstring; None when the items are not all synthetic or all trace entries with
    block ids, or have no input tokens."""
    if not items:
        return None
    synthetic: list[dict[str, Any]] = [s for s in (item.meta.get("synthetic") for item in items)
                                       if isinstance(s, dict)]
    if len(synthetic) == len(items):
        inputs = [_whole(s.get("input_tokens")) or 0 for s in synthetic]
        prefixes = [_whole(s.get("prefix_tokens")) or 0 for s in synthetic]
        if not sum(inputs):
            return None
        return sum(min(p, n) for p, n in zip(prefixes[1:], inputs[1:])) / sum(inputs)
    seen: set[int] = set()
    found = total = 0
    for item in items:
        ids, length = item.meta.get("hash_ids"), _whole(item.meta.get("input_length"))
        if not isinstance(ids, list) or length is None:
            return None
        run = 0
        while run < len(ids) and ids[run] in seen:
            run += 1
        found += min(run * BLOCK_TOKENS, length)
        total += length
        seen.update(i for i in ids if isinstance(i, int))
    return found / total if total and seen else None

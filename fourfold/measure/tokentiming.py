"""Honest token timing (pure): how many tokens each content chunk carried, the per-token ITL, and the
client's count of the output tokens against the server's. One definition each, for the record, LLMStats
and the report (the column forms end in ``_array``).

- **Streamed tokens** ``T``: the record's output tokens less the reasoning the server counted and never
  streamed (reasoning tokens and no reasoning chunk: OpenAI's o-series, whose usage counts reasoning it
  keeps to itself).
- **Tokens of a chunk**: ``T' = max(T, n)`` spread evenly over the ``n`` content chunks
  (:func:`fourfold.measure.rhythm.chunk_tokens`, the spread tokens per second use too): chunk ``j`` carries
  ``(j+1)*T'//n - j*T'//n``. A stream of one token a chunk has ``T = n``: each carries one.
- **Multi-token chunks**: the chunks that carried more than one: ``n`` when ``T' >= 2n``, else ``T' - n``.
- **Per-token ITL**: each gap's chunk's tokens share it (:func:`fourfold.measure.rhythm.token_gaps`).
- **Token count discrepancy**: a streamed record whose output count is the server's usage is also counted
  by the client: ``--tokenizer`` on the streamed text (answer, reasoning, tool calls), else one token per
  delta. ``(server - client) / client`` beyond ``DISCREPANCY_SHARE`` either way is a discrepancy (the
  server's count less its unstreamed reasoning, as above).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from fourfold.measure.histogram import LogHistogram
from fourfold.measure.metrics import ratio
from fourfold.measure.record import RequestRecord
from fourfold.measure.rhythm import token_gaps

__all__ = ["DISCREPANCY_SHARE", "add_token_timing", "is_discrepant", "is_discrepant_array",
           "multi_token_chunks", "streamed_tokens", "streamed_tokens_array", "token_counts_array",
           "token_rates"]

DISCREPANCY_SHARE = 0.10     # a client count this far from the server's, either way, is a discrepancy


def streamed_tokens(output_tokens: int, reasoning_tokens: int, reasoning_chunks: int) -> int:
    """The output tokens the stream carried (see module docstring)."""
    hidden = reasoning_tokens if reasoning_tokens > 0 and not reasoning_chunks else 0
    return max(output_tokens - hidden, 0)


def streamed_tokens_array(output_tokens: np.ndarray, reasoning_tokens: np.ndarray,
                          reasoning_chunks: np.ndarray) -> np.ndarray:
    """:func:`streamed_tokens` over columns (NaN counts as 0)."""
    out = np.nan_to_num(np.asarray(output_tokens, dtype=np.float64))
    reasoning = np.nan_to_num(np.asarray(reasoning_tokens, dtype=np.float64))
    chunks = np.nan_to_num(np.asarray(reasoning_chunks, dtype=np.float64))
    return np.maximum(out - np.where((reasoning > 0) & (chunks == 0), reasoning, 0.0), 0.0)


def multi_token_chunks(tokens: int, chunks: int) -> int:
    """Of ``chunks`` content chunks carrying ``tokens`` streamed tokens, those that carried more than one."""
    if chunks <= 0:
        return 0
    spread = max(tokens, chunks)
    return chunks if spread >= 2 * chunks else spread - chunks


def is_discrepant(server: int, client: int | None) -> bool | None:
    """Whether the client's count is more than DISCREPANCY_SHARE away from the server's (None: no
    client count to compare, or none above zero)."""
    if client is None or client <= 0:
        return None
    return abs(server - client) > DISCREPANCY_SHARE * client


def is_discrepant_array(server: np.ndarray, client: np.ndarray) -> np.ndarray:
    """:func:`is_discrepant` over columns: 1.0, 0.0, or NaN where there is nothing to compare."""
    server = np.asarray(server, dtype=np.float64)
    client = np.asarray(client, dtype=np.float64)
    compared = np.isfinite(client) & (client > 0)
    with np.errstate(invalid="ignore"):
        return np.where(compared, (np.abs(server - client) > DISCREPANCY_SHARE * client).astype(np.float64),
                        np.nan)


def token_rates(counts: dict[str, int]) -> dict[str, float | None]:
    """summary.json's token-timing rates from LLMStats' counters."""
    return {"multi_token_chunk_share": ratio(counts["multi_token_chunks"], counts["content_chunks"]),
            "token_discrepancy_share": ratio(counts["tokens_discrepant"], counts["tokens_compared"]),
            "token_count_ratio": ratio(counts["tokens_server_total"], counts["tokens_client_total"])}


def token_counts_array(ok: np.ndarray, chunks: np.ndarray, multi: np.ndarray, output_tokens: np.ndarray,
                       reasoning_tokens: np.ndarray, reasoning_chunks: np.ndarray,
                       client_tokens: np.ndarray) -> dict[str, np.ndarray]:
    """Per request, what :func:`add_token_timing` counts (ok requests; 0 for the others), by name."""
    streamed = streamed_tokens_array(output_tokens, reasoning_tokens, reasoning_chunks)
    client = np.asarray(client_tokens, dtype=np.float64)
    compared = ok & np.isfinite(is_discrepant_array(streamed, client))
    return {"content_chunks": np.where(ok, np.asarray(chunks, dtype=np.float64), 0.0),
            "multi_token_chunks": np.where(ok, np.nan_to_num(np.asarray(multi, dtype=np.float64)), 0.0),
            "tokens_compared": compared,
            "tokens_discrepant": compared & (is_discrepant_array(streamed, client) == 1),
            "tokens_server_total": np.where(compared, streamed, 0.0),
            "tokens_client_total": np.where(compared, np.nan_to_num(client), 0.0)}


def add_token_timing(counts: dict[str, int], hist: LogHistogram, record: RequestRecord,
                     gaps: Sequence[float] | np.ndarray) -> None:
    """One ok record's share of LLMStats: its per-token ITL into ``hist`` (its chunk ``gaps`` when every
    chunk carried one token), its chunks and multi-token chunks, and its two token counts."""
    counts["content_chunks"] += len(record.chunk_offsets_ms)
    counts["multi_token_chunks"] += record.multi_token_chunks
    tokens = streamed_tokens(record.output_tokens, record.reasoning_tokens, record.reasoning_chunks)
    if record.multi_token_chunks:
        values, weights = token_gaps(record.chunk_offsets_ms, tokens)
        for value, weight in zip(values.tolist(), weights.tolist()):
            hist.add(value, weight)
    elif len(gaps):
        hist.add_all(gaps)
    client = record.client_output_tokens
    discrepant = is_discrepant(tokens, client)
    if discrepant is not None and client is not None:
        counts["tokens_compared"] += 1
        counts["tokens_discrepant"] += discrepant
        counts["tokens_server_total"] += tokens
        counts["tokens_client_total"] += client

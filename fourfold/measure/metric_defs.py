"""The metric definitions (data, pure): each number fourfold reports, once, with its unit, its
definition, the names vLLM's ``bench serve`` and AIPerf give it, and where it is shown.
:mod:`fourfold.measure.metric_names` reads them (lookups, the docs table) and re-exports them; its
docstring says what the fields mean."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

__all__ = ["METRICS", "QUALITY_STATS", "RAG_STATS", "SESSION_STATS", "SUMMARY_STATS", "TELEMETRY_CANONICAL",
           "TELEMETRY_REPORTED", "WHERE", "Kind", "MetricDef"]

Kind = Literal["distribution", "count", "ratio", "rate", "time", "mean", "stages"]
SUMMARY_STATS = ("count", "mean", "min", "max", "p50", "p90", "p95", "p99")
RAG_STATS = ("count", "mean", "p50", "p95", "p99", "max")          # the rag block's distributions
SESSION_STATS = ("count", "mean", "p50", "p95", "max")
QUALITY_STATS = ("mean", "p5", "p50")
# where a metric is shown: summary.json's blocks, then the comparison report
WHERE = ("summary", "sessions", "rag", "embed", "cost", "mix", "quality", "quality.rag", "report")


@dataclass(frozen=True)
class MetricDef:
    name: str
    unit: str                   # ms, s, tokens, tok/s, req/s, requests, answers, cos, F1, rounds, fraction
    kind: Kind                  # stages: a distribution per stage
    definition: str
    vllm: str = "–"
    aiperf: str = "–"
    where: tuple[str, ...] = ("summary",)
    report: tuple[str, ...] = ()
    stats: tuple[str, ...] = ()     # a distribution's statistics in its first block of summary.json
    key: str = ""                   # its key in a summary.json block, where not its name (module docstring)
    decimals: int | None = None     # summary.json rounds it to this many decimals (None: not rounded)

    @property
    def short(self) -> str:
        return self.name.removesuffix("_ms")

    @property
    def summary_key(self) -> str:
        return self.key or self.name


def _d(name: str, unit: str, definition: str, vllm: str = "–", aiperf: str = "–", *,
       where: tuple[str, ...] = ("summary",), report: tuple[str, ...] = (),
       stats: tuple[str, ...] = SUMMARY_STATS, key: str = "", decimals: int | None = None) -> MetricDef:
    return MetricDef(name, unit, "distribution", definition, vllm, aiperf, where, report, stats, key,
                     decimals)


def _n(name: str, kind: Kind, unit: str, definition: str, vllm: str = "–", aiperf: str = "–", *,
       where: tuple[str, ...] = ("summary",), report: bool = False, key: str = "",
       decimals: int | None = None) -> MetricDef:
    return MetricDef(name, unit, kind, definition, vllm, aiperf, (*where, "report") if report else where,
                     (name,) if report else (), key=key, decimals=decimals)


_REPORTED = ("summary", "report")
_L3 = ("summary", "rag", "report")       # a group's metric the rag block also shows (its L3 requests)

METRICS: tuple[MetricDef, ...] = (
    # per request, ok requests only (queue_ms: every request); summary.json: count, mean, min, max, p50..p99
    _d("ttft_ms", "ms", "request sent → first received chunk carrying output text or reasoning (a role-only "
       "chunk does not count)", "TTFT", "TTFT", where=_L3, report=("ttft_p50", "ttft_p95", "ttft_p99")),
    _d("ttfo_ms", "ms", "request sent → first received chunk carrying answer text, reasoning left out: a "
       "reasoning model's time to its answer (= ttft for a model that does not "
       "reason); none for a request that never answered. The report shows its rows only where an answer "
       "of either side reasoned", "–", "TTFO", where=_REPORTED, report=("ttfo_p50", "ttfo_p95", "ttfo_p99")),
    _d("ttfb_ms", "ms", "request sent → response headers", "–", "HTTP waiting"),
    _d("itl_ms", "ms", "gap between consecutive content chunks (network reads that carried ≥ 1 text delta), "
       "pooled over the requests", "ITL", "inter-chunk latency", where=_REPORTED,
       report=("itl_p50", "itl_p95", "itl_p99")),
    _d("itl_token_ms", "ms", "per-token ITL: each gap between consecutive content chunks of ok requests "
       "divided by the k tokens the later chunk carried, counted k times (a chunk's tokens: the streamed "
       "tokens spread evenly over the chunks, measure.tokentiming); = itl_ms where every chunk carries one "
       "token. SGLang's bench_serving rule; vLLM's ITL is per chunk. The report shows its rows only where a "
       "chunk of either side carried several tokens", where=_REPORTED,
       report=("itl_token_p50", "itl_token_p95", "itl_token_p99")),
    _d("tpot_ms", "ms", "(e2e − ttft) / (output_tokens − 1) per request (none below 2 tokens)", "TPOT", "ITL",
       where=_REPORTED, report=("tpot_p50",)),
    _d("e2e_ms", "ms", "request sent → last received chunk (the one carrying the terminal event)", "E2EL",
       "request latency", where=_L3, report=("e2e_p50", "e2e_p95", "e2e_p99")),
    _d("queue_ms", "ms", "open loop: intended arrival → send (client queueing), every request",
       "client queue time"),
    # request phases (measure.metrics.PHASES, record.extra): summary.json's l2 block by connection kind
    # (phases_ms.new / .reused), the report's rows for L2 groups (reports.phaserows)
    _d("dns_ms", "ms", "a new connection's name lookup (k6: http_req_looking_up; over HTTP/2 inside tcp_ms)",
       where=("report",), report=("dns_p95",)),
    _d("tcp_ms", "ms", "a new connection's TCP connect (k6: http_req_connecting)", where=("report",),
       report=("tcp_p95",)),
    _d("tls_ms", "ms", "a new connection's TLS handshake (k6: http_req_tls_handshaking)", where=("report",),
       report=("tls_p95",)),
    _d("send_ms", "ms", "connection ready (new, or taken from the pool) → the request sent: its one write "
       "began (under 64 KiB the kernel takes it at once; a late return is the client waiting for a core), "
       "a larger body's write returned (k6: http_req_sending)", where=("report",), report=("send_p95",)),
    _d("wait_ms", "ms", "request written → response head received (k6: http_req_waiting; fourfold's TTFT "
       "follows from the head: ttft_ms − ttfb_ms)", where=("report",), report=("wait_p50", "wait_p95")),
    _d("output_tokens", "tokens", "the server's usage when it reports one, else the number of content deltas "
       "(counted as estimated)", "output len", "OSL"),
    _d("reasoning_ms", "ms", "ttfo − ttft of a request that reasoned before it answered (its first chunks "
       "carried reasoning only): the time it spent reasoning", where=_REPORTED, report=("reasoning_p50",)),
    _d("reasoning_tokens", "tokens", "of output_tokens, the reasoning ones, per request that reasoned: the "
       "usage's completion_tokens_details.reasoning_tokens, else counted (--tokenizer on the reasoning text, "
       "else its deltas; the record's reasoning_tokens_source says which)", "–", "reasoning token count"),
    _d("reasoning_tps", "tok/s", "the reasoning's speed: reasoning_tokens / (ttfo − ttft) per request that "
       "reasoned before it answered (the tokens after the first reasoning token, through the first answer "
       "token, over that span)", where=_REPORTED, report=("reasoning_tps_p50",)),
    _d("answer_tps", "tok/s", "the answer's decode speed: (output_tokens − reasoning_tokens − 1) / (e2e − "
       "ttfo) per request (none below 2 answer tokens)", where=_REPORTED, report=("answer_tps_p50",)),
    _d("request_tps", "tok/s", "1000 / tpot_ms: one request's decode speed", "–",
       "output token throughput per user"),
    MetricDef("server_timing_ms", "ms", "stages", "per stage the server named, the time it says it spent (a "
              "`Server-Timing` header's `dur`, a body's timings such as Triton's inference times), over the "
              "ok requests that reported it; absent when the server reports none. Limits: the server's own "
              "clock and its own stage names, not checked against the client's timings", stats=SUMMARY_STATS),
    _d("jitter_ms", "ms", "stream rhythm: population standard deviation of one request's content-chunk gaps "
       "(ok requests with ≥ 3 chunks; a steady stream is near 0, the article's smooth version < 5 ms). "
       "Limits: a gap is between network reads, so tokens a server sends together count as one chunk",
       where=_REPORTED, report=("jitter_p50",)),
    _n("pulse_hz", "rate", "Hz", "stream rhythm: median (summary.json reads it off a histogram, within "
       "alpha) over the *pulsing* ok requests (≥ 8 content chunks, a pulse found; 0 when none pulses) of "
       "each one's pulse frequency, the peak of the spectrum of its token-arrival rate (10 ms bins) between "
       "0.5 Hz (or 2 periods of the stream) and 20 Hz (or 1 / 4 median gaps) holding ≥ 15 % of the rate's "
       "power; 0 for a stream with no such peak (smooth). Limits: a stream shorter than 2 periods cannot "
       "show that period (4 Hz needs ≥ 0.5 s of chunks); streams below 8 chunks (short or non-streamed "
       "answers) have none", report=True),
    _n("requests_pulsing", "count", "requests", "ok requests whose pulse frequency is above 0 (of those with "
       "≥ 8 content chunks)"),
    _n("requests_rhythm", "count", "requests", "ok requests with ≥ 8 content chunks: those whose pulse "
       "frequency was looked for"),
    # counts over measured requests (warm-up and cancelled ones are in no statistic)
    _n("requests", "count", "requests", "measured requests (not warm-up, not cancelled)",
       where=("summary", "rag", "embed"), report=True),
    _n("ok", "count", "requests", "requests whose error class is not a failure (ok, truncated)",
       where=("summary", "rag", "embed"), report=True),
    _n("failures", "count", "requests", "requests that failed: connect error, timeout, redirect, HTTP "
       "4xx/5xx, 429, context length, malformed or interrupted stream, too large, client error", "failed",
       "error requests", report=True),
    _n("interrupted", "count", "requests", "the stream broke (error class interrupted), or after 2xx headers "
       "it ended without its terminal event ([DONE], message_stop; or a finish reason and a clean end) or "
       "with a failure", report=True),
    _n("stalls", "count", "gaps", "content-chunk gaps above the stall threshold (--stall-ms, 150 ms), in any "
       "request"),
    _n("requests_with_stall", "count", "requests", "requests with at least one stall (a content-chunk gap "
       "above --stall-ms)", report=True),
    _n("good", "count", "requests", "ok requests meeting every per-request SLO (the goodput limits)",
       report=True),
    _n("output_tokens_total", "count", "tokens", "output tokens of every request, failed streams too (they "
       "used the server)", report=True),
    _n("output_tokens_estimated", "count", "requests", "requests with output whose count is not the server's "
       "usage"),
    _n("output_tokens_tokenizer", "count", "requests", "requests whose output count is the --tokenizer's "
       "count of the answer text (the server sent no usage, or none believable)"),
    _n("input_tokens_usage", "count", "requests", "requests whose input count is the server's usage"),
    _n("requests_reasoning", "count", "requests", "ok requests with reasoning tokens", report=True),
    _n("reasoning_tokens_total", "count", "tokens", "reasoning tokens of every request (part of "
       "output_tokens_total)"),
    _n("cached_tokens_total", "count", "tokens", "prompt tokens the server said it took from its prefix "
       "cache (usage prompt_tokens_details.cached_tokens, DeepSeek's prompt_cache_hit_tokens, Anthropic's "
       "cache_read_input_tokens)", report=True),
    _n("cache_input_tokens", "count", "tokens", "prompt tokens of the requests whose cached count the server "
       "reported", report=True),
    _n("content_chunks", "count", "chunks", "content chunks of the ok requests", report=True),
    _n("multi_token_chunks", "count", "chunks", "of content_chunks, those that carried more than one token "
       "(the streamed tokens spread evenly over a request's chunks)", report=True),
    _n("tokens_compared", "count", "requests", "ok streamed requests whose output count is the server's "
       "usage, counted by the client too (--tokenizer, else one token per delta)", report=True),
    _n("tokens_discrepant", "count", "requests", "of tokens_compared, those whose two counts differ by more "
       "than 10 % of the client's (the server's less reasoning it never streamed)", report=True),
    _n("tokens_server_total", "count", "tokens", "the server's output counts of tokens_compared (less "
       "reasoning it never streamed)", report=True),
    _n("tokens_client_total", "count", "tokens", "the client's output counts of tokens_compared",
       report=True),
    _n("tool_calls", "count", "calls", "tool calls the ok answers made (OpenAI tool_calls, Anthropic "
       "tool_use, Responses function_call)", report=True),
    _n("requests_tool_calls", "count", "requests", "ok answers that made a tool call", report=True),
    _n("tool_calls_judged", "count", "calls", "of tool_calls, those of requests that offered tools (a "
       "dataset item's tools): judged against them", report=True),
    _n("tool_calls_invalid", "count", "calls", "of tool_calls_judged, those naming no offered tool, whose "
       "arguments are no JSON object, or break the tool's JSON schema", report=True),
    _n("tool_calls_valid", "count", "calls", "tool_calls_judged − tool_calls_invalid", report=True),
    _n("input_tokens_tokenizer", "count", "requests", "requests whose input count is the --tokenizer's count "
       "of the request's message texts (the server reported none)"),
    _n("conn_reused", "count", "requests", "requests sent on an already-open connection", report=True),
    _n("conn_new", "count", "requests", "requests that opened a new connection"),
    _n("conn_known", "count", "requests", "requests where it is known whether the connection was reused "
       "(conn_reused + conn_new)", where=(), report=True),
    _n("conn_reconnects", "count", "requests", "requests whose pooled keep-alive connection the server had "
       "closed while idle, so they opened a new one"),
    _n("usage_implausible", "count", "requests", "requests whose reported usage was not believed (not a "
       "whole number >= 0, or more output tokens than 10 per content chunk and 1 per byte of text, plus 64): "
       "their output_tokens are counted from chunks"),
    _n("no_terminal_event", "count", "requests", "requests complete by a finish reason and a clean end of "
       "the body, without a terminal event ([DONE], message_stop)"),
    _n("unsolicited_responses", "count", "requests", "requests whose response was followed by bytes nobody "
       "asked for (malformed_stream), or whose pooled connection held such bytes and was dropped"),
    _n("users", "count", "users", "an A/B arm's users with a measured request; when the two arms' counts "
       "differ the report compares output tokens/s per user (output_tps / users)", where=(), report=True),
    _n("wall_s", "time", "s", "first send → last end (start + e2e, else the last known offset) over the "
       "requests", where=("summary", "embed"), report=True),
    # per second of wall time
    _n("output_tps", "rate", "tok/s", "output_tokens_total / wall_s", "output throughput",
       "output token throughput", report=True),
    _n("request_rps", "rate", "req/s", "requests / wall_s", "request throughput", "request throughput",
       where=("summary", "embed")),
    _n("goodput_rps", "rate", "req/s", "good / wall_s", "goodput", "goodput", report=True),
    # shares of requests
    _n("error_rate", "ratio", "fraction", "failures / requests", report=True),
    _n("interruption_rate", "ratio", "fraction", "interrupted / requests", report=True),
    _n("stall_rate", "ratio", "fraction", "requests_with_stall / requests", report=True),
    _n("conn_reuse", "ratio", "fraction", "conn_reused / conn_known", report=True),
    _n("goodput_ratio", "ratio", "fraction", "good / requests"),
    _n("reasoning_share", "ratio", "fraction", "requests_reasoning / ok: the share of answers that reasoned",
       report=True),
    _n("cache_hit_share", "ratio", "fraction", "cached_tokens_total / cache_input_tokens: the share of the "
       "prompt tokens the prefix cache served (none when the server reports no cached count)", report=True),
    _n("multi_token_chunk_share", "ratio", "fraction", "multi_token_chunks / content_chunks: chunks that "
       "carried several tokens (speculative decoding, a stream interval, reads that merged events)",
       report=True),
    _n("token_discrepancy_share", "ratio", "fraction", "tokens_discrepant / tokens_compared (AIPerf's usage "
       "discrepancy): the server's token count and the client's disagree", report=True),
    _n("token_count_ratio", "ratio", "fraction", "tokens_server_total / tokens_client_total: the server's "
       "count for each token the client counted (1: they agree)", report=True),
    _n("tool_call_share", "ratio", "fraction", "requests_tool_calls / ok: the answers that were tool calls",
       report=True),
    _n("tool_call_valid_share", "ratio", "fraction", "tool_calls_valid / tool_calls_judged: the calls whose "
       "arguments fit the tool the request offered (its name, a JSON object, its JSON schema)", report=True),
    _n("pulse_share", "ratio", "fraction", "stream rhythm: requests_pulsing / requests_rhythm, the share of "
       "the streams that pulse (the article: part of the long answers). Limits: the report estimates it from "
       "the evenly spread sample of up to 1,000 requests its ITL intervals use", report=True),
    # after the run: fourfold score (summary.json "quality" block, 4 decimals) and the comparison's own
    _d("similarity", "cos", "cosine(MiniLM(answer), MiniLM(reference)) per scored answer, the best over the "
       "item's references; low-confidence answers (low_confidence_n) are left out",
       where=("quality", "report"), report=("similarity_mean", "similarity_p5"), stats=QUALITY_STATS,
       decimals=4),
    _n("low_confidence_n", "count", "answers", "scored answers with a similarity whose share of `[UNK]` word "
       "pieces (pieces the embedding model's tokenizer does not know: ~70 % of Chinese characters for "
       "all-MiniLM-L6-v2) is above --unk-threshold (0.2): scores.jsonl keeps their similarity and marks them "
       "`low_confidence`, every similarity figure leaves them out (fourfold score prints the count)",
       where=("quality",)),
    _n("low_confidence_share", "ratio", "fraction", "low_confidence_n / scored answers with a similarity: "
       "the share the embedding model could not read (the report: baseline vs candidate, two-proportion "
       "test). A similarity SLO floor is unjudged, and fails, while this is above one half",
       where=("quality",), report=True, decimals=4),
    _d("char_f1", "F1", "best character-bigram F1 of the answer to one of the item's references (bigrams of "
       "letters, digits and CJK characters, lower-cased, punctuation and spaces dropped), per scored answer: "
       "a lexical measure that works where the embedding model does not know the script "
       "(docs/fingerprint.md). Limits: word overlap, not meaning: a paraphrase in other words scores low",
       where=("quality", "report"), report=("char_f1_mean",), stats=("mean",), decimals=4),
    _n("structure_compliance", "ratio", "fraction", "answers delivering the requested number of items / "
       "answers asked for a number", where=("quality",), report=True, decimals=4),
    _n("fact_error_rate", "ratio", "fraction", "L3: answers stating a number, year or name that contradicts "
       "a labelled fact of their gold or retrieved documents (gold value first) / answers stating at least "
       "one (quality's `fact_checked_n`); not measured (None) without `facts` in the corpus "
       "(docs/l3-rag.md). Limits: only facts whose subject the answer names and whose cue words share a "
       "sentence with the value", where=("quality",), report=True, decimals=4),
    _d("groundedness", "cos", "L3: max cosine(MiniLM(answer), MiniLM(retrieved chunk)) per scored answer",
       where=("quality.rag", "report"), report=("groundedness_mean",), stats=QUALITY_STATS, decimals=4),
    _n("groundedness_n", "count", "answers", "L3: scored answers whose retrieved chunks are in the corpus "
       "(the answers groundedness is over)", where=("quality.rag",), key="n"),
    _n("low_groundedness_rate", "ratio", "fraction", "L3: answers with a groundedness below 0.6 / "
       "groundedness_n: the hallucination signal (the report: baseline vs candidate, two-proportion test). "
       "Limits: groundedness is a MiniLM cosine between the answer and its retrieved chunks, not a check of "
       "each claim; 0.6 was chosen on the bundled corpus (answers with their gold document retrieved: median "
       "0.72, without: 0.56) and may not suit another corpus or language", where=("quality.rag",),
       report=True, decimals=4),
    _n("groundedness_retrieval_hit", "mean", "cos", "L3: groundedness of the answers whose retrieval found a "
       "gold document (recall_at_k > 0), mean", where=("quality.rag",), decimals=4),
    _n("groundedness_retrieval_miss", "mean", "cos", "L3: groundedness of the answers whose retrieval found "
       "no gold document (recall_at_k = 0), mean", where=("quality.rag",), decimals=4),
    _n("groundedness_conflict", "mean", "cos", "L3: groundedness of the answers whose retrieved documents "
       "conflict, mean", where=("quality.rag",), decimals=4),
    _n("groundedness_no_conflict", "mean", "cos", "L3: groundedness of the answers whose retrieved documents "
       "do not conflict, mean", where=("quality.rag",), decimals=4),
    _n("unknown_ids", "count", "ids", "L3: retrieved ids missing from the corpus (a corpus that does not "
       "match the service)", where=("quality.rag",)),
    _n("cache_hit_planned", "ratio", "fraction", "the share of the prompt tokens an unbounded prefix cache "
       "would serve when the workload's items are sent once in order (--synthetic prefix=, a trace's "
       "hash_ids; meta.json dataset_cache_hit_share): the plan beside cache_hit_share", where=(),
       report=True),
    _n("ttft_structured_penalty", "time", "ms", "mean TTFT of structured prompts (\"in three points\") − "
       "mean TTFT of plain ones", where=(), report=True),
    # L4: sessions (summary.json "sessions" block, per A/B variant and in total; report: each side's group)
    _n("sessions_started", "count", "sessions", "L4: sessions begun", where=("sessions",), key="started"),
    _n("sessions_ended", "count", "sessions", "L4: sessions that ended (completed, max_turns or abandoned; "
       "the record of the last turn says so): the sessions every rate and mean below is over",
       where=("sessions",), report=True, key="ended"),
    _n("sessions_completed", "count", "sessions", "L4: ended sessions whose answers covered every goal fact",
       where=("sessions",), report=True, key="completed"),
    _n("sessions_max_turns", "count", "sessions", "L4: ended sessions that ran out of turns before the goal "
       "was covered", where=("sessions",), key="max_turns"),
    _n("sessions_abandoned", "count", "sessions", "L4: ended sessions the user left because a response "
       "failed, or its TTFT or E2E exceeded the persona's patience (abandoned_by: ttft, e2e, error)",
       where=("sessions",), key="abandoned"),
    _n("sessions_cut", "count", "sessions", "L4: sessions still going when the run stopped: in no rate or "
       "mean", where=("sessions",), key="cut"),
    _n("completion_rate", "ratio", "fraction", "L4: sessions_completed / sessions_ended", where=("sessions",),
       report=True),
    _n("abandonment_rate", "ratio", "fraction", "L4: sessions_abandoned / sessions_ended",
       where=("sessions",)),
    _n("max_turns_rate", "ratio", "fraction", "L4: sessions_max_turns / sessions_ended", where=("sessions",)),
    _n("rounds_mean", "mean", "rounds", "L4: user turns (requests) per ended session, mean",
       where=("sessions",), report=True),
    _n("tool_calls_per_session", "mean", "calls", "L4 agent: tool calls per ended agentic session, mean (the "
       "model called, the user ran the tool and sent the result back)", where=("sessions",), report=True),
    _n("rounds_to_completion_mean", "mean", "rounds", "L4: user turns per completed session, mean (the "
       "article's \"mean interaction rounds\")", where=("sessions",)),
    _d("session_duration_ms", "ms", "L4: an ended session's first request sent → its last response ended, "
       "think times included", where=("sessions",), stats=SESSION_STATS, key="duration_ms"),
    # L3: retrieval (summary.json "rag" block, over the run's ok L3 requests; the report: the L3 group)
    _n("recall_at_k", "ratio", "fraction", "L3: |first k retrieved ∩ gold| / |gold| per ok request with gold "
       "ids, mean", where=("rag",), report=True),
    _n("recall_at_k_by_question", "ratio", "fraction", "L3: recall_at_k per distinct question, mean over the "
       "questions (what an offline evaluation of the retriever on the same questions gives)", where=("rag",)),
    _n("questions", "count", "questions", "L3: distinct questions with a recall_at_k", where=("rag",)),
    _n("precision_at_k", "ratio", "fraction", "L3: |first k retrieved ∩ gold| / |first k retrieved| (context "
       "precision) per ok request with gold ids and retrieved ids, mean", where=("rag",), report=True),
    _n("with_retrieved_ids", "count", "requests", "L3: ok requests whose service reported the ids it "
       "retrieved", where=("rag",)),
    _n("conflicts", "count", "requests", "L3: ok requests whose retrieved documents include two of one "
       "conflict group (the corpus's claims) with different values", where=("rag",)),
    _n("conflict_rate", "ratio", "fraction", "L3: conflicts / with_retrieved_ids: the share of ok requests "
       "whose retrieved context held two documents of one conflict group stating different values (the "
       "report: baseline vs candidate, two-proportion test). Limits: only conflicts the corpus labels (its "
       "documents' `claims`) count, and only among the ids the service reports; a service that reports no "
       "ids has none", where=("rag",), report=True),
    _n("effective_tps", "rate", "tok/s", "L3: Σ output tokens / Σ end-to-end seconds over the ok requests: "
       "the rate a user sees, retrieval included", where=("rag",)),
    _d("effective_tps_per_request", "tok/s", "L3: one ok request's output tokens / its end-to-end seconds",
       where=("rag",), stats=RAG_STATS),
    _n("with_stage_timings", "count", "requests", "L3: ok requests whose service reported stage timings "
       "(Server-Timing or the body's timings)", where=("rag",)),
    _d("other_ms", "ms", "L3: e2e_ms − the sum of the service's stage timings: network, HTTP and service "
       "overhead that no stage accounts for", where=("rag",), stats=RAG_STATS),
    _d("server_total_ms", "ms", "L3: the service's own total time (its `total` timing)", where=("rag",),
       stats=RAG_STATS),
    # embeddings and rerank (summary.json "embed" block per batch size: levels/embed_batches.py)
    _n("inputs_total", "count", "inputs", "embeddings / rerank: the texts embedded or documents ranked by "
       "the ok requests, as sent", where=("embed",), report=True),
    _n("input_tokens_total", "count", "tokens", "embeddings / rerank: the input tokens of the ok requests as "
       "the server's usage counted them (prompt_tokens, rerank total_tokens; none from Cohere's search "
       "units)", where=("embed",), report=True),
    _n("inputs_per_request", "mean", "inputs", "embeddings / rerank: inputs_total / ok (the batch size, "
       "when every request was answered)", where=("embed",)),
    _n("inputs_per_s", "rate", "inputs/s", "embeddings / rerank: inputs_total / wall_s", "–",
       where=("embed",), report=True),
    _n("input_tokens_per_s", "rate", "tok/s", "embeddings / rerank: input_tokens_total / wall_s", "–",
       "input token throughput", where=("embed",), report=True),
    # cost and energy (summary.json "cost" block over the run, measure.cost; the report: each group's side)
    _n("prompt_tokens_total", "count", "tokens", "input tokens of every request whose count is known (the "
       "server's usage, or --tokenizer): what an API's input price applies to", report=True),
    _n("price_per_hour", "rate", "USD/h", "--price-per-hour: the deployment under test, per hour of wall "
       "time", where=("cost",)),
    _n("price_per_1m_input", "mean", "USD", "--price-per-1m-input: an API's price per 1M input tokens",
       where=("cost",)),
    _n("price_per_1m_output", "mean", "USD", "--price-per-1m-output: an API's price per 1M output tokens",
       where=("cost",)),
    _n("cost_usd", "count", "USD", "price_per_hour × wall_s / 3600 + (prompt_tokens_total × "
       "price_per_1m_input + output_tokens_total × price_per_1m_output) / 1e6 over the run's requests",
       where=("cost",), decimals=6),
    _n("cost_per_1m_output", "mean", "USD", "cost_usd per 1M output tokens (input tokens' price included). "
       "The report: each side's group over its wall time, spread as output tokens/s's", where=("cost",),
       report=True, decimals=6),
    _n("cost_per_request", "mean", "USD", "cost_usd / ok: per request (on L3, per RAG answer)",
       where=("cost",), decimals=6),
    _n("cost_per_session", "mean", "USD", "cost_usd / sessions_ended (L4)", where=("cost",), decimals=6),
    _n("power_w_mean", "mean", "W", "the GPUs' mean power over the run's telemetry samples (power_w: the "
       "target's DCGM_FI_DEV_POWER_USAGE, else nvidia-smi power.draw)", where=("cost",)),
    _n("joules_per_token", "mean", "J", "energy per output token: power_w_mean × wall_s / "
       "output_tokens_total. The report: each side's mean power over its wall time and tokens, spread as "
       "output tokens/s's",
       where=("cost",), report=True, decimals=4),
    _n("tokens_per_joule", "mean", "tokens/J", "1 / joules_per_token", where=("cost",), decimals=4),
    # server telemetry (L1 sampler: summary.json "server_metrics" block, server_metrics.json): SLO names only
    _d("gpu_util", "%", "GPU utilisation: the share of time a kernel ran (DCGM_FI_DEV_GPU_UTIL from "
       "--metrics-url, nvidia-smi utilization.gpu), sampled once per --sample-interval; mean or max over the "
       "samples (the SLO: the larger of the two sources). Limits: a busy GPU can still be underused",
       where=(), stats=("mean", "max")),
    _d("gpu_mem_bw_util", "%", "GPU memory-bandwidth utilisation: the share of time the memory controller "
       "was busy (DCGM_FI_DEV_MEM_COPY_UTIL from --metrics-url, nvidia-smi utilization.memory), not bytes/s; "
       "sampled once per --sample-interval, mean or max over the samples (the SLO: the larger of the two "
       "sources)", where=(), stats=("mean", "max")),
    _d("kv_cache_usage", "%", "the engine's KV-cache usage (vllm:kv_cache_usage_perc, sglang:token_usage, "
       "×100 from --metrics-url), sampled once per --sample-interval; mean or max over the samples", where=(),
       stats=("mean", "max")),
    _d("server_running", "requests", "sequences the engine is generating (vllm:num_requests_running, "
       "sglang:num_running_reqs, tgi_batch_current_size from --metrics-url), sampled once per "
       "--sample-interval; mean or max over the samples (report rows only)", where=(), stats=("mean", "max")),
    _d("server_waiting", "requests", "requests queued in the engine (vllm:num_requests_waiting, "
       "sglang:num_queue_reqs, tgi_queue_size), sampled once per --sample-interval; mean or max over the "
       "samples (report rows only)", where=(), stats=("mean", "max")),
    _d("gpu_mem_used", "MiB", "GPU memory in use, summed over the GPUs nvidia-smi sees (memory.used), "
       "sampled once per --sample-interval; mean or max (report rows only). Limits: the local machine's "
       "GPUs, so only when fourfold runs on the server", where=(), stats=("mean", "max")),
    _d("gpu_power", "W", "GPU power draw, summed over the GPUs (DCGM_FI_DEV_POWER_USAGE from "
       "--metrics-url, nvidia-smi power.draw; a GPU without a reading leaves the sum out), sampled once per "
       "--sample-interval; mean or max over the samples (report rows only)", where=(), stats=("mean", "max")),
    _d("gpu_mem_total", "MiB", "GPU memory of the GPUs nvidia-smi sees (memory.total; report rows only)",
       where=(), stats=("mean", "max")),
    MetricDef("error_class_rate", "fraction", "ratio", "requests that failed with one error class / "
              "requests: the report's `errors: <class>` rows (`error_rate.<class>`), one per class that "
              "occurred; summary.json counts the classes in `errors`", where=()),     # (rows named per class)
    # --mix (summary.json "mix" block: a row per tenant and per model, measure.mixstats)
    _n("weight", "ratio", "fraction", "--mix: the entry's weight, the weights normalised to sum 1 (the share "
       "of requests asked for)", where=("mix",)),
    _n("share", "ratio", "fraction", "--mix: the tenant's (or model's) measured requests / the mix's",
       where=("mix",)),
    _n("goodput_share", "ratio", "fraction", "--mix: the tenant's (or model's) good requests / the mix's",
       where=("mix",)),
    _n("rate_limited", "count", "requests", "--mix: the tenant's (or model's) requests answered 429",
       where=("mix",)),
    _n("retry_after", "count", "requests", "--mix: the tenant's throttled answers (429, 503) that named a "
       "Retry-After", where=("mix",)),
    _n("retry_after_s", "time", "s", "--mix: the seconds the tenant's Retry-After answers asked for (a "
       "closed-loop L2 user waits them with --honour-retry-after)", where=("mix",)),
    _n("jain_index", "ratio", "fraction", "--mix: Jain's fairness index over the tenants of goodput_share / "
       "weight, (Σx)² / (n·Σx²): 1 when every tenant's goodput is in proportion to its weight, 1/n when one "
       "takes it all (the mix block's fairness; descriptive)", where=("mix",)),
)
# the figures of a group that a --mix tenant's row shows too (measure.mixstats.ROW_FIELDS, TTFT, E2E)
_MIX_ROW = ("requests", "ok", "failures", "good", "goodput_rps", "request_rps", "output_tps", "error_rate",
            "ttft_ms", "e2e_ms")
METRICS = tuple(replace(m, where=(*m.where[:-1], "mix", "report") if m.where[-1:] == ("report",)
                        else (*m.where, "mix")) if m.name in _MIX_ROW else m for m in METRICS)
# the telemetry metrics above -> their canonical name in the sampler's rows (measure.prom.CANONICAL);
# the SLO gate takes the first three (the utilisations, in %), the report shows a row per gauge
TELEMETRY_CANONICAL = {"gpu_util": "gpu_util_pct", "gpu_mem_bw_util": "mem_bw_util_pct",
                       "kv_cache_usage": "kv_cache_usage_pct"}
TELEMETRY_REPORTED = {**TELEMETRY_CANONICAL, "server_running": "running", "server_waiting": "waiting",
                      "gpu_mem_used": "gpu_mem_used_mib", "gpu_mem_total": "gpu_mem_total_mib",
                      "gpu_power": "power_w"}

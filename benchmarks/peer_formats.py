"""What the peers write, read back into one shape, and the error and ratio arithmetic (pure).

Each peer keeps its per-request timings in its own format; ``parse_vllm`` / ``parse_guidellm`` /
``parse_aiperf`` turn them into :class:`PeerRequest` records, everything else here is plain
functions over those records and over result rows. No sockets, no processes, no files (the
callers read the files): ``benchmarks/peers.py`` is the shell around this.

- vLLM (``benchmarks/peer_vllm_driver.py`` output): ``ttft`` and the ``itl`` list of
  ``RequestFuncOutput`` in seconds, every gap between content chunks.
- GuideLLM (``benchmarks.json``): per request ``request_start``, ``first_token_iteration``,
  ``last_token_iteration`` and ``token_iterations``. It keeps no per-chunk times, so its ITL is
  the per-request mean (last - first) / (iterations - 1), as GuideLLM itself reports it.
- AIPerf (``profile_export.jsonl``): ``request_start_ns``, ``time_to_first_token`` and the
  ``inter_chunk_latency`` list in ms, every gap between content chunks.
"""

from __future__ import annotations

import json
import math
from bisect import bisect_left
from collections.abc import Iterable
from dataclasses import dataclass

ITL_PER_GAP = "gap"            # every gap between consecutive content chunks
ITL_PER_REQUEST = "mean"       # one (last - first) / (n - 1) per request


@dataclass(frozen=True)
class PeerRequest:
    """One request as a peer recorded it; times on the wall clock (epoch seconds)."""

    start_s: float                      # when the peer started the request
    ttft_ms: float | None               # None: no token arrived
    gaps_ms: tuple[float, ...] = ()     # every inter-chunk gap (empty when the peer keeps none)
    tokens: int = 0                     # output tokens (server usage where the peer kept it)
    last_token_s: float | None = None   # the last chunk, for peers that keep only first and last
    chunks: int = 0                     # content chunks the peer counted (GuideLLM's iterations)
    complete: bool = True               # False: cut off at the end of the run (throughput only)
    warmup: bool = False                # the peer itself marked it a warm-up

    @property
    def first_token_s(self) -> float | None:
        return None if self.ttft_ms is None else self.start_s + self.ttft_ms / 1000

    @property
    def mean_itl_ms(self) -> float | None:
        first, n = self.first_token_s, self.chunks or len(self.gaps_ms) + 1
        if self.gaps_ms:
            return sum(self.gaps_ms) / len(self.gaps_ms)
        if first is None or self.last_token_s is None or n < 2:
            return None
        return (self.last_token_s - first) * 1000 / (n - 1)

    def chunk_times_s(self) -> list[float]:
        """Receive time of every content chunk; evenly spaced when only first and last are known
        (GuideLLM's own assumption in ``GenerativeRequestStats.iter_tokens_timings``)."""
        first = self.first_token_s
        if first is None:
            return []
        if self.gaps_ms:
            times, t = [first], first
            for gap_ms in self.gaps_ms:
                t += gap_ms / 1000
                times.append(t)
            return times
        n = self.chunks or self.tokens
        if self.last_token_s is None or n < 2:
            return [first]
        step = (self.last_token_s - first) / (n - 1)
        return [first + i * step for i in range(n)]


# ---- parsers ------------------------------------------------------------------------------------

def parse_vllm(data: dict) -> list[PeerRequest]:
    """The driver's ``{"requests": [...]}``; failed requests are left out."""
    out = []
    for item in data.get("requests", []):
        if not item.get("success"):
            continue
        gaps = tuple(g * 1000 for g in item.get("itl_s") or ())
        out.append(PeerRequest(start_s=item["start_s"], ttft_ms=item["ttft_s"] * 1000, gaps_ms=gaps,
                               tokens=item.get("output_tokens") or len(gaps) + 1, chunks=len(gaps) + 1,
                               warmup=bool(item.get("warmup"))))
    return out


def _guidellm_request(item: dict, complete: bool) -> PeerRequest | None:
    timings = item.get("info", {}).get("timings", {})
    start, first = timings.get("request_start"), timings.get("first_token_iteration")
    if start is None:
        return None
    usage = item.get("output_metrics") or {}
    iterations = timings.get("token_iterations") or 0
    tokens = usage.get("total_tokens") or usage.get("text_tokens") or iterations
    return PeerRequest(start_s=start, ttft_ms=None if first is None else (first - start) * 1000,
                       tokens=tokens if first is not None else 0,
                       last_token_s=timings.get("last_token_iteration"),
                       chunks=iterations, complete=complete)


def parse_guidellm(report: dict) -> list[PeerRequest]:
    """GuideLLM's JSON report: successful requests, plus the ones its duration limit cut off
    (``incomplete``, kept for throughput only); errored requests are left out."""
    out = []
    for benchmark in report.get("benchmarks", []):
        requests = benchmark.get("requests", {})
        for status, complete in (("successful", True), ("incomplete", False)):
            for item in requests.get(status) or []:
                request = _guidellm_request(item, complete)
                if request is not None:
                    out.append(request)
    return out


def _ms(metrics: dict, name: str) -> float | list | None:
    metric = metrics.get(name)
    if not isinstance(metric, dict):
        return None
    scale = {"ms": 1.0, "ns": 1e-6, "us": 1e-3, "s": 1000.0}.get(metric.get("unit", "ms"), 1.0)
    value = metric.get("value")
    if isinstance(value, list):
        return [v * scale for v in value]
    return None if value is None else value * scale


def parse_aiperf(text: str) -> list[PeerRequest]:
    """AIPerf's ``profile_export.jsonl``: profiling-phase records without an error."""
    out = []
    for line in text.splitlines():
        if not line.strip():
            continue
        record = json.loads(line)
        meta, metrics = record.get("metadata", {}), record.get("metrics", {})
        if (record.get("error") or meta.get("error")
                or meta.get("benchmark_phase", "profiling") != "profiling"):
            continue
        ttft = _ms(metrics, "time_to_first_token")
        gaps = _ms(metrics, "inter_chunk_latency") or []
        tokens = (metrics.get("output_sequence_length") or metrics.get("usage_completion_tokens")
                  or {}).get("value")
        out.append(PeerRequest(start_s=meta["request_start_ns"] / 1e9, ttft_ms=ttft, gaps_ms=tuple(gaps),
                               tokens=int(tokens or len(gaps) + 1), chunks=len(gaps) + 1,
                               complete=not meta.get("was_cancelled", False)))
    return out


PARSERS = {"vllm": parse_vllm, "guidellm": parse_guidellm, "aiperf": parse_aiperf}


# ---- errors, windows, CPU -----------------------------------------------------------------------

def drop_warmup(requests: list[PeerRequest], streams: int) -> list[PeerRequest]:
    """Leave out each stream's first request. A peer that marks warm-ups says so itself; for the
    others the first ``streams`` requests by start time are the streams' first requests (a closed
    loop of N streams sends N at once and none can send its second before its first ended)."""
    if any(r.warmup for r in requests):
        return [r for r in requests if not r.warmup]
    return sorted(requests, key=lambda r: r.start_s)[streams:]


def timing_errors(requests: Iterable[PeerRequest], planned_ttft_ms: float, itl_ms: float,
                  basis: str = ITL_PER_GAP) -> tuple[list[float], list[float]]:
    """TTFT errors (measured - planned) and absolute ITL errors (ms) of the complete requests."""
    ttft_err, itl_err = [], []
    for request in requests:
        if not request.complete or request.ttft_ms is None:
            continue
        ttft_err.append(request.ttft_ms - planned_ttft_ms)
        if basis == ITL_PER_GAP:
            itl_err.extend(abs(gap - itl_ms) for gap in request.gaps_ms)
        elif (mean := request.mean_itl_ms) is not None:
            itl_err.append(abs(mean - itl_ms))
    return ttft_err, itl_err


def steady_window(requests: list[PeerRequest], duration_s: float, warm_s: float) -> tuple[float, float]:
    """From ``warm_s`` after the first request to 1 s before the run's planned end."""
    t0 = min(r.start_s for r in requests)
    return t0 + warm_s, t0 + max(warm_s + 0.5, duration_s - 1.0)


def tokens_in_window(requests: Iterable[PeerRequest], window: tuple[float, float]) -> float:
    """Tokens whose chunk arrived inside the window (a chunk may carry several tokens)."""
    total = 0.0
    for request in requests:
        times = request.chunk_times_s()
        if times:
            inside = sum(1 for t in times if window[0] <= t <= window[1])
            total += inside * request.tokens / len(times)
    return total


def cpu_at(samples: list[tuple[float, float]], t: float) -> float:
    """CPU seconds of a process tree at wall time ``t``, interpolated between (time, cpu) samples."""
    if not samples:
        return 0.0
    times = [s[0] for s in samples]
    i = bisect_left(times, t)
    if i == 0:
        return samples[0][1]
    if i == len(samples):
        return samples[-1][1]
    (t0, c0), (t1, c1) = samples[i - 1], samples[i]
    return c0 if t1 == t0 else c0 + (c1 - c0) * (t - t0) / (t1 - t0)


# ---- rows, ratios, verdicts, table --------------------------------------------------------------

METRICS = ("ttft_err_p50_ms", "ttft_err_p99_ms", "itl_err_p50_ms", "itl_err_p99_ms", "cpu_ms_per_1k_tokens",
           "tokens_per_s")


def ratio(value: float | None, reference: float | None) -> float | None:
    if value is None or reference is None or reference == 0 or math.isnan(reference):
        return None
    return value / reference


def add_ratios(rows: list[dict], reference: str = "raw-socket") -> None:
    """Add ``<metric>_vs_raw`` to every row: its value / the reference client's at the same point."""
    refs = {(r["streams"], r["itl_ms"]): r for r in rows if r["client"] == reference}
    for row in rows:
        ref = refs.get((row["streams"], row["itl_ms"]), {})
        for metric in METRICS:
            row[f"{metric}_vs_raw"] = ratio(row.get(metric), ref.get(metric))


def verdicts(rows: list[dict], ours: str = "fourfold", reference: str = "raw-socket") -> list[str]:
    """Per point: is fourfold's TTFT error (p50 and p99) below every peer's that ran there?"""
    lines = []
    points = sorted({(r["streams"], r["itl_ms"]) for r in rows}, key=lambda p: (p[0], -p[1]))
    for streams, itl in points:
        here = [r for r in rows if (r["streams"], r["itl_ms"]) == (streams, itl)]
        mine = next((r for r in here if r["client"] == ours), None)
        peers = [r for r in here if r["client"] not in (ours, reference)
                 and r.get("ttft_err_p50_ms") is not None]
        if mine is None or mine.get("ttft_err_p50_ms") is None or not peers:
            continue
        worse = [f"{p['client']} {q}" for p in peers for q in ("p50", "p99")
                 if abs(mine[f"ttft_err_{q}_ms"]) >= abs(p[f"ttft_err_{q}_ms"])]
        verdict = "yes" if not worse else "no (not below: " + ", ".join(worse) + ")"
        lines.append(f"{streams:>3} streams x {itl:g} ms: fourfold TTFT error below every peer: {verdict}")
    return lines


def ratio_text(rel: float) -> str:
    """``0.43x``, ``1.5x``, ``12x``, ``1,700x``: two significant digits, no exponent."""
    return f"{rel:,.0f}x" if rel >= 9.95 else f"{rel:.2g}x"


def _cell(value: float | None, rel: float | None, digits: int = 2) -> str:
    if value is None:
        return "-"
    text = f"{value:,.{digits}f}"
    return text if rel is None else f"{text} ({ratio_text(rel)})"


COLUMNS = (("TTFT err p50", "ttft_err_p50_ms", 2), ("TTFT err p99", "ttft_err_p99_ms", 2),
           ("ITL err p50", "itl_err_p50_ms", 2), ("ITL err p99", "itl_err_p99_ms", 2),
           ("CPU ms/1k tok", "cpu_ms_per_1k_tokens", 1), ("tok/s", "tokens_per_s", 0))


def table_cells(row: dict, reference: str = "raw-socket") -> list[str]:
    show_ratio = row["client"] != reference
    cells = [str(row["streams"]), f"{row['itl_ms']:g}",
             row["client"] + ("*" if row.get("itl_basis") == ITL_PER_REQUEST else "")]
    for _, key, digits in COLUMNS:
        cells.append(_cell(row.get(key), row.get(f"{key}_vs_raw") if show_ratio else None, digits))
    cells.append(str(row.get("requests", "-")))
    return cells


def render_table(rows: list[dict], markdown: bool = False) -> str:
    """Values with their ratio to the raw-socket client's at the same point, e.g. ``3.10 (1.2x)``."""
    header = ["streams", "ms/tok", "client", *(c[0] for c in COLUMNS), "requests"]
    body = [table_cells(r) for r in rows]
    if markdown:
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(cells) + " |" for cells in body]
        return "\n".join(lines)
    widths = [max(len(h), *(len(c[i]) for c in body)) if body else len(h) for i, h in enumerate(header)]
    fmt = "  ".join(f"{{:<{w}}}" if i == 2 else f"{{:>{w}}}" for i, w in enumerate(widths))
    return "\n".join(fmt.format(*cells) for cells in [header, *body])

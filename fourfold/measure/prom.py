"""Server metrics: Prometheus text and ``nvidia-smi`` CSV parsed into one canonical vocabulary.

Pure functions; the sampler greenlet in :mod:`fourfold.levels.telemetry_sampler` does the I/O. Engines name
the same quantity differently, so each canonical metric lists its known source names (first found wins;
samples with several label sets are summed for counts and averaged for percentages).

| canonical | vLLM | SGLang | TGI | DCGM exporter | nvidia-smi |
|---|---|---|---|---|---|
| running | vllm:num_requests_running | sglang:num_running_reqs | tgi_batch_current_size | | |
| waiting | vllm:num_requests_waiting | sglang:num_queue_reqs | tgi_queue_size | | |
| kv_cache_usage_pct | vllm:kv_cache_usage_perc, vllm:gpu_cache_usage_perc (×100) |
  sglang:token_usage (×100) | | | |
| generation_tokens_total | vllm:generation_tokens_total | sglang:generation_tokens_total | | | |
| gpu_util_pct | | | | DCGM_FI_DEV_GPU_UTIL | utilization.gpu |
| mem_bw_util_pct | | | | DCGM_FI_DEV_MEM_COPY_UTIL | utilization.memory |
| power_w | | | | DCGM_FI_DEV_POWER_USAGE (summed over GPUs) | power.draw (summed) |

``mem_bw_util_pct`` is what the article calls GPU memory-bandwidth utilisation: the share of time
the memory controller was busy (``nvidia-smi --query-gpu=utilization.memory``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# canonical -> (source names in preference order, scale, how samples with several labels combine)
CANONICAL: dict[str, tuple[tuple[str, ...], float, str]] = {
    "running": (("vllm:num_requests_running", "sglang:num_running_reqs", "tgi_batch_current_size"),
                1.0, "sum"),
    "waiting": (("vllm:num_requests_waiting", "sglang:num_queue_reqs", "tgi_queue_size"), 1.0, "sum"),
    "kv_cache_usage_pct": (("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:token_usage"),
                           100.0, "mean"),
    "generation_tokens_total": (("vllm:generation_tokens_total", "sglang:generation_tokens_total"),
                                1.0, "sum"),
    "gpu_util_pct": (("DCGM_FI_DEV_GPU_UTIL",), 1.0, "mean"),
    "mem_bw_util_pct": (("DCGM_FI_DEV_MEM_COPY_UTIL",), 1.0, "mean"),
    "power_w": (("DCGM_FI_DEV_POWER_USAGE",), 1.0, "sum"),
}
NVIDIA_SMI_QUERY = "utilization.gpu,utilization.memory,memory.used,memory.total,power.draw"
NVIDIA_SMI_ARGS = ("nvidia-smi", f"--query-gpu={NVIDIA_SMI_QUERY}", "--format=csv,noheader,nounits")


@dataclass(frozen=True)
class Sample:
    name: str
    labels: tuple[tuple[str, str], ...]
    value: float


def parse_prometheus(text: str) -> list[Sample]:
    """Parse the text exposition format (comments, labels with escapes, optional timestamps).

    Lines that do not parse are skipped: a target's odd metrics never stop a run.
    """
    samples = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        labels: tuple[tuple[str, str], ...] = ()
        brace = line.find("{")
        if brace >= 0:
            close = line.rfind("}")
            if close < brace:
                continue
            name = line[:brace].strip()
            labels = _parse_labels(line[brace + 1:close])
            rest = line[close + 1:].split()
        else:
            parts = line.split()
            name, rest = parts[0], parts[1:]
        if not rest:
            continue
        try:
            value = float(rest[0])
        except ValueError:
            continue
        samples.append(Sample(name, labels, value))
    return samples


def _parse_labels(body: str) -> tuple[tuple[str, str], ...]:
    labels = []
    i, n = 0, len(body)
    while i < n:
        eq = body.find("=", i)
        if eq < 0:
            break
        key = body[i:eq].strip().lstrip(",").strip()
        j = body.find('"', eq)
        if j < 0:
            break
        value_chars = []
        k = j + 1
        while k < n and body[k] != '"':
            if body[k] == "\\" and k + 1 < n:
                k += 1
                value_chars.append({"n": "\n"}.get(body[k], body[k]))
            else:
                value_chars.append(body[k])
            k += 1
        labels.append((key, "".join(value_chars)))
        i = k + 1
    return tuple(labels)


def canonical_metrics(samples: list[Sample]) -> dict[str, float]:
    """The canonical metrics found among ``samples`` (absent ones are left out)."""
    by_name: dict[str, list[float]] = {}
    for sample in samples:
        if math.isfinite(sample.value):
            by_name.setdefault(sample.name, []).append(sample.value)
    found: dict[str, float] = {}
    for canonical, (names, scale, combine) in CANONICAL.items():
        for name in names:
            values = by_name.get(name)
            if values:
                total = sum(values)
                found[canonical] = (total / len(values) if combine == "mean" else total) * scale
                break
    return found


def parse_nvidia_smi(csv_text: str) -> dict[str, float]:
    """``nvidia-smi --query-gpu=utilization.gpu,utilization.memory,memory.used,memory.total,power.draw
    --format=csv,noheader,nounits`` -> canonical metrics averaged (summed for memory and power) over GPUs.
    A GPU that reports no power (``[N/A]``, ``[Not Supported]``) keeps its other figures; the power is
    left out unless every GPU reported one (a partial sum would read as a saving)."""
    rows = []
    powers: list[float | None] = []
    for line in csv_text.strip().splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) < 4:
            continue
        try:
            rows.append([float(c) for c in cells[:4]])
        except ValueError:
            continue   # "[N/A]" or "[Not Supported]"
        try:
            power = float(cells[4]) if len(cells) > 4 else None
        except ValueError:
            power = None
        powers.append(power if power is not None and math.isfinite(power) else None)
    if not rows:
        return {}
    n = len(rows)
    out = {
        "gpu_util_pct": sum(r[0] for r in rows) / n,
        "mem_bw_util_pct": sum(r[1] for r in rows) / n,
        "gpu_mem_used_mib": sum(r[2] for r in rows),
        "gpu_mem_total_mib": sum(r[3] for r in rows),
        "gpus": float(n),
    }
    if all(p is not None for p in powers):
        out["power_w"] = sum(p for p in powers if p is not None)
    return out


def summarize_series(series: list[dict[str, float]]) -> dict[str, dict[str, float]]:
    """Per metric over a run's samples: mean, max and the last value (counters: rate per second)."""
    out: dict[str, dict[str, float]] = {}
    names = sorted({k for row in series for k in row if k != "t_s"})
    for name in names:
        points = [(row["t_s"], row[name]) for row in series if name in row]
        values = [v for _, v in points]
        stats = {"mean": sum(values) / len(values), "max": max(values), "last": values[-1],
                 "samples": float(len(values))}
        if name.endswith("_total") and len(points) > 1 and points[-1][0] > points[0][0]:
            stats["rate_per_s"] = (points[-1][1] - points[0][1]) / (points[-1][0] - points[0][0])
        out[name] = {k: round(v, 3) for k, v in stats.items()}
    return out

"""Server-metrics parsing: Prometheus text of vLLM / SGLang / DCGM and nvidia-smi CSV."""

from __future__ import annotations

import pytest

from fourfold.measure.prom import canonical_metrics, parse_nvidia_smi, parse_prometheus, summarize_series

VLLM = """# HELP vllm:num_requests_running Number of requests currently running on GPU.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 12.0
vllm:num_requests_running{engine="1",model_name="m"} 4.0
vllm:num_requests_waiting{engine="0",model_name="m"} 3.0
vllm:gpu_cache_usage_perc{engine="0",model_name="m"} 0.5
vllm:gpu_cache_usage_perc{engine="1",model_name="m"} 0.25
vllm:generation_tokens_total{model_name="m"} 12345.0 1700000000000
DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-x",Hostname="h"} 97
DCGM_FI_DEV_MEM_COPY_UTIL{gpu="0",UUID="GPU-x",Hostname="h"} 92
DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-x",Hostname="h"} 612.5
DCGM_FI_DEV_POWER_USAGE{gpu="1",UUID="GPU-y",Hostname="h"} 88.25
weird line without value
label_escape{path="a\\"b,c"} 1
"""


def test_parse_prometheus_keeps_labels_and_skips_junk():
    samples = parse_prometheus(VLLM)
    names = [s.name for s in samples]
    assert "weird" not in names and names.count("vllm:num_requests_running") == 2
    escaped = next(s for s in samples if s.name == "label_escape")
    assert escaped.labels == (("path", 'a"b,c'),) and escaped.value == 1.0


def test_canonical_metrics_sum_counts_and_average_percentages():
    found = canonical_metrics(parse_prometheus(VLLM))
    assert found == {"running": 16.0, "waiting": 3.0, "kv_cache_usage_pct": 37.5,
                     "generation_tokens_total": 12345.0, "gpu_util_pct": 97.0, "mem_bw_util_pct": 92.0,
                     "power_w": 700.75}          # the GPUs' power, summed


def test_sglang_names():
    text = "sglang:num_running_reqs 5\nsglang:num_queue_reqs 2\nsglang:token_usage 0.8\n"
    assert canonical_metrics(parse_prometheus(text)) == {"running": 5.0, "waiting": 2.0,
                                                          "kv_cache_usage_pct": 80.0}


@pytest.mark.parametrize(("csv", "expected"), [
    ("42, 79, 30000, 81559\n", {"gpu_util_pct": 42.0, "mem_bw_util_pct": 79.0, "gpu_mem_used_mib": 30000.0,
                                "gpu_mem_total_mib": 81559.0, "gpus": 1.0}),
    ("40, 80, 100, 200\n60, 90, 300, 200\n", {"gpu_util_pct": 50.0, "mem_bw_util_pct": 85.0,
                                              "gpu_mem_used_mib": 400.0, "gpu_mem_total_mib": 400.0,
                                              "gpus": 2.0}),
    ("42, 79, 30000, 81559, 612.25\n40, 80, 100, 200, 95.5\n",           # power.draw: summed
     {"gpu_util_pct": 41.0, "mem_bw_util_pct": 79.5, "gpu_mem_used_mib": 30100.0,
      "gpu_mem_total_mib": 81759.0, "gpus": 2.0, "power_w": 707.75}),
    ("42, 79, 30000, 81559, 612.25\n40, 80, 100, 200, [N/A]\n",          # one GPU without: no partial sum
     {"gpu_util_pct": 41.0, "mem_bw_util_pct": 79.5, "gpu_mem_used_mib": 30100.0,
      "gpu_mem_total_mib": 81759.0, "gpus": 2.0}),
    ("[N/A], [N/A], 1, 2\n", {}),
    ("", {}),
])
def test_parse_nvidia_smi(csv, expected):
    assert parse_nvidia_smi(csv) == expected


def test_summarize_series_gives_counter_rates():
    series = [{"t_s": 0.0, "server.running": 2.0, "server.generation_tokens_total": 100.0},
              {"t_s": 2.0, "server.running": 4.0, "server.generation_tokens_total": 500.0}]
    summary = summarize_series(series)
    assert summary["server.running"] == {"mean": 3.0, "max": 4.0, "last": 4.0, "samples": 2.0}
    assert summary["server.generation_tokens_total"]["rate_per_s"] == 200.0

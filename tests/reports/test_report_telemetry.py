"""Server telemetry in the comparison report: server_metrics.json read beside the cache, one
mean row (tested) and one max row (values only) per gauge, named so the article check finds them."""

from __future__ import annotations

import json

import numpy as np
import pytest

from fourfold.reports.article import CLAIMS, find_row
from fourfold.reports.compare import NA, CompareSettings, GroupSample, compare_groups
from fourfold.reports.load import group_samples, load_run
from fourfold.reports.telemetry import read_telemetry
from tests.rundirs import RunSpec, write_run

SETTINGS = CompareSettings(resamples=2000, seed=0)
# first and last samples are partial ticks: steady() drops them (0 and 100 here)
BASE_BW = np.array([0.0, 40.0, 41.0, 42.0, 40.0, 41.0, 42.0, 100.0])
CAND_BW = np.array([0.0, 88.0, 90.0, 92.0, 89.0, 91.0, 90.0, 100.0])


def _rows(b: GroupSample, c: GroupSample) -> dict:
    return {row.metric: row for row in compare_groups("l1:saturation", b, c, SETTINGS)}


def test_mean_row_is_tested_and_max_row_is_values_only():
    b = GroupSample(telemetry={"server.mem_bw_util_pct": BASE_BW, "server.generation_tokens_total": BASE_BW})
    c = GroupSample(telemetry={"server.mem_bw_util_pct": CAND_BW, "nvidia_smi.mem_bw_util_pct": CAND_BW,
                               "nvidia_smi.gpus": np.ones(8)})
    rows = _rows(b, c)
    mean = rows["telemetry.server.mem_bw_util_pct.mean"]
    assert mean.baseline == pytest.approx(41.0) and mean.candidate == pytest.approx(90.0)
    assert mean.label == "server: memory-bandwidth util mean" and mean.unit == "%" and mean.better == "higher"
    assert mean.n_baseline == mean.n_candidate == 6
    # six 1-s samples, serially correlated: descriptive, never a verdict
    assert mean.verdict == "too few" and "effective samples of 6" in mean.why and mean.p_value is None
    top = rows["telemetry.server.mem_bw_util_pct.max"]
    assert (top.baseline, top.candidate, top.delta) == (100.0, 100.0, 0.0)
    assert top.ci_low is None and top.p_value is None and top.verdict == NA and top.test == "values only"
    only_c = rows["telemetry.nvidia_smi.mem_bw_util_pct.mean"]       # one side sampled it: n/a
    assert only_c.baseline is None and only_c.candidate == pytest.approx(90.0) and only_c.verdict == NA
    telemetry = [m for m in rows if m.startswith("telemetry.")]
    assert telemetry == ["telemetry.server.mem_bw_util_pct.mean", "telemetry.server.mem_bw_util_pct.max",
                         "telemetry.nvidia_smi.mem_bw_util_pct.mean",
                         "telemetry.nvidia_smi.mem_bw_util_pct.max"]
    claim = next(c for c in CLAIMS if c.effect.startswith("GPU memory-bandwidth"))
    assert find_row(list(rows.values()), claim) is mean              # /metrics before nvidia-smi


def test_mean_row_of_long_series_over_runs_gets_a_verdict():
    rng = np.random.default_rng(5)
    def runs(level: float) -> list[GroupSample]:
        return [GroupSample(telemetry={"server.mem_bw_util_pct": level + rng.normal(0, 1.0, 120)})
                for _ in range(3)]
    rows = _rows(runs(41.0), runs(90.0))
    mean = rows["telemetry.server.mem_bw_util_pct.mean"]
    assert mean.test == "3 vs 3 runs: between-run t" and mean.verdict == "better"
    assert 47 < mean.ci_low < 49 < mean.ci_high < 51
    steady = _rows(runs(41.0), runs(41.0))["telemetry.server.mem_bw_util_pct.mean"]
    assert steady.verdict == "equivalent"          # within +-1 point


def test_a_group_without_telemetry_has_no_telemetry_rows():
    rows = _rows(GroupSample(ttft_ms=np.arange(1.0, 10.0)), GroupSample(ttft_ms=np.arange(2.0, 11.0)))
    assert rows and not any(m.startswith("telemetry.") for m in rows)


def test_load_run_reads_server_metrics_beside_the_cache(tmp_path):
    run = write_run(tmp_path, RunSpec("base", seed=3, n=20))
    assert load_run(run).telemetry == {}                   # no file: no telemetry (and the cache is written)
    samples = [{"t_s": 2.0, "server.mem_bw_util_pct": 42.0, "nvidia_smi.gpu_util_pct": 97.0},
               {"t_s": 1.0, "server.mem_bw_util_pct": 40.0}, {"t_s": 3.0, "server.mem_bw_util_pct": None}]
    (run / "server_metrics.json").write_text(json.dumps(samples))
    data = load_run(run)                                   # the cached table, the new file
    assert data.telemetry["server.mem_bw_util_pct"].tolist() == [40.0, 42.0]     # time order, numbers only
    assert data.telemetry["nvidia_smi.gpu_util_pct"].tolist() == [97.0]
    [group] = group_samples([data, data]).values()         # a side of two runs: their samples joined
    assert group.telemetry["server.mem_bw_util_pct"].tolist() == [40.0, 42.0, 40.0, 42.0]
    (run / "server_metrics.json").write_text("[{")
    with pytest.warns(RuntimeWarning, match="telemetry is left out"):
        assert read_telemetry(run) == {}


def test_the_direction_of_each_telemetry_row():
    from fourfold.reports.telemetry import better_of

    assert better_of("server.mem_bw_util_pct") == better_of("nvidia_smi.gpu_util_pct") == "higher"
    assert better_of("server.waiting") == better_of("server.kv_cache_usage_pct") == "lower"

"""fourfold#22 acceptance: an L1 run with --synthetic against the embedded simulator shows the
prefill cost in TTFT (input=128 vs input=2048, against the profile's ms per 1k tokens) and the
prefix-cache discount (prefix=1536); bad --synthetic / --tokenizer values stop before anything runs."""

from __future__ import annotations

import json
import statistics

import pytest

from fourfold.targets.sim.profile import load_profile
from tests.conftest import only_run_dir, read_jsonl, run_locust

pytestmark = pytest.mark.integration


def _l1(tmp_path, locustfile, name: str, spec: str, *extra: str):
    cwd = tmp_path / name
    cwd.mkdir()
    # baseline's prefill figures, without what would blur a 4 s run: cold starts, TTFT jitter, slow decode
    profile = cwd / "prefill.json"
    profile.write_text(json.dumps({"extends": "baseline", "cold_requests": 0, "ttft_jitter_ms": 0,
                                   "itl_ms": 2.0, "itl_jitter_ms": 0}))
    proc = run_locust(["-f", locustfile("l1_throughput.py"), "--headless", "-u", "1", "-r", "1", "-t", "4s",
                       "--sim-profile", str(profile), "--synthetic", spec, *extra], cwd, timeout=90)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    run = only_run_dir(cwd)
    records = [r for r in read_jsonl(run / "records.jsonl") if not r["warmup"] and r["error_class"] == "ok"]
    assert len(records) >= 8
    return records, json.loads((run / "summary.json").read_text()), proc.stdout + proc.stderr


@pytest.mark.timing
def test_ttft_grows_with_input_tokens_by_the_profiles_figure_and_a_shared_prefix_is_discounted(tmp_path,
                                                                                               locustfile):
    baseline = load_profile("baseline")
    per_token_ms = baseline.prefill_ms_per_1k_tokens / 1000
    short, summary, out = _l1(tmp_path, locustfile, "short", "input=128,output=8,n=400")
    long, _, _ = _l1(tmp_path, locustfile, "long", "input=2048,output=8,n=400")
    shared, _, _ = _l1(tmp_path, locustfile, "shared", "input=2048,output=8,n=400,prefix=1536")

    def p50(records):
        return statistics.median(r["ttft_ms"] for r in records)

    # every prompt was the asked length by the simulator's count (the estimate is its rule)
    assert {r["input_tokens"] for r in short} == {128} and {r["input_tokens"] for r in long} == {2048}
    assert {r["output_tokens"] for r in long} == {8}
    print(f"\nTTFT p50: input=128 {p50(short):.1f} ms, input=2048 {p50(long):.1f} ms, "
          f"input=2048 prefix=1536 {p50(shared):.1f} ms")
    expected_ms = per_token_ms * (2048 - 128)                                # 76.8 ms with baseline's 40
    assert abs((p50(long) - p50(short)) - expected_ms) <= 8.0
    # the simulator found the 1536-token prefix cached (the warm-up request put it there)
    assert {r["plan"]["cached_tokens"] for r in shared} == {1536}
    discount_ms = per_token_ms * baseline.prefix_cache_discount * 1536       # 55.3 ms
    assert abs((p50(long) - p50(shared)) - discount_ms) <= 8.0
    # the run says how its lengths were counted
    assert summary["token_counts"] == {"tokenizer": None, "synthetic": "input=128±0,output=8±0,n=400,seed=0",
                                       "synthetic_lengths": "estimate"}
    assert "(input lengths: estimate)" in out


@pytest.mark.parametrize(("args", "says"), [
    (["--synthetic", "input=abc"], "fourfold: error: --synthetic 'input=abc': input='abc' must be TOKENS"),
    (["--synthetic", "input=64", "--dataset-sample", "5"],
     "fourfold: error: --synthetic makes its own items"),
    (["--tokenizer", "no/such/dir"], "fourfold: error: --tokenizer "),
])
def test_bad_synthetic_or_tokenizer_is_one_line_and_exit_2(tmp_path, locustfile, args, says):
    proc = run_locust(["-f", locustfile("l1_throughput.py"), "--headless", "-u", "1", "-r", "1", "-t", "3s",
                       *args], tmp_path, timeout=60)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out[-2000:]
    assert says in out and "Traceback" not in out
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())

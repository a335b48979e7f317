"""locustfiles/embeddings.py through real locust processes against the embedded simulator: the batch
ladder's scenarios, the inputs each request sent and got back, the embed block, and latency that grows
with the batch size as the profile says (docs/embeddings.md)."""

from __future__ import annotations

import csv
import json

import pytest

from fourfold.cli import main
from tests.conftest import only_run_dir, read_jsonl, run_distributed, run_locust

pytestmark = pytest.mark.integration


def _profile(tmp_path) -> str:
    path = tmp_path / "embed.json"      # 5 ms + 3 ms per input: b1 8 ms, b16 53 ms
    path.write_text(json.dumps({"extends": "flat", "embed_ms": 5, "embed_ms_per_input": 3,
                                "embed_ms_per_1k_tokens": 0}))
    return str(path)


def _run(tmp_path, locustfile, *args: str) -> tuple[dict, list[dict], str]:
    proc = run_locust(["-f", locustfile("embeddings.py"), "--headless", "-u", "2", "-r", "2", "-t", "4s",
                       "--sim-profile", _profile(tmp_path), *args], tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    run = only_run_dir(tmp_path)
    records = [r for r in read_jsonl(run / "records.jsonl")
               if not r["warmup"] and r["error_class"] != "cancelled"]
    return json.loads((run / "summary.json").read_text()), records, out


def test_embeddings_by_batch_size_against_the_simulator(tmp_path, locustfile):
    summary, records, out = _run(tmp_path, locustfile, "--embed-batch", "1,16")
    assert "Embeddings / rerank by batch size:" in out
    assert {r["scenario"] for r in records} == {"embeddings@b1", "embeddings@b16"}
    assert all(r["error_class"] == "ok" and r["ttft_ms"] is None and r["endpoint"] == "/v1/embeddings"
               for r in records)
    for r in records:                                   # one vector per input, the usage's input tokens
        batch = int(r["scenario"].rsplit("@b", 1)[1])
        assert r["extra"]["inputs"] == r["extra"]["outputs"] == batch and r["extra"]["dims"] == 384
        assert r["input_tokens"] >= batch
    groups = {g["scenario"]: g for g in summary["groups"]}
    block = summary["embed"]
    for scenario, batch in (("embeddings@b1", 1), ("embeddings@b16", 16)):
        mine = [r for r in records if r["scenario"] == scenario]
        assert block[scenario]["requests"] == groups[scenario]["requests"] == len(mine) > 10
        assert block[scenario]["inputs_per_request"] == batch
        assert block[scenario]["inputs_total"] == batch * len(mine)
        assert block[scenario]["inputs_per_s"] == pytest.approx(batch * block[scenario]["request_rps"])
        assert block[scenario]["input_tokens_total"] == sum(r["input_tokens"] for r in mine)
    b1, b16 = groups["embeddings@b1"]["e2e_ms"]["p50"], groups["embeddings@b16"]["e2e_ms"]["p50"]
    assert b1 >= 8 and b16 >= 53 and b16 > b1 + 30      # the profile's 3 ms per input
    assert summary["total"]["failures"] == 0
    # the report: inputs/s and input tokens/s per batch size (as the embed block has them), no output tokens/s
    run = only_run_dir(tmp_path)
    assert main(["compare", str(run), str(run), "--out", str(tmp_path / "out"), "--no-plots"]) == 0
    with open(tmp_path / "out" / "report.csv", newline="", encoding="utf-8") as fh:
        rows = [row for row in csv.DictReader(fh)]
    for scenario in ("embeddings@b1", "embeddings@b16"):
        mine = {row["metric"]: row for row in rows if row["group"] == f"embed:{scenario}"}
        assert "output_tps" not in mine and "ttft_p50" not in mine
        assert float(mine["inputs_per_s"]["baseline_value"]) == pytest.approx(block[scenario]["inputs_per_s"],
                                                                             rel=0.05)
        assert float(mine["input_tokens_per_s"]["baseline_value"]) == pytest.approx(
            block[scenario]["input_tokens_per_s"], rel=0.05)


def test_cohere_rerank_holds_each_batch_size_for_its_step(tmp_path, locustfile):
    summary, records, _ = _run(tmp_path, locustfile, "--embed-kind", "rerank-cohere", "--embed-batch", "2,5",
                               "--embed-step-s", "2")
    assert all(r["endpoint"] == "/v2/rerank" and r["error_class"] == "ok" for r in records)
    for r in records:
        batch = int(r["scenario"].rsplit("@b", 1)[1])
        assert r["extra"]["inputs"] == r["extra"]["outputs"] == batch and r["extra"]["max_index"] < batch
        assert r["input_tokens"] is None          # Cohere's billed search units are no token count
    assert set(summary["embed"]) == {"rerank-cohere@b2", "rerank-cohere@b5"}
    assert summary["embed"]["rerank-cohere@b5"]["inputs_per_request"] == 5
    for user in {r["user_id"] for r in records}:   # each user: 2 s of b2, then b5 to the end
        mine = [r for r in records if r["user_id"] == user]
        assert max(r["started_at"] for r in mine if r["scenario"] == "rerank-cohere@b2") \
            < min(r["started_at"] for r in mine if r["scenario"] == "rerank-cohere@b5")


def test_a_worker_sends_the_master_s_batch_sizes_and_the_master_keeps_the_block(tmp_path, locustfile):
    run_distributed(["-f", locustfile("embeddings.py"), "--sim-profile", _profile(tmp_path)],
                    ["-u", "2", "-r", "2", "-t", "3s", "--embed-batch", "2,6"], tmp_path, workers=1)
    run = only_run_dir(tmp_path)
    summary = json.loads((run / "summary.json").read_text())
    records = [r for r in read_jsonl(run / "records.jsonl") if not r["warmup"] and r["error_class"] == "ok"]
    assert {r["scenario"] for r in records} == {"embeddings@b2", "embeddings@b6"}   # not the defaults
    assert json.loads((run / "meta.json").read_text())["embed"]["batches"] == [2, 6]
    for scenario, batch in (("embeddings@b2", 2), ("embeddings@b6", 6)):
        ok = [r for r in records if r["scenario"] == scenario]
        assert summary["embed"][scenario]["ok"] == len(ok) > 5
        assert summary["embed"][scenario]["inputs_total"] == batch * len(ok)

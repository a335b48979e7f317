"""Several tokens an event (speculative decoding, a stream interval): the simulator sends 4 tokens in one
event 40 ms apart; the records say so, per-token ITL is the profile's 10 ms while per-chunk ITL is 40 ms,
the server's count is 4 per delta (a discrepancy without --tokenizer), and the comparison with a version
that sends one token an event shows the per-token rows moving with neither ITL difference hidden."""

from __future__ import annotations

import csv
import json

import pytest

from fourfold.cli import main
from tests.conftest import only_run_dir, read_jsonl, run_locust

pytestmark = pytest.mark.integration


def _run(base, locustfile, tokens_per_event: int):
    base.mkdir()
    profile = base / "profile.json"
    profile.write_text(json.dumps({"extends": "flat", "tokens_per_event": tokens_per_event}))
    proc = run_locust(["-f", locustfile("l1_throughput.py"), "--headless", "-u", "2", "-r", "2", "-t", "4s",
                       "--sim-profile", str(profile), "--max-tokens", "60", "--warmup-requests", "0"], base)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    return only_run_dir(base)


def test_four_tokens_an_event_are_timed_per_token_and_counted_apart(tmp_path, locustfile, capsys):
    spec = _run(tmp_path / "spec", locustfile, 4)
    plain = _run(tmp_path / "plain", locustfile, 1)
    records = [r for r in read_jsonl(spec / "records.jsonl") if r["error_class"] != "cancelled"]
    assert records
    for r in records:
        assert r["output_tokens"] == 60 and r["output_tokens_source"] == "usage"
        assert r["client_output_tokens"] == 15                  # 15 deltas of 4 tokens
        assert r["multi_token_chunks"] == r["content_chunks"] <= 15     # each carried 4 (more: merged reads)
    group = json.loads((spec / "summary.json").read_text())["groups"][0]
    assert group["itl_ms"]["p50"] == pytest.approx(40, abs=4)          # a chunk every 4 x 10 ms ...
    assert group["itl_token_ms"]["p50"] == pytest.approx(10, abs=1.5)  # ... 10 ms a token
    assert group["multi_token_chunk_share"] > 0.9
    assert group["token_discrepancy_share"] == 1.0 and group["token_count_ratio"] == pytest.approx(4)
    flat = json.loads((plain / "summary.json").read_text())["groups"][0]
    assert flat["token_discrepancy_share"] == 0.0
    assert flat["itl_token_ms"]["p50"] == pytest.approx(10, abs=1.5)

    assert main(["compare", str(plain), str(spec), "--out", str(tmp_path / "out"), "--no-plots"]) == 0
    with open(tmp_path / "out" / "report.csv", newline="", encoding="utf-8") as fh:
        rows = {row["metric"]: row for row in csv.DictReader(fh)}
    assert float(rows["itl_p50"]["candidate_value"]) > 3 * float(rows["itl_p50"]["baseline_value"])
    token_p50 = [float(rows["itl_token_p50"][f"{side}_value"]) for side in ("baseline", "candidate")]
    assert abs(token_p50[1] - token_p50[0]) < 2
    assert float(rows["token_discrepancy_share"]["candidate_value"]) == 100.0
    assert "ITL p50 per token" in (tmp_path / "out" / "report.md").read_text()
    capsys.readouterr()

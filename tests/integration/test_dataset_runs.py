"""Real locust runs on the dataset formats: a ShareGPT run against the embedded simulator whose
references `fourfold score` finds through meta.json, and malformed files stopped at init (one line,
exit 2, no run directory)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from fourfold.data import DATA_DIR
from fourfold.fingerprint.runscore import score_run
from fourfold.reports.load import prompt_kinds
from fourfold.workloads.formats import load_dataset
from tests.conftest import only_run_dir, read_jsonl, run_locust

pytestmark = pytest.mark.integration
SAMPLES = DATA_DIR / "datasets"


class WordCounts:
    """A stand-in embedder (bag of words): the test is about finding references, not about the model."""

    def encode(self, texts):
        words = ("the", "a", "is", "of", "and", "to", "in", "it")
        return np.array([[t.lower().split().count(w) for w in words] for t in texts], dtype=np.float32) + 1e-3


def test_an_l1_run_on_the_sharegpt_sample_is_scored_against_its_references(tmp_path: Path,
                                                                           locustfile) -> None:
    proc = run_locust(["-f", locustfile("l1_throughput.py"), "--headless", "-u", "2", "-r", "2", "-t", "4s",
                       "--metrics-url", "off", "--max-tokens", "12", "--sim-profile", "flat",
                       "--dataset", str(SAMPLES / "sharegpt_sample.json"), "--dataset-format", "sharegpt"],
                      tmp_path, timeout=90)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = only_run_dir(tmp_path)
    settings = json.loads((run / "meta.json").read_text())["settings"]
    assert (settings["dataset"], settings["dataset_format"]) == \
        (str(SAMPLES / "sharegpt_sample.json"), "sharegpt")
    records = [r for r in read_jsonl(run / "records.jsonl") if not r["warmup"]]
    ids = {item.id for item in load_dataset(SAMPLES / "sharegpt_sample.json").items}
    assert len(records) >= 4 and {r["item_id"] for r in records} <= ids
    result = score_run(run, WordCounts(), progress=False)
    ok = sum(1 for r in records if r["error_class"] == "ok" and r["text"].strip())
    assert result.quality["total"]["n"] == ok and "unknown_item" not in result.skipped
    rows = read_jsonl(run / "scores.jsonl")
    # every answer had a reference
    assert len(rows) == ok and all(row["similarity"] is not None for row in rows)
    assert set(prompt_kinds(run, settings)) == ids  # what `fourfold compare` reads


def _parquet_with(tmp: Path, columns: dict[str, list]) -> str:
    import fastparquet
    import pandas as pd

    path = tmp / "d.parquet"
    fastparquet.write(str(path), pd.DataFrame(columns), write_index=False)
    return str(path)


# the dataset (a callable makes it in the run's directory and returns its path), extra options, the line
RUNS = [
    (lambda tmp: _parquet_with(tmp, {"question": ["q"], "answer": ["a"]}),
     ["--dataset-column", "prompt=quest"],
     "{path}: --dataset-column prompt=quest: no column 'quest'; the file has: 'question', 'answer'"),
    (lambda tmp: (tmp / "d.parquet").write_bytes(b"PAR1 broken") and str(tmp / "d.parquet"), [],
     "{path}: not a readable Parquet file"),
    (lambda tmp: (tmp / "b.jsonl").write_text('{"custom_id": "r1", "body": {"messages": []}}\n')
     and str(tmp / "b.jsonl"),
     [], "{path}:1: 'body.messages' must be a non-empty list of {{role, content}}, got a list"),
    (lambda tmp: (tmp / "o.jsonl").write_text('{"messages": [{"role": "user", "content": "q"}]}\n')
     and str(tmp / "o.jsonl"),
     ["--dataset-column", "answer=x"],
     "--dataset-column answer=...: 'answer' is not an item field; expected one of: prompt, reference, id, "
     "max_tokens, system"),
]


@pytest.mark.parametrize(("make", "args", "line"), RUNS,
                         ids=["bad column", "unreadable parquet", "batch messages", "bad column option"])
def test_a_malformed_dataset_stops_the_run_before_it_starts(tmp_path: Path, locustfile, make, args,
                                                            line) -> None:
    path = make(tmp_path)
    proc = run_locust(["-f", locustfile("l1_throughput.py"), "--headless", "-u", "1", "-r", "1", "-t", "30s",
                       "--metrics-url", "off", "--dataset", path, *args], tmp_path, timeout=60)
    lines = [x for x in proc.stderr.splitlines() if "locust.main: Starting Locust" not in x]
    expected = line.format(path=path)
    assert proc.returncode == 2 and proc.stdout == "" and len(lines) == 1, proc.stderr[-2000:]
    if expected.endswith("Parquet file"):
        assert lines[0].startswith(f"fourfold: error: {expected} (")
    else:
        assert lines == [f"fourfold: error: {expected}"]
    assert not (tmp_path / "runs").exists()

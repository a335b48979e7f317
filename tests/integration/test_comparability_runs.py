"""Real L1 runs against the embedded simulator: meta.json's dataset hash is that of the items sent
(checked against the file the test wrote and the records' item ids), the same for the bundled
prompts sent in another seeded order, another for a user's file; and `differences()` over the
metas reports the other dataset as a difference in what was sent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fourfold.data import DATA_DIR
from fourfold.reports.comparability import MetaDifference, differences
from fourfold.rundir.provenance import items_sha256
from fourfold.workloads.formats import load_items_as
from fourfold.workloads.items import Item
from tests.conftest import only_run_dir, read_jsonl, run_locust

pytestmark = pytest.mark.integration
MINE = [{"id": f"m{n}", "prompt": f"Name {n} colours of the sea.", "reference": "Blue, green and grey."}
        for n in range(1, 6)]


def l1_run(cwd: Path, locustfile, *args: str) -> tuple[dict, list[dict]]:
    """A short headless L1 run in ``cwd``: its meta.json and its measured records."""
    cwd.mkdir()
    proc = run_locust(["-f", locustfile("l1_throughput.py"), "--headless", "-u", "2", "-r", "2", "-t", "3s",
                       "--metrics-url", "off", "--max-tokens", "8", "--sim-profile", "flat", *args],
                      cwd, timeout=90)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = only_run_dir(cwd)
    records = [r for r in read_jsonl(run / "records.jsonl") if not r["warmup"]]
    assert records, proc.stderr[-3000:]
    return json.loads((run / "meta.json").read_text()), records


def test_the_dataset_hash_tells_datasets_apart_and_ignores_the_order(tmp_path: Path, locustfile) -> None:
    mine = tmp_path / "mine.jsonl"
    mine.write_text("".join(json.dumps(row) + "\n" for row in MINE))
    bundled, _ = l1_run(tmp_path / "a", locustfile, "--shuffle", "--seed", "1")
    reordered, _ = l1_run(tmp_path / "b", locustfile, "--shuffle", "--seed", "2", "--dataset-sample", "1000")
    theirs, records = l1_run(tmp_path / "c", locustfile, "--dataset", str(mine))

    prompts = load_items_as(DATA_DIR / "prompts" / "prompts.jsonl")
    assert (bundled["dataset_name"], bundled["dataset_items"]) == ("prompts.jsonl", len(prompts))
    assert bundled["dataset_sha256"] == items_sha256(prompts)
    assert reordered["dataset_sha256"] == bundled["dataset_sha256"]          # another seed, the same items
    assert theirs["dataset_sha256"] == items_sha256([Item.from_dict(row) for row in MINE])
    assert (theirs["dataset_name"], theirs["dataset_items"]) == ("mine.jsonl", len(MINE))
    assert {r["item_id"] for r in records} <= {row["id"] for row in MINE}   # the items hashed are those sent
    for meta in (bundled, theirs):
        assert meta["scenarios"] == ["saturation"]
        assert meta["client"]["cpu_count"] >= 1 and meta["client"]["hostname"]

    found = differences([bundled], [theirs])
    sent = [d for d in found if d.kind == "sent"]
    assert sent == [MetaDifference("dataset", "sent",
                                   f"sha256 {bundled['dataset_sha256'][:8]}… of prompts.jsonl",
                                   f"sha256 {theirs['dataset_sha256'][:8]}… of mine.jsonl")]
    assert [d for d in differences([bundled], [reordered]) if d.kind == "sent"] == []
    assert [d.field for d in differences([bundled, theirs], [reordered])] == ["dataset"]   # within a side too

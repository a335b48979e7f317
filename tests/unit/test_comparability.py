"""Comparability of a comparison's sides (fourfold.reports.comparability) and the dataset hash and
client facts meta.json carries for it (fourfold.rundir.provenance)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from fourfold.data import DATA_DIR
from fourfold.reports.comparability import MetaDifference, differences, render_lines, too_few_requests
from fourfold.rundir.provenance import client_facts, cpu_model, dataset_facts, items_sha256
from fourfold.workloads.formats import load_items_as
from fourfold.workloads.items import Item
from fourfold.workloads.sampling import sample

HASH_A, HASH_B = "1a2b3c4d" + "0" * 56, "9f8e7d6c" + "1" * 56

# a meta.json as an L1 run against the embedded simulator writes it (the fields comparability reads)
META: dict[str, Any] = {
    "level": "l1", "target": "http://127.0.0.1:40001", "dialect": "openai", "model": "fourfold-sim",
    "settings": {"max_tokens": None, "stream": True, "ignore_eos": False, "no_ignore_eos": False},
    "locust": {"users": 16, "spawn_rate": 16.0, "run_time": 40, "distributed": False},
    "versions": {"python": "3.11.7", "platform": "Linux-6.1-x86_64", "fourfold": "0.1.0"},
    "embedded_target": {"profile": "baseline", "seed": 1},
    "dataset_name": "prompts.jsonl", "dataset_items": 46, "dataset_sha256": HASH_A,
    "scenarios": ["saturation"],
    "client": {"hostname": "vm", "platform": "Linux-6.1-x86_64", "machine": "x86_64", "cpu_model": "AMD EPYC",
               "cpu_count": 2, "python": "3.11.7"},
}
OPEN_LOOP = {**META, "level": "l2", "scenarios": ["open"],
             "l2": {"arrivals": {"kind": "poisson", "rate_rps": 10.0, "burstiness": 1.0}, "think_time_s": 0.0,
                    "open_loop": True}}


def meta(base: dict[str, Any] = META, **changes: Any) -> dict[str, Any]:
    """A copy of ``base`` with ``changes``: ``a__b=v`` sets meta["a"]["b"]; the value ``...`` deletes."""
    out = copy.deepcopy(base)
    for key, value in changes.items():
        *path, last = key.split("__")
        node = out
        for part in path:
            node = node.setdefault(part, {})
        if value is ...:
            node.pop(last, None)
        else:
            node[last] = value
    return out


# id, baseline metas, candidate metas, the differences
CASES = [
    ("identical", [META], [META], []),
    ("another seed of the embedded simulator is setup", [META], [meta(embedded_target__seed=2)],
     [MetaDifference("target", "setup", "embedded simulator (profile baseline, seed 1)",
                 "embedded simulator (profile baseline, seed 2)")]),
    ("an embedded target's port is no difference", [META], [meta(target="http://127.0.0.1:40999")], []),
    ("another dataset", [META], [meta(dataset_sha256=HASH_B, dataset_name="mine.jsonl")],
     [MetaDifference("dataset", "sent", "sha256 1a2b3c4d… of prompts.jsonl",
                     "sha256 9f8e7d6c… of mine.jsonl")]),
    ("the same items under another file name", [META], [meta(dataset_name="copy.jsonl")], []),
    ("max tokens", [META], [meta(settings__max_tokens=64)],
     [MetaDifference("max tokens", "sent", "the items' own", "64")]),
    ("users and duration", [META], [meta(locust__users=32, locust__run_time=60)],
     [MetaDifference("users", "sent", "16", "32"), MetaDifference("duration", "sent", "40", "60")]),
    ("streaming and ignore-EOS", [META], [meta(settings__stream=False, settings__ignore_eos=True)],
     [MetaDifference("streaming", "sent", "on", "off"),
      MetaDifference("ignore EOS", "sent", "default", "forced")]),
    ("level, scenario and dialect", [META], [meta(level="l3", scenarios=["rag"], dialect="rag")],
     [MetaDifference("level", "sent", "l1", "l3"), MetaDifference("scenarios", "sent", "saturation", "rag"),
      MetaDifference("dialect", "sent", "openai", "rag")]),
    ("model", [META], [meta(model="llama-3-8b")],
     [MetaDifference("model", "sent", "fourfold-sim", "llama-3-8b")]),
    ("endpoint of a RAG service", [meta(rag={"wire": {"path": "/v1/rag"}})],
     [meta(rag={"wire": {"path": "/ask"}})], [MetaDifference("endpoint", "sent", "/v1/rag", "/ask")]),
    ("arrival rate and process (open loop)", [OPEN_LOOP],
     [meta(OPEN_LOOP, l2__arrivals={"kind": "gamma", "rate_rps": 20.0, "burstiness": 0.5})],
     [MetaDifference("arrival process", "sent", "poisson", "gamma (burstiness 0.5)"),
      MetaDifference("arrival rate", "sent", "10", "20")]),
    ("open loop: -u is no workload", [OPEN_LOOP], [meta(OPEN_LOOP, locust__users=4)], []),
    ("two external targets", [meta(embedded_target=..., target="http://a:8000")],
     [meta(embedded_target=..., target="http://b:8000")],
     [MetaDifference("target", "setup", "http://a:8000", "http://b:8000")]),
    ("fourfold version and client machine", [META],
     [meta(versions__fourfold="0.2.0", client__hostname="ci-7", client__cpu_count=16)],
     [MetaDifference("fourfold version", "setup", "0.1.0", "0.2.0"),
      MetaDifference("client hostname", "setup", "vm", "ci-7"),
      MetaDifference("client CPU count", "setup", "2", "16")]),
    ("runs within a side differ", [META, meta(locust__users=8)], [META, META],
     [MetaDifference("users", "sent", "{16, 8}", "16")]),
    ("both sides vary alike: still reported", [META, meta(dataset_sha256=HASH_B)],
     [meta(dataset_sha256=HASH_B), META],
     [MetaDifference("dataset", "sent",
                     "{sha256 1a2b3c4d… of prompts.jsonl, sha256 9f8e7d6c… of prompts.jsonl}",
                     "{sha256 9f8e7d6c… of prompts.jsonl, sha256 1a2b3c4d… of prompts.jsonl}")]),
    ("an older meta without the new fields: skipped", [META],
     [meta(dataset_sha256=..., dataset_name=..., client=..., scenarios=...)], []),
    ("an older meta on one run of a side: the others count", [META, meta(dataset_sha256=...)],
     [meta(dataset_sha256=HASH_B)],
     [MetaDifference("dataset", "sent", "sha256 1a2b3c4d… of prompts.jsonl",
                 "sha256 9f8e7d6c… of prompts.jsonl")]),
    ("older client facts under versions", [meta(client=...)],
     [meta(client=..., versions__python="3.12.1")],
     [MetaDifference("client Python", "setup", "3.11.7", "3.12.1")]),
    ("a side with no runs", [], [META], []),
]


@pytest.mark.parametrize(("baseline", "candidate", "expected"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_differences(baseline: list[dict], candidate: list[dict], expected: list[MetaDifference]) -> None:
    assert differences(baseline, candidate) == expected


@pytest.mark.parametrize(("diffs", "lines"), [
    ([], []),
    ([MetaDifference("dataset", "sent", "sha256 1a2b3c4d… of prompts.jsonl",
                     "sha256 9f8e7d6c… of mine.jsonl")],
     ["warning: the sides sent different workloads: dataset (baseline sha256 1a2b3c4d… of prompts.jsonl, "
      "candidate sha256 9f8e7d6c… of mine.jsonl)"]),
    ([MetaDifference("target", "setup", "http://a", "http://b")],
     ["note: the sides ran on different setups: target (baseline http://a, candidate http://b)"]),
    ([MetaDifference("fourfold version", "setup", "0.1.0", "0.2.0"),
      MetaDifference("users", "sent", "{16, 8}", "16"), MetaDifference("model", "sent", "m1", "m2")],
     ["warning: the sides sent different workloads: users (baseline {16, 8}, candidate 16); "
      "model (baseline m1, candidate m2)",
      "note: the sides ran on different setups: fourfold version (baseline 0.1.0, candidate 0.2.0)"]),
], ids=["none", "dataset", "setup only", "both kinds, sent first"])
def test_render_lines(diffs: list[MetaDifference], lines: list[str]) -> None:
    assert render_lines(diffs) == lines


@pytest.mark.parametrize(("label", "n", "minimum", "line"), [
    ("baseline", 4, 30, "warning: baseline has 4 requests, fewer than 30: too few for a verdict"),
    ("candidate l1:saturation", 1, 30,
     "warning: candidate l1:saturation has 1 request, fewer than 30: too few for a verdict"),
    ("baseline", 0, 30, "warning: baseline has 0 requests, fewer than 30: too few for a verdict"),
    ("baseline", 30, 30, None),
    ("TTFT p99", 96, 100, "warning: TTFT p99 has 96 requests, fewer than 100: too few for a verdict"),
])
def test_too_few_requests(label: str, n: int, minimum: int, line: str | None) -> None:
    assert too_few_requests(label, n, minimum) == line


# ---- the writer's side: the dataset hash and the client block ----
def item(item_id: str, prompt: str, **fields: Any) -> Item:
    return Item.from_dict({"id": item_id, "prompt": prompt, **fields})


BUNDLED = load_items_as(DATA_DIR / "prompts" / "prompts.jsonl")


@pytest.mark.parametrize(("left", "right", "same"), [
    ([item("a", "x"), item("b", "y")], [item("b", "y"), item("a", "x")], True),            # order
    ([item("a", "x")], [item("a", "x")], True),
    ([item("a", "x")], [item("a", "x ")], False),                                          # the text
    ([item("a", "x")], [item("b", "x")], False),                                           # the id
    ([item("a", "x")], [item("a", "x", max_tokens=8)], False),
    ([item("a", "x")], [item("a", "x", reference="r")], False),
    ([item("a", "x")], [item("a", "x"), item("a", "x")], False),                           # duplicates
    ([item("a", "x", topic="t")], [item("a", "x", topic="u")], False),                     # an extra field
    ([item("a", "x", k={"b": 1, "a": 2})], [item("a", "x", k={"a": 2, "b": 1})], True),    # key order
    (BUNDLED, sample(BUNDLED, len(BUNDLED), seed=1), True),                                # a seeded order
    (sample(BUNDLED, 10, seed=1), sample(BUNDLED, 10, seed=2), False),                     # other items
], ids=["order", "equal", "text", "id", "max_tokens", "reference", "duplicate", "extra field", "key order",
        "sampled in a seeded order", "a sample of other items"])
def test_items_sha256_is_the_set_of_items(left: list[Item], right: list[Item], same: bool) -> None:
    assert (items_sha256(left) == items_sha256(right)) is same


def test_the_same_file_read_twice_has_the_same_hash(tmp_path: Path) -> None:
    copy_path = tmp_path / "copy.jsonl"
    copy_path.write_bytes((DATA_DIR / "prompts" / "prompts.jsonl").read_bytes())
    assert items_sha256(load_items_as(copy_path)) == items_sha256(BUNDLED)
    facts = dataset_facts({"prompts.jsonl": BUNDLED})
    assert facts == {"dataset_name": "prompts.jsonl", "dataset_items": len(BUNDLED),
                     "dataset_sha256": items_sha256(BUNDLED), "dataset_cache_hit_share": None}
    assert len(facts["dataset_sha256"]) == 64


def test_client_facts(tmp_path: Path) -> None:
    facts = client_facts()
    assert set(facts) == {"hostname", "platform", "machine", "cpu_model", "cpu_count", "python"}
    assert facts["hostname"] and facts["cpu_count"] >= 1 and facts["python"].count(".") == 2
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD  EPYC 7B13\n")
    assert cpu_model(cpuinfo) == "AMD EPYC 7B13"
    assert cpu_model(tmp_path / "missing")          # platform's word for it, never an error

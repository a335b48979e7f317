"""The prefix-cache share a workload was built for (workloads.cacheplan): synthetic prefixes and trace
block ids, checked by hand; meta.json keeps it and the report shows it beside the measured share."""

from __future__ import annotations

import pytest

from fourfold.rundir.provenance import dataset_facts
from fourfold.workloads.cacheplan import planned_cache_hit_share
from fourfold.workloads.items import Item
from fourfold.workloads.synthetic import make_items, parse_synthetic
from fourfold.workloads.trace import entry_from_dict, entry_item


def test_a_synthetic_prefix_is_found_by_every_prompt_after_the_first():
    items = make_items(parse_synthetic("input=100,output=10,n=5,seed=1,prefix=40"))
    assert planned_cache_hit_share(items) == pytest.approx(4 * 40 / 500)
    assert planned_cache_hit_share(make_items(parse_synthetic("input=100,output=10,n=5,seed=1"))) == 0.0


def trace(*lines: dict) -> list[Item]:
    return [entry_item(entry_from_dict(line, i + 1)) for i, line in enumerate(lines)]


def test_a_trace_finds_the_leading_blocks_an_earlier_entry_carried():
    items = trace({"timestamp": 0, "input_length": 1200, "hash_ids": [1, 2, 3]},
                  {"timestamp": 5, "input_length": 1100, "hash_ids": [1, 2, 4]},     # 1024 found
                  {"timestamp": 9, "input_length": 700, "hash_ids": [5, 2]},         # 2 is not leading
                  {"timestamp": 12, "input_length": 300, "hash_ids": [1]})           # the whole 300
    assert planned_cache_hit_share(items) == pytest.approx((1024 + 300) / 3300)


@pytest.mark.parametrize("items", [
    [],
    [Item(id="a", messages=({"role": "user", "content": "hi"},))],
    trace({"timestamp": 0, "input_length": 10}, {"timestamp": 1, "input_length": 10}),   # no ids: no plan
])
def test_other_datasets_plan_no_share(items):
    assert planned_cache_hit_share(items) is None


def test_meta_json_keeps_the_plan():
    items = make_items(parse_synthetic("input=100,output=10,n=4,seed=1,prefix=50"))
    assert dataset_facts({"synthetic": items})["dataset_cache_hit_share"] == pytest.approx(0.375)

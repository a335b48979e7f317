"""`fourfold dataset inspect` and `fourfold dataset convert`: exact output, round trip, one-line errors
(exit 2)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from fourfold.cli import main
from fourfold.data import DATA_DIR
from fourfold.errors import DatasetError
from fourfold.workloads.formats import load_dataset

SAMPLES = DATA_DIR / "datasets"
SHAREGPT = [
    {"id": "c1",
     "conversations": [{"from": "system", "value": "Be brief."}, {"from": "human", "value": "Name a colour."},
                       {"from": "gpt", "value": "Blue."}, {"from": "human", "value": "Another?"},
                       {"from": "gpt", "value": "Red, or green, or yellow."}]},
    {"conversations": [{"from": "human", "value": "Count to three, please."},
                       {"from": "gpt", "value": "1, 2, 3."}]},
    {"id": "c3", "conversations": [{"from": "human", "value": "Hello"}]},
    {"id": "c4", "conversations": [{"from": "human", "value": "Is this the fourth item?"},
                                   {"from": "gpt", "value": "Yes."}]},
]


def test_inspect_prints_format_counts_lengths_and_three_examples(tmp_path: Path, capsys) -> None:
    path = tmp_path / "chats.json"
    path.write_text(json.dumps(SHAREGPT))
    assert main(["dataset", "inspect", str(path)]) == 0
    assert capsys.readouterr().out == f"""{path}
format:     sharegpt (a JSON array)
items:      4
references: 3 of 4
multi-turn: 1 (whole conversations kept in meta['turns'])
tokens (estimated: a word or a punctuation mark is one token; --tokenizer for exact counts):
  input   min 1  p50 6  p95 7  max 7  (4 items)
  output  min 2  p50 2  p95 6  max 6  (3 items)

first 3 items:
  [c1]
    system:    Be brief.
    prompt:    Name a colour.
    reference: Blue.
  [sharegpt-2]
    prompt:    Count to three, please.
    reference: 1, 2, 3.
  [c3]
    prompt:    Hello
"""


def test_inspect_json_and_a_column_mapped_csv(tmp_path: Path, capsys) -> None:
    path = tmp_path / "qa.csv"
    path.write_text("q,a,budget\nWhat is two and two?,Four.,16\nAnd three and three?,Six.,\n")
    assert main(["dataset", "inspect", str(path), "--dataset-column",
                 "prompt=q,reference=a,max_tokens=budget", "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert (found["format"], found["container"], found["items"], found["with_reference"]) == \
        ("csv", "csv", 2, 2)
    assert found["columns"] == [["prompt", "q"], ["reference", "a"], ["max_tokens", "budget"]]
    assert found["input_tokens"] == {"n": 2, "min": 5, "p50": 5, "p95": 6, "max": 6}
    # max_tokens, else the reference
    assert found["output_tokens"] == {"n": 2, "min": 2, "p50": 2, "p95": 16, "max": 16}
    assert found["examples"][0] == {"id": "csv-1", "prompt": "What is two and two?", "reference": "Four.",
                                    "max_tokens": 16}


@pytest.mark.parametrize("sample", ["sharegpt_sample.json", "sharegpt_sample.parquet", "openai_sample.jsonl"])
def test_convert_writes_fourfold_jsonl_that_reads_back_the_same(tmp_path: Path, capsys, sample: str) -> None:
    out = tmp_path / "out.jsonl"
    assert main(["dataset", "convert", str(SAMPLES / sample), "--to", "jsonl", "--out", str(out)]) == 0
    assert capsys.readouterr().err.startswith(f"wrote {out}: 40 items as fourfold JSONL (")
    again = load_dataset(out)
    assert again.format == "fourfold" and again.items == load_dataset(SAMPLES / sample).items


def test_convert_by_default_writes_next_to_the_input_and_never_over_it(tmp_path: Path, capsys) -> None:
    path = tmp_path / "chats.json"
    path.write_text(json.dumps(SHAREGPT))
    assert main(["dataset", "convert", str(path), "--to", "jsonl"]) == 0
    assert [json.loads(line)["id"]
            for line in (tmp_path / "chats.fourfold.jsonl").read_text().splitlines()] == [
        "c1", "sharegpt-2", "c3", "c4"]
    assert main(["dataset", "convert", str(path), "--to", "jsonl", "--out", str(path)]) == 2
    assert capsys.readouterr().err.splitlines()[-1] == (f"fourfold: error: --out {path}: that is the input "
                                                        "file; choose another name")
    assert main(["dataset", "convert", str(path), "--to", "jsonl", "--out", "-"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 4


@pytest.mark.parametrize(("args", "line"), [
    (["inspect", "{path}"], "{path}:2: 'conversations' has no human turn (the prompt)"),
    (["inspect", "{path}", "--dataset-format", "openai"], "{path}:1: 'messages' must be a non-empty list of "
                                                          "{{role, content}}, got null"),
    (["convert", "{path}", "--to", "jsonl", "--dataset-column", "prompt"],
     "--dataset-column 'prompt': expected FIELD=COLUMN, e.g. 'prompt=question,reference=answer'"),
    (["inspect", "{missing}"], "{missing}: no such file"),
])
def test_a_bad_file_or_option_is_one_line_and_exit_2(tmp_path: Path, capsys, args: list[str],
                                                     line: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(SHAREGPT[0]) + "\n"
                    + json.dumps({"conversations": [{"from": "gpt", "value": "x"}]})
                    + "\n")
    names = {"path": path, "missing": tmp_path / "none.json"}
    assert main(["dataset", *[a.format(**names) for a in args]]) == 2
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("", f"fourfold: error: {line.format(**names)}\n")
    assert not (tmp_path / "bad.fourfold.jsonl").exists()


@pytest.mark.parametrize("kind", ["fifo", "symlink", "directory"])
def test_convert_never_replaces_what_is_not_a_regular_file(tmp_path: Path, capsys, kind: str) -> None:
    """A rename over --out used to replace a FIFO, a symlink or (as root) a device node."""
    import os

    source = tmp_path / "chats.json"
    source.write_text(json.dumps(SHAREGPT))
    out, target = tmp_path / "out.jsonl", tmp_path / "elsewhere.txt"
    target.write_text("keep me")
    make = {"fifo": lambda: os.mkfifo(out), "symlink": lambda: out.symlink_to(target), "directory": out.mkdir}
    make[kind]()
    before = os.lstat(out)
    assert main(["dataset", "convert", str(source), "--to", "jsonl", "--out", str(out)]) == 2
    what = {"fifo": "a FIFO", "symlink": "a symbolic link", "directory": "a directory"}[kind]
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"fourfold: error: --out {out}: is {what}; the output is written only to a regular file or a new "
        "name")
    after = os.lstat(out)
    assert (after.st_mode, after.st_ino) == (before.st_mode, before.st_ino)
    assert target.read_text() == "keep me"
    # and no temporary file left behind
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chats.json", "elsewhere.txt", "out.jsonl"]


def test_convert_over_a_regular_file_replaces_it_with_the_usual_mode(tmp_path: Path, capsys) -> None:
    source, out = tmp_path / "chats.json", tmp_path / "out.jsonl"
    source.write_text(json.dumps(SHAREGPT))
    out.write_text("old\n")
    assert main(["dataset", "convert", str(source), "--to", "jsonl", "--out", str(out)]) == 0
    assert len(out.read_text().splitlines()) == 4 and out.stat().st_mode & 0o777 == 0o644   # umask 022


@pytest.mark.parametrize("kind", ["fifo", "device", "directory"])
def test_a_dataset_that_is_not_a_regular_file_is_one_line_not_a_hang(tmp_path: Path, kind: str) -> None:
    import os

    path = {"fifo": tmp_path / "d.jsonl", "device": Path("/dev/null"), "directory": tmp_path}[kind]
    if kind == "fifo":
        os.mkfifo(path)                              # opening it for reading would wait for a writer for good
    message = {"fifo": "is a FIFO, not a regular file; give a file",
               "device": "is a device, not a regular file",
               "directory": "is a directory, not a dataset file"}[kind]
    with pytest.raises(DatasetError, match=re.escape(f"{path}: {message}")):
        load_dataset(path)


def test_a_lone_surrogate_in_a_prompt_is_refused_at_load(tmp_path: Path) -> None:
    """It cannot be encoded as UTF-8: every request of it used to be a client_error, ~16,000 a second."""
    path = tmp_path / "d.jsonl"
    path.write_text('{"id": "a", "prompt": "fine"}\n{"id": "b", "prompt": "bad \\ud800 here"}\n')
    message = f"{path}:2: message 1 holds a lone UTF-16 surrogate (U+D800) at character 5"
    with pytest.raises(DatasetError, match=re.escape(message)):
        load_dataset(path)
    sharegpt = tmp_path / "s.json"
    sharegpt.write_text(json.dumps([{"conversations": [{"from": "human", "value": "x\udfff"}]}]))
    with pytest.raises(DatasetError, match="lone UTF-16 surrogate"):
        load_dataset(sharegpt)

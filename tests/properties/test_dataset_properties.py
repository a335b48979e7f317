"""Every dataset format fed random bytes, and random valid-but-odd JSON structures, either loads or is
one DatasetError line (fourfold#32 item 8): never another exception, never a hang."""

from __future__ import annotations

import csv
import io
import json
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from fourfold.errors import DatasetError
from fourfold.workloads.formats import FORMAT_NAMES, load_dataset

SUFFIXES = [".jsonl", ".json", ".csv", ".txt", ".parquet"]
# text with what hurts: lone surrogates, NUL, BOMs, long runs, control characters
ODD_TEXT = st.text(st.characters(codec=None, blacklist_categories=()), max_size=30) | st.sampled_from(
    ["", " ", "\ud800", "\x00", "\ufeff", "x" * 300, "\r\n", "[", "{", "#"])
SCALARS = (st.none() | st.booleans() | st.integers(-(2**80), 2**80) | st.floats(allow_nan=True) | ODD_TEXT)
JSON = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
    st.sampled_from(["id", "prompt", "messages", "role", "content", "reference", "references", "max_tokens",
                     "conversations", "from", "value", "timestamp", "input_length", "output_length",
                     "hash_ids", "text_input", "custom_id", "body", "question", "answer", "system", "x"])
    | ODD_TEXT, inner, max_size=5), max_leaves=12)
# close to an item of some format, with odd values where the checks must hold
PLAIN = st.text(st.characters(whitelist_categories=("L", "N")), min_size=1, max_size=20)
SPEAKERS = st.sampled_from(["human", "gpt", "system", "bot"])
NEAR_VALID = (
    st.fixed_dictionaries({"id": PLAIN | st.integers(), "prompt": PLAIN | ODD_TEXT},
                          optional={"reference": PLAIN | SCALARS, "max_tokens": st.integers(1, 9) | SCALARS})
    | st.fixed_dictionaries({"conversations": st.lists(
        st.fixed_dictionaries({"from": SPEAKERS, "value": PLAIN | ODD_TEXT}), max_size=3)})
    | st.fixed_dictionaries({"timestamp": st.integers(0, 10**6) | SCALARS,
                             "input_length": st.integers(1, 99) | SCALARS},
                            optional={"output_length": SCALARS, "hash_ids": JSON}))
TIME_LIMIT_S = 5.0


def _load(path: Path, fmt: str) -> None:
    started = time.monotonic()
    try:
        dataset = load_dataset(path, fmt)
        event("loaded")
        assert dataset.items
    except DatasetError as exc:
        line = str(exc)
        assert line and "Traceback" not in line
        event("one dataset error")
    assert time.monotonic() - started < TIME_LIMIT_S


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=600), st.sampled_from(SUFFIXES), st.sampled_from(FORMAT_NAMES))
def test_random_bytes_in_any_format(tmp_path: Path, data: bytes, suffix: str, fmt: str) -> None:
    path = tmp_path / f"d{suffix}"
    path.write_bytes(data)
    _load(path, fmt)


def _jsonl(rows: list[Any]) -> str:
    return "".join(json.dumps(r, ensure_ascii=True, allow_nan=True) + "\n" for r in rows)


def _csv(rows: list[Any]) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["prompt", "reference", "max_tokens"])
    for row in rows:
        cells = row if isinstance(row, list) else [row]
        writer.writerow([json.dumps(c, ensure_ascii=True) if not isinstance(c, str) else
                         c.encode("utf-8", "surrogatepass").decode("utf-8", "replace") for c in cells[:3]])
    return out.getvalue()


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(NEAR_VALID, min_size=1, max_size=4) | st.lists(JSON | NEAR_VALID, min_size=1, max_size=4),
       st.sampled_from(["jsonl", "json", "csv"]),
       st.sampled_from(FORMAT_NAMES))
def test_odd_structures_in_any_format(tmp_path: Path, rows: list[Any], container: str, fmt: str) -> None:
    path = tmp_path / f"d.{container}"
    text = {"jsonl": _jsonl, "json": lambda r: json.dumps(r, ensure_ascii=True), "csv": _csv}[container](rows)
    path.write_text(text, encoding="utf-8")
    _load(path, fmt)


@pytest.mark.parametrize("line", [
    '{"id": "a", "prompt": "x", "max_tokens": 1e400}',
    '{"id": "a", "prompt": "x", "max_tokens": 9' + "9" * 5000 + "}",
    '{"id": "a", "messages": [{"role": "user", "content": [{"type": "text", "text": "\\ud800"}]}]}',
    '{"timestamp": 1e308, "input_length": 5}', '{"timestamp": 0, "input_length": 99999999999}',
])
def test_the_odd_lines_the_issue_found_are_one_error_each(tmp_path: Path, line: str) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text(line + "\n")
    with pytest.raises(DatasetError):
        load_dataset(path)

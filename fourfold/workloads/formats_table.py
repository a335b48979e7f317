"""Hugging Face dataset files: Parquet and CSV rows, and JSON / JSONL records, mapped by column.

``--dataset-column prompt=question,reference=answer`` (also ``id=``, ``max_tokens=``, ``system=``)
names the columns; a field left out is looked for under its usual names (:data:`GUESSES`: a
``question`` column is the prompt, ``answer`` the reference, ...). A file needs a prompt column;
a row's other columns stay in the item's ``meta``. A mapped column the file does not have is a
:class:`~fourfold.errors.DatasetError` listing the columns it has; a row whose prompt is empty, or
whose ``max_tokens`` is not a positive integer, names the row and the column.

The containers: CSV by Python's csv module (every cell as text, so ``007`` stays an id and an
empty cell is empty; a bad row is named with its line, which pandas does not tell); Parquet by
``fastparquet`` directly (pandas' own fastparquet engine is deprecated),
or by pandas with ``pyarrow`` when that is installed instead. A row's nested values (lists, numpy
arrays, JSON text in a ``conversations`` / ``messages`` cell) become plain Python, so a Parquet file
of ShareGPT conversations or OpenAI messages reads as that format.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fourfold.errors import DatasetError
from fourfold.workloads.format_registry import (
    COLUMN_FIELDS,
    ColumnMap,
    Converter,
    DatasetFormat,
    read_text,
    register_format,
)
from fourfold.workloads.items import KNOWN_FIELDS, _kind

GUESSES: dict[str, tuple[str, ...]] = {
    "prompt": ("prompt", "question", "instruction", "input", "query", "problem", "text"),
    "reference": ("reference", "answer", "response", "output", "completion", "solution", "chosen"),
    "id": ("id", "custom_id", "uid", "question_id"),
    "max_tokens": ("max_tokens",),
    "system": ("system", "system_prompt"),
}
NESTED_COLUMNS = ("conversations", "conversation", "messages")


def column_map(columns_in_file: list[str], given: ColumnMap, path: Path) -> dict[str, str]:
    """Item field -> column: the given pairs, then the usual names for the rest; DatasetError for a
    given column the file lacks, or no prompt column at all."""
    have = list(columns_in_file)
    mapping: dict[str, str] = {}
    for field, column in given:
        if column not in have:
            raise DatasetError(f"{path}: --dataset-column {field}={column}: no column {column!r}; "
                               f"the file has: {_names(have)}")
        mapping[field] = column
    taken = set(mapping.values())
    for field in COLUMN_FIELDS:
        if field not in mapping:
            found = next((c for c in GUESSES[field] if c in have and c not in taken), None)
            if found is not None:
                mapping[field] = found
                taken.add(found)
    if "prompt" not in mapping:
        raise DatasetError(f"{path}: no prompt column (looked for {', '.join(GUESSES['prompt'])}); "
                           f"the file has: {_names(have)}; name it with --dataset-column prompt=COLUMN")
    return mapping


def _names(columns: list[str]) -> str:
    shown = ", ".join(repr(c) for c in columns[:12])
    return (shown + (f" and {len(columns) - 12} more" if len(columns) > 12 else "")
            if columns else "no columns")


def _empty(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value)) or (
        isinstance(value, str) and not value.strip())


def mapped_fields(record: dict[str, Any], row: int, mapping: dict[str, str], fmt: str) -> dict[str, Any]:
    """Item fields of one row through ``mapping``; ValueError naming the column."""
    prompt = record.get(mapping["prompt"])
    if _empty(prompt) or not isinstance(prompt, str):
        raise ValueError(f"column {mapping['prompt']!r} (the prompt) must be a non-empty text, got "
                         f"{_kind(prompt)}")
    fields: dict[str, Any] = {k: v for k, v in record.items()       # the other columns: the item's meta
                              if k not in mapping.values() and k not in KNOWN_FIELDS and not _empty(v)}
    system = record.get(mapping["system"]) if "system" in mapping else None
    if not _empty(system) and not isinstance(system, str):
        raise ValueError(f"column {mapping['system']!r} (the system message) must be a text, got "
                         f"{_kind(system)}")
    fields["messages"] = ([{"role": "system", "content": system}] if not _empty(system) else []) + \
        [{"role": "user", "content": prompt}]
    reference = record.get(mapping["reference"]) if "reference" in mapping else None
    if not _empty(reference):
        if not isinstance(reference, str):
            raise ValueError(f"column {mapping['reference']!r} (the reference) must be a text, got "
                             f"{_kind(reference)}")
        fields["reference"] = reference
    item_id = record.get(mapping["id"]) if "id" in mapping else None
    if isinstance(item_id, float) and item_id.is_integer():
        item_id = int(item_id)
    fields["id"] = f"{fmt}-{row}" if _empty(item_id) else item_id
    if "max_tokens" in mapping and not _empty(record.get(mapping["max_tokens"])):
        fields["max_tokens"] = _positive_int(record[mapping["max_tokens"]], mapping["max_tokens"])
    return fields


def _positive_int(value: Any, column: str) -> int:
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"column {column!r} (max_tokens) must be a positive integer, got {_kind(value)}")
    return value


def _table_converter(fmt: str) -> Any:
    def converter(first: dict[str, Any], columns: ColumnMap, path: Path) -> Converter:
        mapping = column_map(list(first), columns, path)
        return lambda record, row: mapped_fields(record, row, mapping, fmt)
    return converter


for _name, _what in (("parquet", "Parquet rows"), ("csv", "CSV rows"), ("json", "a JSON array of records"),
                     ("jsonl", "JSON lines")):
    register_format(DatasetFormat(_name, _table_converter(_name), f"{_what}, mapped by --dataset-column"))


# ---- containers ----
def table_records(path: str | Path, container: str) -> Iterator[tuple[str, int, Any]]:
    """(``file: row N``, N, row dict) of every row of a CSV or Parquet file (N from 1, the header
    not counted); DatasetError when the file cannot be read as that."""
    if container == "csv":
        yield from csv_records(path)
        return
    frame = read_parquet(path)
    columns = [str(c) for c in frame.columns]
    for n, values in enumerate(frame.itertuples(index=False, name=None), 1):
        yield f"{path}: row {n}", n, {c: plain(v, c) for c, v in zip(columns, values, strict=True)}


def csv_records(path: str | Path) -> Iterator[tuple[str, int, dict[str, Any]]]:
    """Rows of a CSV (``.tsv``: tab-separated) file, every cell as text; a row with more or fewer
    cells than the header is a DatasetError naming the row and its line."""
    text = read_text(path)          # missing file, not UTF-8, BOM: the same lines as every format
    reader = csv.reader(io.StringIO(text, newline=""),
                        delimiter="\t" if Path(path).suffix.lower() == ".tsv" else ",")
    try:
        header = next(reader, None)
        if header is None:
            return
        columns = [c.strip() for c in header]
        line = reader.line_num + 1                       # where the next row starts
        for n, cells in enumerate(reader, 1):
            start, line = line, reader.line_num + 1
            if not cells:
                continue
            if len(cells) != len(columns):
                raise DatasetError(f"{path}: row {n} (line {start}): {len(cells)} cells, the header has "
                                   f"{len(columns)}")
            yield f"{path}: row {n}", n, {plain(c, c): plain(v, c)
                                          for c, v in zip(columns, cells, strict=True)}
    except csv.Error as exc:
        raise DatasetError(f"{path}: line {reader.line_num}: not CSV ({exc})") from None


def read_parquet(path: str | Path) -> Any:
    """A Parquet file as a DataFrame: fastparquet, or pyarrow through pandas when fastparquet is absent."""
    import pandas as pd

    with open(path, "rb") as fh:                     # a missing file: the usual line
        head = fh.read(4)
    if head != b"PAR1":
        raise DatasetError(f"{path}: not a readable Parquet file (it does not start with PAR1)")
    try:
        import fastparquet
    except ImportError:
        fastparquet = None
    try:
        if fastparquet is not None:
            with open(path, "rb") as fh:
                return fastparquet.ParquetFile(fh).to_pandas()
        return pd.read_parquet(path)
    except ImportError:
        raise DatasetError(f"{path}: reading Parquet needs fastparquet (pip install fastparquet) "
                           f"or pyarrow") from None
    except Exception as exc:  # noqa: BLE001 - the engines raise many kinds for a damaged file
        raise DatasetError(f"{path}: not a readable Parquet file ({type(exc).__name__}: "
                           f"{' '.join(str(exc).split())[:200]})") from None


def plain(value: Any, column: str = "") -> Any:
    """A cell as plain Python: numpy scalars and arrays, NaN as None, JSON text in a nested column."""
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        value = value.tolist()
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if column in NESTED_COLUMNS and isinstance(value, str) and value.lstrip().startswith("["):
        try:
            return json.loads(value)
        except ValueError:
            return value
    if type(value).__name__ in ("Timestamp", "NaTType", "Decimal"):
        return str(value)
    return value


__all__ = ["GUESSES", "column_map", "csv_records", "mapped_fields", "plain", "read_parquet", "table_records"]

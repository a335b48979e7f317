"""Dataset files in every format fourfold reads, told apart by their content (docs/datasets.md).

    load_dataset(path, fmt="auto", columns=()) -> list[Item]

Reading a file is three steps, each in one place:

1. a **container** turns the file into ``(where, row, record)`` triples: JSONL lines
   (:func:`fourfold.workloads.items.jsonl_objects`), the elements of a JSON array
   (:func:`json_array_objects`, each with its line), CSV or Parquet rows
   (:mod:`fourfold.workloads.formats_table`); ``where`` is what an error names (``file:line`` or
   ``file: row N``), ``row`` the record's number from 1;
2. a **format** (registered by name in :data:`FORMATS`) makes from the first record a converter
   that turns each record into the fields of fourfold's own item: ShareGPT, OpenAI chat and batch
   (:mod:`fourfold.workloads.formats_chat`), column-mapped Hugging Face files
   (:mod:`fourfold.workloads.formats_table`), fourfold's own JSONL (the record as it is);
3. :meth:`fourfold.workloads.items.Item.from_dict` checks the fields (the one place that does).

A ValueError from steps 2 and 3 becomes a :class:`~fourfold.errors.DatasetError` naming the file,
the line or row, and the field. ``auto`` picks the container from the bytes (``PAR1``, ``[``,
``{``, a ``.csv`` name) and the format from the first record's keys (:func:`classify`). A format
that must see the whole file registers a ``load`` instead of a converter; :func:`register_format`
adds or replaces one (:mod:`fourfold.workloads.format_registry`; the Mooncake ``trace`` registers
in :mod:`fourfold.workloads.trace`).
"""

from __future__ import annotations

import codecs
import itertools
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fourfold.errors import DatasetError, OptionError
from fourfold.workloads import formats_chat, formats_table, trace  # noqa: F401 - the import registers them
from fourfold.workloads.format_registry import (
    COLUMN_FIELDS,
    CONTAINERS,
    FORMATS,
    ColumnMap,
    Converter,
    DatasetFormat,
    Records,
    read_bytes,
    read_text,
    register_format,
)
from fourfold.workloads.items import Item, jsonl_objects, require_regular, valid_unicode

FORMAT_NAMES = ("auto", "fourfold", "sharegpt", "openai", "openai-batch", "parquet", "csv", "json", "jsonl",
                "trace")


def get_format(name: str) -> DatasetFormat:
    """The format registered as ``name``; DatasetError listing the valid names for any other."""
    if name not in FORMATS:
        raise DatasetError(
            f"the {name!r} dataset format is not available; known: "
            f"{', '.join(n for n in FORMAT_NAMES if n in FORMATS or n in CONTAINERS or n == 'auto')}")
    return FORMATS[name]


@dataclass(frozen=True)
class Dataset:
    """What a load found: the items, the format and container, and the column map it used."""

    path: str
    format: str
    container: str
    items: list[Item]
    columns: ColumnMap = ()


# ---- options ----
def parse_columns(text: str | ColumnMap | list[Any] | dict[str, str] | None,
                  option: str = "--dataset-column") -> ColumnMap:
    """``'prompt=question,reference=answer'`` -> (("prompt", "question"), ("reference", "answer")).

    Also takes the pairs back as meta.json keeps them (a list of pairs, or a dict). OptionError for
    a part without ``=``, an unknown field (the valid ones are listed) or a field given twice."""
    if not text:
        return ()
    if isinstance(text, dict):
        pairs = [(str(k), str(v)) for k, v in text.items()]
    elif isinstance(text, (list, tuple)):
        pairs = [(str(p[0]), str(p[1])) for p in text]
    else:
        pairs = []
        for part in str(text).split(","):
            if not part.strip():
                continue
            name, sep, column = part.partition("=")
            if not sep or not name.strip() or not column.strip():
                raise OptionError(f"{option} {part.strip()!r}: expected FIELD=COLUMN, e.g. "
                                  "'prompt=question,reference=answer'")
            pairs.append((name.strip(), column.strip()))
    seen: set[str] = set()
    for name, _ in pairs:
        if name not in COLUMN_FIELDS:
            raise OptionError(f"{option} {name}=...: {name!r} is not an item field; "
                              f"expected one of: {', '.join(COLUMN_FIELDS)}")
        if name in seen:
            raise OptionError(f"{option}: {name!r} is mapped twice")
        seen.add(name)
    return tuple(pairs)


def check_format_name(name: str, option: str = "--dataset-format") -> str:
    """``name`` if it is one of FORMAT_NAMES, else OptionError listing them."""
    if name not in FORMAT_NAMES:
        raise OptionError(f"{option} {name!r}: expected one of: {', '.join(FORMAT_NAMES)}")
    return name


# ---- containers ----
def json_array_objects(path: str | Path) -> Iterator[tuple[int, Any]]:
    """(line, element) of every element of a JSON file holding one array, each parsed on its own so
    an error names the element's line; DatasetError for a file that is not one JSON array."""
    text = read_text(path)
    decoder = json.JSONDecoder()
    pos = _skip_space(text, 0)
    if not text.startswith("[", pos):
        raise DatasetError(f"{path}:1: expected a JSON array of records")
    pos = _skip_space(text, pos + 1)
    line, counted = 1, 0
    if text.startswith("]", pos):
        return
    while True:
        line += text.count("\n", counted, pos)
        counted = pos
        try:
            value, end = decoder.raw_decode(text, pos)
        except RecursionError:
            raise DatasetError(f"{path}:{line}: nested too deeply") from None
        except json.JSONDecodeError as exc:
            raise DatasetError(f"{path}:{exc.lineno}: not JSON ({exc.msg} at column {exc.colno})") from None
        yield line, value
        pos = _skip_space(text, end)
        if text.startswith(",", pos):
            pos = _skip_space(text, pos + 1)
        elif text.startswith("]", pos):
            if _skip_space(text, pos + 1) != len(text):
                tail = line + text.count("\n", counted, pos)
                raise DatasetError(f"{path}:{tail}: text after the JSON array's end")
            return
        else:
            here = line + text.count("\n", counted, pos)
            raise DatasetError(f"{path}:{here}: not JSON (expected ',' or ']' after an element)")


def _skip_space(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in " \t\r\n":
        pos += 1
    return pos


def detect_container(path: str | Path) -> str:
    """``parquet``, ``json`` (one array), ``jsonl`` or ``csv`` from the file's first bytes (and its
    name's suffix for CSV); DatasetError when none fits."""
    head = read_bytes(path, 4096)
    suffix = Path(path).suffix.lower()
    if head.startswith(b"PAR1") or suffix in (".parquet", ".pq"):
        return "parquet"
    if suffix in (".csv", ".tsv"):
        return "csv"
    text = head.removeprefix(codecs.BOM_UTF8).lstrip()
    if text.startswith(b"["):
        return "json"
    if text.startswith(b"{") or text.startswith(b"#") or suffix in (".jsonl", ".json", ".ndjson"):
        return "jsonl"
    if not text:
        return "jsonl"          # an empty file: "no items", as for fourfold's own JSONL
    first = text.split(b"\n", 1)[0]
    if b"," in first or b"\t" in first:
        return "csv"
    raise DatasetError(f"{path}: cannot tell the format (not JSON, JSONL, CSV or Parquet); "
                       f"name it with --dataset-format ({', '.join(FORMAT_NAMES[1:])})")


def container_records(path: str | Path, container: str) -> Records:
    """(where, row, record) of every record of ``path`` read as ``container``."""
    if container == "jsonl":
        return ((f"{path}:{n}", row, obj) for row, (n, obj) in enumerate(jsonl_objects(path), 1))
    if container == "json":
        return ((f"{path}:{n}", row, obj) for row, (n, obj) in enumerate(json_array_objects(path), 1))
    return formats_table.table_records(path, container)


# ---- shapes ----
def classify(record: Any, container: str, columns: ColumnMap = ()) -> str:
    """The format of a file whose first record is ``record``: its keys decide (docs/datasets.md,
    "Detection"); with a column map, or keys no shape has, the records are column-mapped (the
    format is then named after the container)."""
    if not isinstance(record, dict):
        return "fourfold" if container == "jsonl" else container
    if "timestamp" in record and ("input_length" in record or "text_input" in record):
        return "trace"
    if columns:
        return container
    if "conversations" in record or "conversation" in record:
        return "sharegpt"
    if "custom_id" in record and "body" in record:
        return "openai-batch"
    if "messages" in record:
        messages = record["messages"]
        ends_with_answer = (isinstance(messages, list) and messages and isinstance(messages[-1], dict)
                            and messages[-1].get("role") == "assistant")
        if "reference" in record or "references" in record or ("id" in record and not ends_with_answer):
            return "fourfold"
        return "openai"
    if "prompt" in record and "id" in record and container in ("jsonl", "json"):
        return "fourfold"
    return container


def load_dataset(path: str | Path, fmt: str = "auto", columns: ColumnMap = ()) -> Dataset:
    """Every item of ``path`` read as ``fmt`` (``auto``: told from the content) with the column map;
    DatasetError naming the file, the line or row and the field when something cannot be used."""
    check_format_name(fmt)
    require_regular(path)
    container = fmt if fmt in ("csv", "parquet") else detect_container(path)
    if fmt in ("json", "jsonl") and container not in ("json", "jsonl"):
        container = fmt          # (a JSON array named jsonl, or the reverse, is read as what it is)
    records = container_records(path, container)
    first = next(records, None)
    if first is None:
        raise DatasetError(f"{path}: no items " + ("(an empty JSON array)" if container == "json" else
                                                   "(the file is empty, or holds only blank lines and # "
                                                   "comments)"))
    shape = fmt if fmt not in ("auto", *CONTAINERS) else classify(first[2], container, columns)
    if fmt in CONTAINERS and shape in CONTAINERS:
        shape = container
    reader = get_format(shape)
    if reader.load is not None or reader.converter is None:
        return Dataset(str(path), shape, container, reader.load(Path(path)) if reader.load else [], columns)
    convert = reader.converter(first[2] if isinstance(first[2], dict) else {}, columns, Path(path))
    items = []
    for where, row, record in itertools.chain([first], records):
        try:
            if not isinstance(record, dict):
                raise ValueError(f"expected a JSON object, got {_kind(record)}")
            data = convert(record, row)
            items.append(valid_unicode(data) if isinstance(data, Item) else Item.from_dict(data))
        except DatasetError:
            raise
        except ValueError as exc:
            raise DatasetError(f"{where}: {exc}") from None
    return Dataset(str(path), shape, container, items, columns)


def load_items_as(path: str | Path, fmt: str = "auto", columns: ColumnMap = ()) -> list[Item]:
    """:func:`load_dataset`'s items."""
    return load_dataset(path, fmt, columns).items


def load_run_dataset(path: str | Path, settings: dict[str, Any] | None) -> list[Item]:
    """The items of a run's dataset read as the run read them: ``settings`` is meta.json's settings
    block (``dataset_format``, ``dataset_columns``; missing in runs of older versions: auto)."""
    settings = settings or {}
    fmt = settings.get("dataset_format") or "auto"
    return load_items_as(path, fmt if fmt in FORMAT_NAMES else "auto",
                         parse_columns(settings.get("dataset_columns")))


def _kind(value: Any) -> str:
    if isinstance(value, list):
        return "a list"
    return (json.dumps(value) if isinstance(value, (str, int, float, bool)) or value is None
            else type(value).__name__)


def _fourfold_converter(first: dict[str, Any], columns: ColumnMap, path: Path) -> Converter:
    return lambda record, row: record


register_format(DatasetFormat("fourfold", _fourfold_converter,
                              "fourfold's own items: id, prompt or messages, reference(s), max_tokens"))


__all__ = [
    "COLUMN_FIELDS",
    "FORMATS",
    "FORMAT_NAMES",
    "ColumnMap",
    "Dataset",
    "DatasetFormat",
    "classify",
    "detect_container",
    "get_format",
    "json_array_objects",
    "load_dataset",
    "load_items_as",
    "load_run_dataset",
    "parse_columns",
    "register_format",
]

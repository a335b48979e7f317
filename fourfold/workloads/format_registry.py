"""What every dataset format shares: the registry of formats, the types a format's converter uses,
and reading a file's bytes and text with errors that name the file.

The formats themselves register here when their modules are imported: fourfold's own JSONL
(:mod:`fourfold.workloads.formats`), ShareGPT and OpenAI (:mod:`fourfold.workloads.formats_chat`),
column-mapped tables (:mod:`fourfold.workloads.formats_table`), the Mooncake trace
(:mod:`fourfold.workloads.trace`); :mod:`fourfold.workloads.formats` imports them all and reads a file.
"""

from __future__ import annotations

import codecs
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fourfold.errors import DatasetError
from fourfold.workloads.items import Item, require_regular

__all__ = ["COLUMN_FIELDS", "CONTAINERS", "FORMATS", "ColumnMap", "Converter", "DatasetFormat", "Records",
           "read_bytes", "read_text", "register_format"]

ColumnMap = tuple[tuple[str, str], ...]        # (item field, column) pairs from --dataset-column
Converter = Callable[[dict[str, Any], int], "dict[str, Any] | Item"]
Records = Iterator[tuple[str, int, Any]]        # (where, row from 1, record)

COLUMN_FIELDS = ("prompt", "reference", "id", "max_tokens", "system")
CONTAINERS = ("jsonl", "json", "csv", "parquet")

@dataclass(frozen=True)
class DatasetFormat:
    """A record shape: ``converter(first, columns, path)`` checks what it can once (the column map
    against the first record) and returns the function that turns one record into item fields."""

    name: str
    converter: Callable[[dict[str, Any], ColumnMap, Path], Converter] | None
    description: str = ""
    load: Callable[[Path], list[Item]] | None = None  # a format read as a whole (trace: times from the first)


FORMATS: dict[str, DatasetFormat] = {}


def register_format(fmt: DatasetFormat) -> DatasetFormat:
    """Add (or replace) a format under its name; returns it."""
    FORMATS[fmt.name] = fmt
    return fmt


def read_text(path: str | Path) -> str:
    """The file's text (a UTF-8 BOM dropped); DatasetError for a missing file or bytes not UTF-8."""
    raw = read_bytes(path)
    if raw.startswith(codecs.BOM_UTF8):
        raw = raw[len(codecs.BOM_UTF8):]
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise DatasetError(f"{path}:{line}: not UTF-8 (byte 0x{raw[exc.start]:02x}); save the "
                           f"file as UTF-8") from None


def read_bytes(path: str | Path, size: int = -1) -> bytes:
    require_regular(path)
    try:
        with open(path, "rb") as fh:
            return fh.read(size)
    except FileNotFoundError:
        raise DatasetError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise DatasetError(f"{path}: is a directory, not a dataset file") from None
    except OSError as exc:
        raise DatasetError(f"{path}: cannot read ({exc.strerror or exc})") from None

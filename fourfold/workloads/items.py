"""Dataset items: what a level sends, and what a good answer looks like.

Reading a dataset is two steps, each in one place: :func:`jsonl_objects` turns a file into
``(line number, JSON object)`` pairs (a UTF-8 BOM is dropped; bytes that are not UTF-8, a line that
is not JSON, a JSON array, a value that is not an object: :class:`~fourfold.errors.DatasetError`
naming the file and line), and :meth:`Item.from_dict` checks one object's fields and types. Another
file format adds a reader that yields the same objects; the checks stay here.
"""

from __future__ import annotations

import codecs
import json
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fourfold.errors import DatasetError
from fourfold.workloads.tools import check_tool_choice, check_tools

KNOWN_FIELDS = frozenset({"id", "messages", "prompt", "references", "reference", "max_tokens"})


@dataclass(frozen=True)
class Item:
    """One prompt: chat messages, the answer(s) we expect, and level-specific facts."""

    id: str
    messages: tuple[dict[str, str], ...]
    references: tuple[str, ...] = ()
    max_tokens: int | None = None
    meta: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)

    @property
    def prompt(self) -> str:
        """The last user message (what structure compliance and the simulator look at)."""
        for message in reversed(self.messages):
            if message.get("role") == "user":
                return message.get("content", "")
        return ""

    def to_dict(self) -> dict[str, Any]:
        """The item as one line of fourfold's own JSONL, which :meth:`from_dict` reads back to an
        equal item (meta included): ``prompt`` for a lone user text, else ``messages``."""
        data: dict[str, Any] = {"id": self.id}
        lone = self.messages[0] if len(self.messages) == 1 else None
        if lone is not None and lone.get("role") == "user" and set(lone) == {"role", "content"} \
                and isinstance(lone.get("content"), str):
            data["prompt"] = lone["content"]
        else:
            data["messages"] = [dict(m) for m in self.messages]
        if len(self.references) == 1 and self.references[0]:
            data["reference"] = self.references[0]
        elif self.references:
            data["references"] = list(self.references)
        if self.max_tokens is not None:
            data["max_tokens"] = self.max_tokens
        return {**data, **{k: v for k, v in self.meta.items() if k not in KNOWN_FIELDS}}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Item:
        """An item from one JSON object; ValueError saying which field is wrong and what it must be."""
        if not isinstance(data, dict):
            raise ValueError(f"expected a JSON object, got {_kind(data)}")
        item_id = data.get("id")
        if isinstance(item_id, bool) or not isinstance(item_id, (str, int)) or str(item_id).strip() == "":
            raise ValueError("'id' is missing" if item_id is None else
                             f"'id' must be a text or an integer, got {_kind(item_id)}")
        if "messages" in data:
            messages = _messages(data["messages"])
        elif "prompt" in data:
            prompt = data["prompt"]
            if not isinstance(prompt, str) or not prompt.strip():
                raise ValueError(f"'prompt' must be a non-empty text, got {_kind(prompt)}")
            messages = ({"role": "user", "content": prompt},)
        else:
            raise ValueError("needs 'prompt' (a text) or 'messages' (a list of {role, content})")
        refs = data.get("references")
        if refs is None:
            single = data.get("reference")
            if single is not None and not isinstance(single, str):
                raise ValueError(f"'reference' must be a text, got {_kind(single)}")
            refs = [single] if single else []
        elif not isinstance(refs, list) or not all(isinstance(r, str) for r in refs):
            raise ValueError(f"'references' must be a list of texts, got {_kind(refs)}")
        if "tools" in data:
            check_tools(data["tools"])
        if "tool_choice" in data:
            check_tool_choice(data["tool_choice"], data.get("tools") or [])
        max_tokens = data.get("max_tokens")
        if max_tokens is not None and (isinstance(max_tokens, bool) or not isinstance(max_tokens, int)
                                       or max_tokens < 1):
            raise ValueError(f"'max_tokens' must be a positive integer, got {_kind(max_tokens)}")
        return valid_unicode(cls(
            id=str(item_id),
            messages=messages,
            references=tuple(refs),
            max_tokens=max_tokens,
            meta={k: v for k, v in data.items() if k not in KNOWN_FIELDS},
        ))


_SURROGATE = re.compile("[\ud800-\udfff]")


def valid_unicode(item: Item) -> Item:
    """``item``, or ValueError when one of its texts holds a lone UTF-16 surrogate (JSON's
    ``"\\ud800"`` decodes to one): it cannot be encoded as UTF-8, so no request of it could be sent."""
    texts: list[tuple[str, Any]] = [("'id'", item.id)]
    for n, message in enumerate(item.messages, 1):
        content = message.get("content")
        parts = content if isinstance(content, list) else [content]
        texts += [(f"message {n}", p.get("text") if isinstance(p, dict) else p) for p in parts]
    texts += [("the reference", r) for r in item.references]
    for where, text in texts:
        match = _SURROGATE.search(text) if isinstance(text, str) else None
        if match:
            raise ValueError(f"{where} holds a lone UTF-16 surrogate (U+{ord(match.group()):04X}) at "
                             f"character {match.start() + 1}: not valid Unicode, it cannot be sent as UTF-8")
    return item


def _messages(raw: Any) -> tuple[dict[str, str], ...]:
    if not isinstance(raw, list) or not raw:
        raise ValueError(f"'messages' must be a non-empty list of {{role, content}}, got {_kind(raw)}")
    for i, message in enumerate(raw):
        content = message.get("content") if isinstance(message, dict) else None
        parts = isinstance(content, list) and all(isinstance(part, dict) for part in content)
        calls = isinstance(message, dict) and content is None and isinstance(message.get("tool_calls"), list)
        if not (isinstance(message, dict) and isinstance(message.get("role"), str)
                and (isinstance(content, str) or parts or calls)):
            raise ValueError(f"'messages'[{i}] must be an object with a text 'role' and a 'content' "
                             f"(a text, or a list of content parts; null beside 'tool_calls'), got "
                             f"{_kind(message)}")
    return tuple(dict(m) for m in raw)


def _kind(value: Any) -> str:
    """A value as an error message shows it: short values as written, others by their JSON type."""
    if value is None:
        return "null"
    if isinstance(value, (bool, int, float)) or (isinstance(value, str) and len(value) <= 40):
        return json.dumps(value)
    names: dict[type, str] = {str: "a long text", list: "a list", dict: "an object"}
    return names.get(type(value), type(value).__name__)


def require_regular(path: str | Path) -> None:
    """DatasetError unless ``path`` is (a link to) a regular file: a FIFO would block the read for
    good, a device would never end; a missing file or a directory is named as such."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise DatasetError(f"{path}: no such file") from None
    except OSError as exc:
        raise DatasetError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if stat.S_ISDIR(mode):
        raise DatasetError(f"{path}: is a directory, not a dataset file")
    if not stat.S_ISREG(mode):
        raise DatasetError(f"{path}: is {file_kind(mode)}, not a regular file; give a file")


def file_kind(mode: int) -> str:
    """What a non-regular file is, for an error line (``st_mode`` from stat or lstat)."""
    for test, kind in ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISDIR, "a directory"),
                       (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return kind
    return "not a regular file"


def jsonl_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """(line number, text) of every line of a JSONL file that is not blank or a ``#`` comment.

    A UTF-8 byte order mark at the start is dropped; a missing file, or bytes that are not UTF-8,
    are a :class:`DatasetError` naming the file (and the line)."""
    require_regular(path)
    try:
        fh = open(path, "rb")
    except FileNotFoundError:
        raise DatasetError(f"{path}: no such file") from None
    except OSError as exc:
        raise DatasetError(f"{path}: cannot read ({exc.strerror or exc})") from None
    with fh:
        for n, raw in enumerate(fh, 1):
            if n == 1 and raw.startswith(codecs.BOM_UTF8):
                raw = raw[len(codecs.BOM_UTF8):]
            try:
                line = raw.decode("utf-8").strip()
            except UnicodeDecodeError as exc:
                raise DatasetError(f"{path}:{n}: not UTF-8 (byte 0x{raw[exc.start]:02x} at column "
                                   f"{exc.start + 1}); save the file as UTF-8") from None
            if line and not line.startswith("#"):
                yield n, line


def jsonl_objects(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) of every JSON line of ``path`` (:func:`jsonl_lines`); a line that is
    not one JSON object is a :class:`DatasetError` naming the file and line."""
    for n, line in jsonl_lines(path):
        try:
            data = json.loads(line)
        except RecursionError:
            raise DatasetError(f"{path}:{n}: nested too deeply; expected one JSON object per line") from None
        except ValueError as exc:
            what = getattr(exc, "msg", str(exc))
            where = f" at column {exc.colno}" if isinstance(exc, json.JSONDecodeError) else ""
            hint = ("; a dataset is JSONL, one JSON object per line, not a JSON array" if line.startswith("[")
                    else "")
            raise DatasetError(f"{path}:{n}: not JSON ({what}{where}){hint}") from None
        if not isinstance(data, dict):
            hint = ("; a dataset is JSONL, one JSON object per line, not a JSON array"
                    if isinstance(data, list) else "")
            raise DatasetError(f"{path}:{n}: expected a JSON object, got {_kind(data)}{hint}")
        yield n, data


def load_items(path: str | Path) -> list[Item]:
    """Read a JSONL file of items (one JSON object a line, blank lines and # comments skipped);
    :class:`DatasetError` (a ValueError) naming the file, the line and what is wrong."""
    items = []
    for n, data in jsonl_objects(path):
        try:
            items.append(Item.from_dict(data))
        except ValueError as exc:
            raise DatasetError(f"{path}:{n}: {exc}") from None
    if not items:
        raise DatasetError(f"{path}: no items (the file is empty, or holds only blank lines and # comments)")
    return items

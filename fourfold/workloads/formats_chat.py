"""Chat-shaped dataset records -> fourfold's item fields: ShareGPT, OpenAI chat, OpenAI batch input.

Pure functions over one record (a dict); a ValueError names the field (``conversations[2]``,
``body.messages``) and :func:`fourfold.workloads.formats.load_dataset` adds the file and line.

- **ShareGPT** (``{"id"?, "system"?, "conversations": [{"from": "human"|"gpt"|"system", "value"},
  ...]}``, or ``role``/``content`` turns): the first human turn is the prompt, a system turn before
  it (or a record-level ``system``) the system message, the turn after it (when it is the
  assistant's) the reference. The whole conversation, roles normalised to system / user /
  assistant / tool, stays in the item's ``meta["turns"]``.
- **OpenAI chat** (``{"messages": [...], "id"?}``): a last assistant message is the reference and
  the messages before it the prompt (a multi-turn history is sent as it is); without one, every
  message is the prompt. ``meta["turns"]``: every message.
- **OpenAI batch input** (``{"custom_id", "method", "url", "body": {"messages", "max_tokens"}}``):
  ``custom_id`` is the id, ``body.messages`` read as OpenAI chat; ``body.max_tokens`` (or
  ``max_completion_tokens``) the item's; a ``/v1/completions`` line's ``body.prompt`` is the prompt.

A record without an id of its own gets ``<format>-<row>`` (row from 1), so ids are stable.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fourfold.workloads.format_registry import ColumnMap, Converter, DatasetFormat, register_format
from fourfold.workloads.items import _kind

SHAREGPT_ROLES = {
    "human": "user", "user": "user",
    "gpt": "assistant", "assistant": "assistant", "chatgpt": "assistant", "bard": "assistant",
    "bing": "assistant", "model": "assistant",
    "system": "system",
    "tool": "tool", "function": "tool", "function_call": "tool", "observation": "tool",
}
OPENAI_ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})
BATCH_URLS = ("/v1/chat/completions", "/v1/completions")


def record_id(record: dict[str, Any], key: str, fmt: str, row: int) -> str | int:
    """The record's own id (``key``) when it has one, else ``<fmt>-<row>``."""
    value = record.get(key)
    if value is None or (isinstance(value, str) and not value.strip()):
        return f"{fmt}-{row}"
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ValueError(f"'{key}' must be a text or an integer, got {_kind(value)}")
    return value


def _conversation_key(record: dict[str, Any]) -> str:
    return "conversation" if "conversation" in record and "conversations" not in record else "conversations"


def sharegpt_turns(record: dict[str, Any]) -> list[dict[str, str]]:
    """The conversation's turns as ``{"role", "content"}`` (ShareGPT's ``from``/``value`` or
    ``role``/``content``); ValueError naming the turn and field."""
    key = _conversation_key(record)
    raw = record.get(key)
    if not isinstance(raw, list):
        raise ValueError(f"'{key}' must be a list of turns, got {_kind(raw)}")
    if not raw:
        raise ValueError(f"'{key}' is empty")
    turns = []
    for i, turn in enumerate(raw):
        if not isinstance(turn, dict):
            raise ValueError(f"'{key}'[{i}] must be an object with 'from' and 'value', got {_kind(turn)}")
        role_key, text_key = ("from", "value") if "from" in turn or "value" in turn else ("role", "content")
        role, text = turn.get(role_key), turn.get(text_key)
        if not isinstance(role, str) or role.strip().lower() not in SHAREGPT_ROLES:
            raise ValueError(f"'{key}'[{i}].{role_key} is {_kind(role)}; expected human, gpt or system "
                             "(or user, assistant, tool)")
        if not isinstance(text, str):
            raise ValueError(f"'{key}'[{i}].{text_key} must be a text, got {_kind(text)}")
        turns.append({"role": SHAREGPT_ROLES[role.strip().lower()], "content": text})
    return turns


def sharegpt_fields(record: dict[str, Any], row: int) -> dict[str, Any]:
    """Item fields of one ShareGPT record (see the module docstring)."""
    turns = sharegpt_turns(record)
    key = _conversation_key(record)
    first = next((i for i, t in enumerate(turns) if t["role"] == "user"), None)
    if first is None:
        raise ValueError(f"'{key}' has no human turn (the prompt)")
    if not turns[first]["content"].strip():
        raise ValueError(f"'{key}'[{first}].value (the first human turn) is empty")
    systems = [t["content"] for t in turns[:first] if t["role"] == "system"]
    system = systems[-1] if systems else record.get("system")
    if system is not None and not isinstance(system, str):
        raise ValueError(f"'system' must be a text, got {_kind(system)}")
    messages = ([{"role": "system", "content": system}] if system else []) + [dict(turns[first])]
    answer = turns[first + 1] if first + 1 < len(turns) else None
    fields: dict[str, Any] = {"id": record_id(record, "id", "sharegpt", row), "messages": messages,
                              "turns": turns}
    if answer is not None and answer["role"] == "assistant" and answer["content"].strip():
        fields["reference"] = answer["content"]
    return fields


def chat_fields(messages: Any, where: str = "messages") -> dict[str, Any]:
    """``messages`` (OpenAI chat) -> prompt messages, the reference and the turns."""
    if not isinstance(messages, list) or not messages:
        raise ValueError(f"'{where}' must be a non-empty list of {{role, content}}, got {_kind(messages)}")
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            raise ValueError(f"'{where}'[{i}] must be an object with 'role' and 'content', got "
                             f"{_kind(message)}")
        role = message.get("role")
        if role not in OPENAI_ROLES:
            raise ValueError(f"'{where}'[{i}].role is {_kind(role)}; expected one of: "
                             f"{', '.join(sorted(OPENAI_ROLES))}")
    fields: dict[str, Any] = {"turns": [dict(m) for m in messages]}
    prompt = messages
    last = messages[-1]
    if last.get("role") == "assistant" and len(messages) > 1:
        prompt = messages[:-1]
        if not isinstance(last.get("content"), str):
            raise ValueError(f"'{where}'[{len(messages) - 1}].content (the reference) must be a text, "
                             f"got {_kind(last.get('content'))}")
        if last["content"].strip():
            fields["reference"] = last["content"]
    if not any(m.get("role") == "user" for m in prompt):
        raise ValueError(f"'{where}' has no user message" + (" before the last assistant message"
                                                                  if prompt is not messages else ""))
    fields["messages"] = [dict(m) for m in prompt]
    return fields


def openai_fields(record: dict[str, Any], row: int) -> dict[str, Any]:
    """Item fields of one OpenAI chat record."""
    fields = chat_fields(record.get("messages"))
    fields["id"] = record_id(record, "id", "openai", row)
    if "max_tokens" in record:
        fields["max_tokens"] = record["max_tokens"]
    return fields


def batch_fields(record: dict[str, Any], row: int) -> dict[str, Any]:
    """Item fields of one line of an OpenAI batch input file."""
    custom_id = record.get("custom_id")
    if isinstance(custom_id, bool) or not isinstance(custom_id, (str, int)) or not str(custom_id).strip():
        raise ValueError("'custom_id' is missing" if custom_id is None else
                         f"'custom_id' must be a text, got {_kind(custom_id)}")
    url = record.get("url", "/v1/chat/completions")
    if url not in BATCH_URLS:
        raise ValueError(f"'url' is {_kind(url)}; fourfold sends {' or '.join(BATCH_URLS)}")
    body = record.get("body")
    if not isinstance(body, dict):
        raise ValueError(f"'body' must be an object with 'messages', got {_kind(body)}")
    if "messages" in body or url == "/v1/chat/completions":
        fields = chat_fields(body.get("messages"), "body.messages")
    else:
        prompt = body.get("prompt")
        if not isinstance(prompt, str) or not prompt.strip():
            raise ValueError(f"'body.prompt' must be a non-empty text, got {_kind(prompt)}")
        fields = {"prompt": prompt}
    fields["id"] = custom_id
    for key in ("max_tokens", "max_completion_tokens"):
        if key in body:
            value = body[key]
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"'body.{key}' must be a positive integer, got {_kind(value)}")
            fields["max_tokens"] = value
            break
    return fields


def _fixed(convert: Any) -> Any:
    def converter(first: dict[str, Any], columns: ColumnMap, path: Path) -> Converter:
        return convert
    return converter


SHAREGPT = register_format(DatasetFormat(
    "sharegpt", _fixed(sharegpt_fields), "ShareGPT: conversations of from/value (or role/content) turns"))
OPENAI = register_format(DatasetFormat(
    "openai", _fixed(openai_fields), "OpenAI chat: messages, the last assistant message the reference"))
OPENAI_BATCH = register_format(DatasetFormat(
    "openai-batch", _fixed(batch_fields), "OpenAI batch input: custom_id, method, url, body.messages"))

__all__ = ["batch_fields", "chat_fields", "openai_fields", "record_id", "sharegpt_fields", "sharegpt_turns"]

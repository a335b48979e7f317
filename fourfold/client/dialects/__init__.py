"""Wire formats as parsers without sockets, registered by name.

``get_dialect("openai")`` returns a :class:`~fourfold.client.dialects.base.Dialect`: ``build(item,
options)`` makes the :class:`HttpRequest`, ``parser(streaming)`` a fresh parser per response.
An unknown name raises :class:`~fourfold.errors.UnknownDialect` (a ``UsageError`` and a ``ValueError``)
that lists the valid names.
"""

from __future__ import annotations

from fourfold.client.dialects.anthropic_messages import AnthropicMessages
from fourfold.client.dialects.base import (
    Completion,
    Dialect,
    HttpRequest,
    RequestOptions,
    StreamParser,
    with_base_path,
)
from fourfold.client.dialects.openai_chat import OpenAIChat
from fourfold.client.dialects.openai_responses import OpenAIResponses
from fourfold.client.dialects.rag import RagDialect
from fourfold.client.dialects.triton import Triton
from fourfold.errors import UnknownDialect

__all__ = [
    "DIALECTS",
    "Completion",
    "Dialect",
    "HttpRequest",
    "RequestOptions",
    "StreamParser",
    "UnknownDialect",
    "dialect_names",
    "get_dialect",
    "with_base_path",
]

_OPENAI, _ANTHROPIC, _TRITON, _RESPONSES = OpenAIChat(), AnthropicMessages(), Triton(), OpenAIResponses()

# Canonical names first; the rest are aliases people type.
DIALECTS: dict[str, Dialect] = {
    "openai": _OPENAI,
    "anthropic": _ANTHROPIC,
    "triton": _TRITON,
    "responses": _RESPONSES,
    "openai_chat": _OPENAI,
    "anthropic_messages": _ANTHROPIC,
    "kserve": _TRITON,
    "openai_responses": _RESPONSES,
    "rag": RagDialect(),
}


def dialect_names() -> list[str]:
    """Every accepted name (canonical names and aliases), sorted."""
    return sorted(DIALECTS)


def get_dialect(name: str) -> Dialect:
    """The dialect registered as ``name`` (case-insensitive; ``-`` and ``_`` are the same)."""
    key = name.strip().lower().replace("-", "_")
    try:
        return DIALECTS[key]
    except KeyError:
        raise UnknownDialect(
            f"unknown dialect {name!r}; expected one of: {', '.join(dialect_names())}"
        ) from None

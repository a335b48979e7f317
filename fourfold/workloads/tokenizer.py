"""The target's own tokenizer (``--tokenizer PATH``), loaded offline with the ``tokenizers`` library.

``PATH`` is a ``tokenizer.json`` file or a Hugging Face tokenizer directory that holds one (what
``save_pretrained`` writes; a directory with only ``vocab.txt`` or a SentencePiece
``tokenizer.model`` is refused with a line saying so). Nothing is downloaded. Counts never include
special tokens (``[CLS]``, ``<s>``) and never truncate or pad, whatever the file configures: the
count of a prompt is the tokens of its text, not of the chat template the server wraps around it.

:func:`load_tokenizer` raises :class:`~fourfold.errors.OptionError` (one line, exit 2) for a path that
is missing or not a tokenizer; the ``tokenizers`` import is deferred to the first load.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from fourfold.errors import OptionError
from fourfold.measure.record import INPUT_TOKENS_SOURCE

__all__ = ["Tokenizer", "load_tokenizer"]


@dataclass
class Tokenizer:
    """A loaded tokenizer: exact token counts of texts (no special tokens, no truncation)."""

    path: str
    backend: Any = field(repr=False)

    @property
    def name(self) -> str:
        """What summaries call it: the directory's name for a directory, else the file's."""
        path = Path(self.path)
        return path.parent.name if path.name == "tokenizer.json" and path.parent.name else path.name

    def encode(self, text: str) -> list[int]:
        return list(self.backend.encode(text, add_special_tokens=False).ids)

    def decode(self, ids: list[int]) -> str:
        return str(self.backend.decode(ids))

    def count(self, text: str) -> int:
        """Tokens in ``text`` (0 for an empty text)."""
        if not text:
            return 0
        fast = getattr(self.backend, "encode_batch_fast", None)  # tokenizers >= 0.20: no offsets, ~40 % less
        if fast is not None:
            return len(fast([text], add_special_tokens=False)[0].ids)
        return len(self.backend.encode(text, add_special_tokens=False).ids)

    def offsets(self, text: str) -> list[tuple[int, int]]:
        """(start, end) character span of every token of ``text`` in ``text``."""
        return [tuple(span)  # type: ignore[misc]
                for span in self.backend.encode(text, add_special_tokens=False).offsets]


def load_tokenizer(path: str | Path, option: str = "--tokenizer") -> Tokenizer:
    """Load ``path`` (a tokenizer.json or a directory with one); OptionError naming ``option`` if unreadable.
    Loaded once per process and path (a failure is not remembered)."""
    return _load(str(Path(path).expanduser().resolve()), option)


@lru_cache(maxsize=8)
def _load(path: str, option: str) -> Tokenizer:
    given = Path(path)
    file = given / "tokenizer.json" if given.is_dir() else given
    if given.is_dir() and not file.is_file():
        found = sorted(p.name for p in given.iterdir())[:6]
        raise OptionError(f"{option} {given}: the directory has no tokenizer.json (found: "
                          f"{', '.join(found) or 'nothing'}); save the tokenizer with the 'tokenizers' "
                          f"or 'transformers' library (save_pretrained writes tokenizer.json)")
    if not file.is_file():
        raise OptionError(f"{option} {given}: no such file or directory (expected a tokenizer.json "
                          f"or a Hugging Face tokenizer directory)")
    try:
        text = file.read_text(encoding="utf-8")
        json.loads(text)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        raise OptionError(f"{option} {file}: not a readable tokenizer.json ({reason})") from None
    try:
        from tokenizers import Tokenizer as _Backend
    except ImportError:          # pragma: no cover - installed with sentence-transformers
        raise OptionError(f"{option} needs the 'tokenizers' library (pip install tokenizers)") from None
    try:
        backend = _Backend.from_str(text)
    except Exception as exc:     # the library raises plain Exceptions
        detail = str(exc).splitlines()[0][:160] if str(exc) else type(exc).__name__
        raise OptionError(f"{option} {file}: not a tokenizer the 'tokenizers' library can load "
                          f"({detail})") from None
    backend.no_truncation()
    backend.no_padding()
    tokenizer = Tokenizer(path=str(file), backend=backend)
    _test_encode(tokenizer, f"{option} {file}")
    return tokenizer


_PROBE = "fourfold checks this tokenizer: 12 words, digits 0123, and caf\u00e9. "


def _test_encode(tokenizer: Tokenizer, where: str) -> None:
    """A tokenizer that loads but cannot encode, or counts a text four times as long no higher,
    would make every record's count wrong (or a synthetic prompt grow forever): refused at load."""
    try:
        once, four = tokenizer.count(_PROBE), tokenizer.count(_PROBE * 4)
        spans = tokenizer.offsets(_PROBE)
    except Exception as exc:     # the library raises plain Exceptions
        detail = str(exc).splitlines()[0][:160] if str(exc) else type(exc).__name__
        raise OptionError(f"{where}: loads but cannot encode a test sentence ({detail})") from None
    if not (0 < once < four and len(spans) == once):
        raise OptionError(f"{where}: counts {once} tokens in a test sentence and {four} in it four times "
                          f"over: not a tokenizer fourfold can count with")


def request_text(body: Any) -> str | None:
    """The text a request sends to the model: every message's content (text parts too) and the
    system prompt (chat dialects), or Triton's ``text_input``; None for a body of another shape."""
    if not isinstance(body, dict):
        return None
    texts: list[str] = []
    for value in (body.get("system"), *(m.get("content") for m in body.get("messages") or ()
                                         if isinstance(m, dict))):
        if isinstance(value, str):
            texts.append(value)
        elif isinstance(value, list):
            texts.extend(p["text"] for p in value if isinstance(p, dict) and isinstance(p.get("text"), str))
    if isinstance(body.get("text_input"), str):
        texts.append(body["text_input"])
    for tensor in body.get("inputs") or ():
        if isinstance(tensor, dict) and tensor.get("name") == "text_input":
            texts.extend(str(x) for x in tensor.get("data") or ())
    return "\n".join(texts) if texts else None




def count_record_tokens(record: Any, body: Any, answer: str, tokenizer: Tokenizer,
                        reasoning: str = "") -> None:
    """Token counts of a finished record by the target's tokenizer, after its body ended (nothing
    here can shift a timestamp): the input when the server reported none, the output (answer and
    reasoning) and the reasoning when their counts are not the server's usage (else the output's
    count goes beside it, ``client_output_tokens``); the source of each stays on the record."""
    if record.input_tokens is None:
        text = request_text(body)
        if text is not None:
            record.input_tokens = tokenizer.count(text)
            record.extra[INPUT_TOKENS_SOURCE] = "tokenizer"
    else:
        record.extra[INPUT_TOKENS_SOURCE] = "usage"
    thought = tokenizer.count(reasoning) if reasoning and record.reasoning_tokens_source != "usage" else None
    if thought is not None:
        record.reasoning_tokens, record.reasoning_tokens_source = thought, "tokenizer"
    if answer or reasoning:
        counted = (tokenizer.count(answer) if answer else 0) + (
            thought if thought is not None else tokenizer.count(reasoning) if reasoning else 0)
        if record.output_tokens_source != "usage":
            record.output_tokens, record.output_tokens_source = counted, "tokenizer"
        else:                           # the server's count stays; the tokenizer's is kept beside it
            record.client_output_tokens = counted

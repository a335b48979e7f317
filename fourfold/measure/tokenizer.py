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
from pathlib import Path
from typing import Any

from fourfold.errors import OptionError

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
        return len(self.backend.encode(text, add_special_tokens=False).ids)

    def offsets(self, text: str) -> list[tuple[int, int]]:
        """(start, end) character span of every token of ``text`` in ``text``."""
        return [tuple(span) for span in self.backend.encode(text, add_special_tokens=False).offsets]  # type: ignore[misc]


def load_tokenizer(path: str | Path, option: str = "--tokenizer") -> Tokenizer:
    """Load ``path`` (a tokenizer.json or a directory with one); OptionError naming ``option`` if unreadable."""
    given = Path(path).expanduser()
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
    except ImportError:                                        # pragma: no cover - installed with sentence-transformers
        raise OptionError(f"{option} needs the 'tokenizers' library (pip install tokenizers)") from None
    try:
        backend = _Backend.from_str(text)
    except Exception as exc:                                   # the library raises plain Exceptions
        detail = str(exc).splitlines()[0][:160] if str(exc) else type(exc).__name__
        raise OptionError(f"{option} {file}: not a tokenizer the 'tokenizers' library can load ({detail})") from None
    backend.no_truncation()
    backend.no_padding()
    return Tokenizer(path=str(file), backend=backend)

"""The RAG corpus and its questions, read straight from JSONL (no ``measure``: see targets/).

``corpus.jsonl``: one document a line, ``{"id", "title", "text", ...}``; ``questions.jsonl``:
``{"id", "prompt", "reference", "gold_ids", ...}`` (see ``data/rag/generate.py``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fourfold.data import bundled

__all__ = ["DEFAULT_CORPUS", "DEFAULT_QUESTIONS", "Document", "Question", "load_corpus", "load_questions"]

DATA_DIR = bundled("rag")
DEFAULT_CORPUS = DATA_DIR / "corpus.jsonl"
DEFAULT_QUESTIONS = DATA_DIR / "questions.jsonl"


@dataclass(frozen=True)
class Document:
    id: str
    title: str
    text: str
    meta: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def indexed_text(self) -> str:
        """What retrieval sees: the title, then the text."""
        return f"{self.title}. {self.text}" if self.title else self.text


@dataclass(frozen=True)
class Question:
    id: str
    prompt: str
    reference: str = ""
    gold_ids: tuple[str, ...] = ()


def _rows(path: str | Path) -> list[tuple[int, dict[str, Any]]]:
    rows = []
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            try:
                data = json.loads(line)
            except ValueError as exc:
                raise ValueError(f"{path}:{n}: not JSON ({exc})") from None
            if not isinstance(data, dict):
                raise ValueError(f"{path}:{n}: expected a JSON object")
            rows.append((n, data))
    return rows


def load_corpus(path: str | Path = DEFAULT_CORPUS) -> list[Document]:
    """Documents in file order; ids must be unique and text non-empty."""
    docs: list[Document] = []
    seen: set[str] = set()
    for n, data in _rows(path):
        doc_id, text = str(data.get("id") or ""), data.get("text")
        if not doc_id or not isinstance(text, str) or not text.strip():
            raise ValueError(f"{path}:{n}: a document needs a non-empty 'id' and 'text'")
        if doc_id in seen:
            raise ValueError(f"{path}:{n}: duplicate document id {doc_id!r}")
        seen.add(doc_id)
        meta = {k: v for k, v in data.items() if k not in ("id", "title", "text")}
        docs.append(Document(doc_id, str(data.get("title") or ""), text, meta))
    if not docs:
        raise ValueError(f"{path}: no documents")
    return docs


def load_questions(path: str | Path = DEFAULT_QUESTIONS) -> list[Question]:
    out = []
    for n, data in _rows(path):
        prompt = data.get("prompt") or data.get("question")
        if not isinstance(prompt, str) or "id" not in data:
            raise ValueError(f"{path}:{n}: a question needs 'id' and 'prompt'")
        out.append(Question(str(data["id"]), prompt, str(data.get("reference") or ""),
                            tuple(str(g) for g in data.get("gold_ids") or ())))
    return out

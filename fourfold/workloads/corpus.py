"""The L3 corpus: a JSONL file of documents (``id``, ``title``, ``text``, optional ``claims``) read into
:class:`fourfold.measure.rag.CorpusDoc` s, the documents the reference RAG service retrieves from and the
conflict check reads."""

from __future__ import annotations

import json
from pathlib import Path

from fourfold.measure.rag import CorpusDoc
from fourfold.workloads.items import jsonl_lines

__all__ = ["corpus_by_id"]


def corpus_by_id(path: str | Path) -> dict[str, CorpusDoc]:
    """id -> document of a corpus JSONL (``id``, ``title``, ``text``, optional ``claims``)."""
    docs: dict[str, CorpusDoc] = {}
    for n, line in jsonl_lines(path):
        try:
            data = json.loads(line)
            claims = {str(k): str(v) for k, v in (data.get("claims") or {}).items()}
            docs[str(data["id"])] = CorpusDoc(str(data["id"]), str(data.get("title") or ""),
                                              str(data["text"]), claims)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"{path}:{n}: not a corpus document ({exc}); expected id, title, text") from None
    return docs

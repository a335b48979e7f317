"""Fingerprint speed: answers/s of all-MiniLM-L6-v2 on this machine, cold and cached.

Answers are built from the bundled English reference answers (sentences shuffled with a fixed
seed) to about ``--tokens`` MiniLM word pieces each (uniform in +/-20%, so batches need sorting),
all distinct. For each ``--threads`` setting (``torch.set_num_threads``) and batch size:

- cold, batched: ``MiniLMEmbedder.encode(all answers)`` (longest first, ``--batch-size`` a batch),
  no cache;
- cold, one at a time: ``encode([answer])`` per answer (``--single`` answers), the way a naive
  scorer calls the model; the speed-up is batched / one-at-a-time. Both are measured
  ``--repeat`` times, alternating, and the best rate of each is reported (a shared box is noisy);

then, once:

- cached, in process: ``CachedEmbedder`` over a SQLite cache that already holds every answer
  (hash + lookup only; the model is not called);
- cached, new process: a fresh interpreter that scores the same answers from the cache (it never
  imports torch), wall time including interpreter start.

The import of torch + sentence-transformers and the model load are timed separately (first
load only). Load average is printed before and after: on a shared box the figures move with it.

    python benchmarks/fingerprint.py                        # 96 answers, threads 1 and 2, batch 32
    python benchmarks/fingerprint.py --threads 1 --batch-size 16 32 64 --n 128
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from fourfold.data import DATA_DIR  # noqa: E402
from fourfold.fingerprint.embedder import CachedEmbedder, EmbeddingCache, MiniLMEmbedder, text_key  # noqa: E402
from fourfold.workloads.items import load_items  # noqa: E402

_SENTENCE_RE = re.compile(r"[^.!?\n]+[.!?]")


def make_answers(tokenizer, n: int, tokens: int, seed: int = 1) -> list[str]:
    """``n`` distinct English answers of about ``tokens`` word pieces (+/-20%)."""
    items = load_items(DATA_DIR / "prompts" / "prompts.jsonl")
    sentences = [s.strip() for item in items if "en" in item.meta.get("tags", [])
                 for ref in item.references for s in _SENTENCE_RE.findall(ref) if len(s.split()) > 3]
    rng = random.Random(seed)
    answers: list[str] = []
    seen: set[str] = set()
    while len(answers) < n:
        target = rng.randint(int(tokens * 0.8), int(tokens * 1.2))
        parts: list[str] = []
        while len(tokenizer(" ".join(parts))["input_ids"]) - 2 < target:
            parts.append(rng.choice(sentences))
        text = " ".join(parts)
        if text not in seen:
            seen.add(text)
            answers.append(text)
    return answers


def rate(count: int, seconds: float) -> float:
    return count / seconds if seconds > 0 else float("inf")


def cached_new_process(answers_file: Path, cache_file: Path) -> float:
    code = ("import json, sys, time; t = time.perf_counter(); sys.path.insert(0, sys.argv[3]);"
            "from fourfold.fingerprint.embedder import CachedEmbedder, EmbeddingCache, MiniLMEmbedder;"
            "texts = json.load(open(sys.argv[1]));"
            "e = CachedEmbedder(MiniLMEmbedder(), EmbeddingCache(sys.argv[2])); v = e.encode(texts);"
            "assert e.misses == 0 and 'torch' not in sys.modules, (e.misses, 'torch');"
            "print(time.perf_counter() - t)")
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", code, str(answers_file), str(cache_file), str(REPO)], check=True,
                   capture_output=True, text=True)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=96, help="answers encoded batched (default 96)")
    parser.add_argument("--single", type=int, default=24, help="answers encoded one at a time (default 24)")
    parser.add_argument("--tokens", type=int, default=150, help="word pieces per answer (default 150)")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2],
                        help="torch thread counts (default 1 2)")
    parser.add_argument("--batch-size", type=int, nargs="+", default=[32], help="batch sizes (default 32)")
    parser.add_argument("--repeat", type=int, default=3,
                        help="measurements per setting, batched and one-at-a-time alternating; the best "
                             "of each is reported (default 3)")
    parser.add_argument("--backend", default="torch-fp32",
                        help="embedding backend (default torch-fp32, the reference; "
                             "benchmarks/fingerprint_backends.py compares fp32 with bf16)")
    parser.add_argument("--json", action="store_true", help="print JSON rows instead of a table")
    args = parser.parse_args()

    load_before = os.getloadavg()
    os.environ["HF_HUB_OFFLINE"] = "1"                           # as MiniLMEmbedder.load does
    started = time.perf_counter()
    import sentence_transformers  # noqa: F401
    import torch
    import_s = time.perf_counter() - started
    first = MiniLMEmbedder(threads=args.threads[0], batch_size=args.batch_size[0], backend=args.backend)
    started = time.perf_counter()
    model = first.load()
    load_s = time.perf_counter() - started
    answers = make_answers(model.tokenizer, args.n, args.tokens)
    lengths = sorted(len(model.tokenizer(a)["input_ids"]) - 2 for a in answers)
    first.encode(answers[:4])                                     # warm-up: first-call allocations

    rows = []
    vectors = None
    for threads in args.threads:
        for batch_size in args.batch_size:
            embedder = MiniLMEmbedder(threads=threads, batch_size=batch_size, backend=args.backend)
            embedder._model = model                               # share the loaded weights
            single_texts = answers[: args.single]
            batched = single = 0.0
            for _ in range(args.repeat):                          # alternate, keep the best of each
                started = time.perf_counter()
                vectors = embedder.encode(answers)
                batched = max(batched, rate(len(answers), time.perf_counter() - started))
                started = time.perf_counter()
                for text in single_texts:
                    embedder.encode([text])
                single = max(single, rate(len(single_texts), time.perf_counter() - started))
            rows.append({"mode": "cold", "threads": threads, "batch_size": batch_size,
                         "batched_answers_per_s": round(batched, 2),
                         "one_at_a_time_answers_per_s": round(single, 2),
                         "batching_speedup": round(batched / single, 2)})

    with tempfile.TemporaryDirectory() as tmp:
        cache_file = Path(tmp) / "embeddings.sqlite3"
        with EmbeddingCache(cache_file) as cache:
            cache.put_many(first.model_id, [(text_key(a), v) for a, v in zip(answers, vectors)])
        with EmbeddingCache(cache_file) as cache:
            cached = CachedEmbedder(first, cache)
            calls = first.calls
            started = time.perf_counter()
            cached.encode(answers)
            cached_rate = rate(len(answers), time.perf_counter() - started)
            assert first.calls == calls and cached.misses == 0
        answers_file = Path(tmp) / "answers.json"
        answers_file.write_text(json.dumps(answers))
        new_process_s = cached_new_process(answers_file, cache_file)
    load_after = os.getloadavg()

    facts = {
        "answers": len(answers), "tokens_min": lengths[0], "tokens_median": lengths[len(lengths) // 2],
        "tokens_max": lengths[-1], "cpu_count": os.cpu_count(), "torch": torch.__version__,
        "backend": first.backend, "import_s": round(import_s, 2), "load_s": round(load_s, 2),
        "cached_in_process_answers_per_s": round(cached_rate),
        "cached_new_process_s": round(new_process_s, 2),
        "loadavg_before": [round(x, 2) for x in load_before],
        "loadavg_after": [round(x, 2) for x in load_after],
    }
    if args.json:
        print(json.dumps({"facts": facts, "rows": rows}, indent=1))
        return 0
    print(f"{facts['answers']} answers of {facts['tokens_min']}-{facts['tokens_max']} word pieces "
          f"(median {facts['tokens_median']}); {facts['cpu_count']} CPUs; "
          f"torch {facts['torch']} ({facts['backend']}); "
          f"load average {facts['loadavg_before'][0]} before, {facts['loadavg_after'][0]} after")
    print(f"import torch + sentence-transformers {facts['import_s']} s, model load {facts['load_s']} s\n")
    print("| mode | threads | batch | answers/s batched | answers/s one at a time | batching speed-up |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        print(f"| cold (no cache) | {row['threads']} | {row['batch_size']} | "
              f"{row['batched_answers_per_s']} | {row['one_at_a_time_answers_per_s']} | "
              f"{row['batching_speedup']}x |")
    print(f"| cached, in process | - | - | {facts['cached_in_process_answers_per_s']} | - | - |")
    print(f"| cached, new process (no torch import) | - | - | {rate(len(answers), new_process_s):.0f} "
          f"({new_process_s:.2f} s wall for {len(answers)}) | - | - |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Fingerprint backends: answers/s of torch fp32 and torch bf16 autocast at the same thread count.

The answers are benchmarks/fingerprint.py's (bundled English reference sentences shuffled to about
``--tokens`` word pieces each, all distinct). For each ``--threads`` setting both backends encode
all answers (batch ``--batch-size``, longest first), alternating, ``--repeat`` times; the best
rate of each is reported with the ratio bf16 / fp32, beside the CPU flags that decide ``auto``
(``amx_bf16``: bf16 autocast runs on AMX tiles; without it bf16 is emulated and slower) and the
faithfulness of bf16 on these answers (lowest cosine to the fp32 vector).

    python benchmarks/fingerprint_backends.py                  # 64 answers, 1 thread, best of 3
    python benchmarks/fingerprint_backends.py --threads 1 2 --n 96
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from fingerprint import make_answers  # noqa: E402

from fourfold.fingerprint.embedder import MiniLMEmbedder, choose_backend  # noqa: E402

FLAGS = ("amx_bf16", "amx_tile", "avx512_bf16", "avx512f", "avx2")


def cpu_flags() -> tuple[str, list[str]]:
    text = Path("/proc/cpuinfo").read_text(errors="replace") if Path("/proc/cpuinfo").exists() else ""
    model = next((line.split(":", 1)[1].strip() for line in text.splitlines()
                  if line.startswith("model name")), "?")
    flags = next((line.split(":", 1)[1].split() for line in text.splitlines()
                  if line.startswith("flags")), [])
    return model, [f for f in FLAGS if f in flags]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=64, help="answers (default 64)")
    parser.add_argument("--tokens", type=int, default=150, help="word pieces per answer (default 150)")
    parser.add_argument("--threads", type=int, nargs="+", default=[1], help="torch thread counts (default 1)")
    parser.add_argument("--batch-size", type=int, default=32, help="batch size (default 32)")
    parser.add_argument("--repeat", type=int, default=3,
                        help="measurements per backend; best kept (default 3)")
    args = parser.parse_args()

    model_name, flags = cpu_flags()
    fp32 = MiniLMEmbedder(backend="torch-fp32", threads=args.threads[0], batch_size=args.batch_size)
    model = fp32.load()
    bf16 = MiniLMEmbedder(backend="torch-bf16", threads=args.threads[0], batch_size=args.batch_size)
    bf16._model = model                                             # the same weights
    answers = make_answers(model.tokenizer, args.n, args.tokens)
    fp32.encode(answers[:4])
    bf16.encode(answers[:4])                                        # warm-up of both paths
    print(f"CPU: {model_name}; {os.cpu_count()} CPUs; "
          f"flags present: {', '.join(flags) or 'none of ' + ', '.join(FLAGS)}")
    print(f"auto picks {choose_backend('auto')} here; {len(answers)} answers of ~{args.tokens} word pieces, "
          f"batch {args.batch_size}, best of {args.repeat}; load average {os.getloadavg()[0]:.2f}\n")
    print("| threads | torch-fp32 answers/s | torch-bf16 answers/s | bf16 / fp32 "
          "| lowest cosine bf16 vs fp32 |")
    print("|---|---|---|---|---|")
    for threads in args.threads:
        fp32.threads = bf16.threads = threads
        best = {"fp32": 0.0, "bf16": 0.0}
        vectors = {}
        for _ in range(args.repeat):
            for name, embedder in (("fp32", fp32), ("bf16", bf16)):
                started = time.perf_counter()
                vectors[name] = embedder.encode(answers)
                best[name] = max(best[name], len(answers) / (time.perf_counter() - started))
        cosine = float((vectors["fp32"] * vectors["bf16"]).sum(axis=1).min())
        print(f"| {threads} | {best['fp32']:.1f} | {best['bf16']:.1f} | {best['bf16'] / best['fp32']:.2f}x | "
              f"{cosine:.6f} |")
    print(f"\nload average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``fourfold score RUN_DIR``: the semantic fingerprint of a finished run (``scores.jsonl`` and the
``quality`` block of ``summary.json``), and the run's compare cache left beside it."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from fourfold.errors import RunDirError, UsageError
from fourfold.fingerprint.runscore import format_quality, make_embedder, score_run
from fourfold.reports.cache import CACHE_FILE
from fourfold.reports.load import load_run

__all__ = ["add_arguments", "run"]


def add_arguments(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument("run_dir", help="a run directory (runs/<UTC time>-<label>)")
    cmd.add_argument("--batch-size", type=int, default=32, help="texts per model batch (default 32)")
    cmd.add_argument("--threads", type=int, default=None,
                     help="torch threads (default: 1 on <=2 cores, else half the cores up to 4; "
                          "env FOURFOLD_EMBED_THREADS)")
    cmd.add_argument("--no-cache", action="store_true", help="do not read or write the embedding cache")
    cmd.add_argument("--cache-dir", default=None,
                     help="cache directory (default: $FOURFOLD_CACHE_DIR, else $XDG_CACHE_HOME/fourfold or "
                          "~/.cache/fourfold)")
    cmd.add_argument("--embed-backend", default=None, metavar="{auto,torch-fp32,torch-bf16}",
                     help="auto (default; env FOURFOLD_EMBED_BACKEND): torch-bf16 autocast where the CPU has "
                          "AMX-bf16, else torch-fp32")
    cmd.add_argument("--embed-model", default=None, metavar="PATH",
                     help="a local sentence-transformers model directory instead of the bundled "
                          "all-MiniLM-L6-v2 (its name and weights sha256 are recorded)")
    cmd.add_argument("--unk-threshold", type=float, default=0.2,
                     help="an answer with more than this share of [UNK] word pieces is low-confidence: its "
                          "similarity is left out of the means (default 0.2)")
    cmd.add_argument("--dataset", default=None,
                     help="the run's dataset, when meta.json's path does not resolve")
    cmd.add_argument("--no-compare-cache", action="store_true",
                     help="do not leave compare-cache.npz (the columnar copy fourfold compare reads)")


def run(args: argparse.Namespace, rest: list[str]) -> int:
    if args.batch_size < 1 or (args.threads is not None and args.threads < 1):
        raise UsageError("--batch-size and --threads must be at least 1")
    if not 0.0 <= args.unk_threshold <= 1.0:
        raise UsageError(f"--unk-threshold must be a share in [0, 1], got {args.unk_threshold:g}")
    embedder = make_embedder(batch_size=args.batch_size, threads=args.threads, use_cache=not args.no_cache,
                             cache_dir=args.cache_dir, backend=args.embed_backend,
                             model_path=args.embed_model)
    result = score_run(args.run_dir, embedder, dataset=args.dataset, chunk_size=args.batch_size,
                       unk_threshold=args.unk_threshold)
    print(format_quality(result))
    if not args.no_compare_cache:
        _leave_compare_cache(args.run_dir)
    return 0


def _leave_compare_cache(run_dir: str) -> None:
    """Read the scored run once more as ``fourfold compare`` does, which leaves its columnar copy
    (``compare-cache.npz``, see :mod:`fourfold.reports.cache`) next to the records: the first compare of a
    scored run is then as fast as a repeated one. A run that cannot be read or written that way
    only loses the cache; scoring has succeeded either way."""
    try:
        load_run(run_dir)
    except (RunDirError, OSError, ValueError) as exc:
        print(f"fourfold: no compare cache for {run_dir}: {exc}", file=sys.stderr)
        return
    if (Path(run_dir) / CACHE_FILE).exists():
        print(f"wrote {Path(run_dir) / CACHE_FILE} (fourfold compare reads it instead of records.jsonl)")

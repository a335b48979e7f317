"""``fourfold mirror RUN_DIR``: the paired comparison of a run's mirrored requests (reports.mirror)."""

from __future__ import annotations

import argparse
from pathlib import Path

from fourfold.errors import RunDirError, UsageError
from fourfold.fingerprint.runscore import make_embedder
from fourfold.reports.mirror import compare_mirror, format_markdown
from fourfold.rundir.runread import read_records


def add_arguments(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument("run_dir", help="a run made with --mirror-host")
    cmd.add_argument("--out", default=None, help="also write the Markdown here (default: RUN_DIR/mirror.md)")
    cmd.add_argument("--no-similarity", action="store_true",
                     help="skip the answer similarity (no model load)")
    cmd.add_argument("--seed", type=int, default=0, help="bootstrap seed")


def run(args: argparse.Namespace, rest: list[str]) -> int:
    run_dir = Path(args.run_dir)
    out = Path(args.out) if args.out else run_dir / "mirror.md"
    if args.out and (out.is_dir() or any(p.exists() and not p.is_dir() for p in out.parents)):
        raise UsageError(f"--out {args.out}: give a file path for the Markdown (a directory is there, or a "
                         "file where a directory should be)")
    if not (run_dir / "records.jsonl").exists():
        raise RunDirError(f"{run_dir}: no such directory" if not run_dir.exists()
                          else f"{run_dir}: no records.jsonl (not a run directory)")
    records = list(read_records(run_dir))
    embed = None
    if not args.no_similarity:
        embed = make_embedder().encode
    report = compare_mirror(records, embed=embed, seed=args.seed)
    if not report.pairs:
        raise UsageError(f"{run_dir}: no mirrored pairs (was the run made with --mirror-host?)")
    text = format_markdown(report)
    print(text)
    try:
        out.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"{out}: cannot write the report ({exc.strerror or exc})") from None
    print(f"fourfold: mirrored-pair report in {out}")
    return 0

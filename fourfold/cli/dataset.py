"""``fourfold dataset inspect FILE`` and ``fourfold dataset convert FILE --to jsonl`` (docs/datasets.md).

    fourfold dataset inspect data/sharegpt.json                  # format, items, lengths, 3 examples
    fourfold dataset inspect qa.parquet --dataset-column prompt=question,reference=answer
    fourfold dataset convert data/sharegpt.json --to jsonl --out prompts.jsonl

Both read the file exactly as a run does (:func:`fourfold.workloads.formats.load_dataset`), so a file
``inspect`` accepts is one a run accepts, and a bad one is the same one-line error with exit 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from fourfold.errors import DatasetError, UsageError
from fourfold.measure.console import counted
from fourfold.workloads.formats import FORMAT_NAMES, Dataset, load_dataset, parse_columns
from fourfold.workloads.formats_inspect import format_inspection, inspect, inspection_dict, write_jsonl
from fourfold.workloads.synthetic import estimate_tokens
from fourfold.workloads.tokenizer import load_tokenizer

ESTIMATE = "estimated: a word or a punctuation mark is one token; --tokenizer for exact counts"


def add_arguments(cmd: argparse.ArgumentParser) -> None:
    sub = cmd.add_subparsers(dest="dataset_command", metavar="ACTION", required=True)
    inspect_cmd = sub.add_parser("inspect",
                                 help="what fourfold reads in a dataset file: format, items, lengths")
    convert_cmd = sub.add_parser("convert", help="write a dataset file as fourfold's own JSONL")
    for action in (inspect_cmd, convert_cmd):
        action.add_argument("file", help="a dataset file (fourfold JSONL, ShareGPT, OpenAI chat or batch, "
                                         "Parquet, CSV, JSON, trace)")
        action.add_argument("--dataset-format", default="auto", choices=list(FORMAT_NAMES),
                            help="read the file as this format (default: told from the content)")
        action.add_argument("--dataset-column", default="",
                            help="columns of a Parquet/CSV/JSON file: 'prompt=question,reference=answer' "
                                 "(also id=, max_tokens=, system=)")
    inspect_cmd.add_argument("--tokenizer", default="",
                             help="count tokens with this tokenizer.json or tokenizer directory "
                                  "(default: an estimate)")
    inspect_cmd.add_argument("--json", action="store_true", help="print the findings as JSON")
    convert_cmd.add_argument("--to", required=True, choices=["jsonl"],
                             help="the output format: jsonl (fourfold's own)")
    convert_cmd.add_argument("--out", default=None,
                             help="output file ('-': standard output; default: FILE's name with "
                                  ".fourfold.jsonl)")


def run(args: argparse.Namespace, rest: list[str]) -> int:
    dataset = load_dataset(args.file, args.dataset_format, parse_columns(args.dataset_column))
    if args.dataset_command == "inspect":
        if args.tokenizer:
            tokenizer = load_tokenizer(args.tokenizer)
            count, counter = tokenizer.count, f"exact, tokenizer {tokenizer.name}"
        else:
            count, counter = estimate_tokens, ESTIMATE
        found = inspect(dataset, count, counter)
        print(json.dumps(inspection_dict(found), ensure_ascii=False, indent=1) if args.json
              else format_inspection(found))
        return 0
    return _convert(args, dataset)


def _convert(args: argparse.Namespace, dataset: Dataset) -> int:
    items = dataset.items
    if args.out == "-":
        for item in items:
            sys.stdout.write(json.dumps(item.to_dict(), ensure_ascii=False, default=str) + "\n")
        return 0
    source = Path(args.file)
    out = Path(args.out) if args.out else source.with_name(f"{source.stem}.fourfold.jsonl")
    if out.resolve() == source.resolve():
        raise UsageError(f"--out {out}: that is the input file; choose another name")
    try:
        size = write_jsonl(items, out)
    except DatasetError as exc:
        raise UsageError(f"--out {exc}") from None
    except OSError as exc:
        raise UsageError(f"--out {out}: cannot write ({exc.strerror or exc})") from None
    print(f"wrote {out}: {counted(len(items), 'item')} as fourfold JSONL ({size:,} bytes; "
          f"read as {dataset.format})", file=sys.stderr)
    return 0


__all__ = ["add_arguments", "run"]

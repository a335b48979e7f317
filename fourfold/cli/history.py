"""``fourfold history``: runs kept release by release, the trend of a metric, a run against the recent past.

    fourfold history add runs/<run> [runs/<run> ...] --release v1.4 [--tag gpu=h100]
    fourfold history list
    fourfold history show ttft_p95 [--level l1] [--out history-out]   # table, trend SVG and HTML
    fourfold history check runs/<new run> [--last 5]    # exit 3: a gated row worse than the recent past
    fourfold history remove ID [ID ...]

The store: ``--history`` (a SQLite file, or ``postgresql://user:password@host/db``), else
``$FOURFOLD_HISTORY``, else ``fourfold-history.sqlite`` in the current directory
(:mod:`fourfold.history.store`; docs/history.md).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from fourfold.cli.compare import check_out_dir, compare_settings, settings_arguments
from fourfold.errors import GateFailed, UsageError
from fourfold.history.check import DEFAULT_LAST, check_entry, trend, unit_of, worse_rows
from fourfold.history.entry import build_entry
from fourfold.history.store import ENV, Store, open_store, shown
from fourfold.history.trend import render_table, write_trend
from fourfold.reports.markdown import ALIGN, HEADER, cell, row_cells

DEFAULT_OUT = "history-out"


def _store_argument(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument("--history", default=None, metavar="FILE|URL",
                     help=f"the store: a SQLite file or a postgresql:// URL (default: ${ENV}, else "
                          "fourfold-history.sqlite in the current directory)")


def add_arguments(cmd: argparse.ArgumentParser) -> None:
    sub = cmd.add_subparsers(dest="history_command", metavar="ACTION", required=True)
    add = sub.add_parser("add", help="add finished runs to the history as one release")
    add.add_argument("runs", nargs="+", metavar="RUN_DIR")
    add.add_argument("--release", required=True, help="the release the runs are of (e.g. v1.4, a commit)")
    add.add_argument("--tag", action="append", default=[], metavar="KEY=VALUE",
                     help="a label kept with the runs (repeatable), e.g. gpu=h100")
    _store_argument(add)
    lister = sub.add_parser("list", help="the runs in the history, in the order they ran")
    _store_argument(lister)
    show = sub.add_parser("show", help="a metric across releases: table, trend SVG and HTML")
    show.add_argument("metric", help="a report row key (ttft_p95, output_tps, error_rate, "
                                     "similarity_mean...) or a quantile of ttft/ttfo/e2e/tpot/itl (ttft_p90)")
    show.add_argument("--level", default=None, help="only this level's groups (l1, l2, l3, l4, embed)")
    show.add_argument("--scenario", default=None, help="only this scenario's groups")
    show.add_argument("--last", type=int, default=None, help="only the last N releases")
    show.add_argument("--out", default=DEFAULT_OUT, help=f"where the SVG and HTML go (default {DEFAULT_OUT})")
    show.add_argument("--alpha", type=float, default=0.05,
                      help="1 - the intervals' confidence (default 0.05)")
    _store_argument(show)
    check = sub.add_parser("check", help="a run against the last N releases: exit 3 when a gated row is "
                                         "worse (fourfold compare's verdicts, runs as replicates)")
    check.add_argument("run", metavar="RUN_DIR")
    check.add_argument("--last", type=int, default=DEFAULT_LAST,
                       help=f"the releases to check against (default {DEFAULT_LAST})")
    check.add_argument("--min-effect", action="append", default=[], metavar="KEY=VALUE",
                       help="the smallest change that matters for a row (as fourfold compare's)")
    check.add_argument("--gate", default=None, metavar="PATTERN,...",
                       help="the rows that fail the check (default: fourfold compare's gated rows)")
    check.add_argument("--all-rows", action="store_true", help="print every row, not only the gated ones")
    settings_arguments(check)
    _store_argument(check)
    remove = sub.add_parser("remove", help="remove runs from the history by id (fourfold history list)")
    remove.add_argument("ids", nargs="+", type=int, metavar="ID")
    _store_argument(remove)


def _tags(pairs: list[str]) -> dict[str, str]:
    tags = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--tag {pair!r}: expected KEY=VALUE, such as gpu=h100")
        tags[key.strip()] = value.strip()
    return tags


def run(args: argparse.Namespace, _rest: list[str]) -> int:
    store = open_store(args.history)
    try:
        return _ACTIONS[args.history_command](store, args)
    finally:
        store.close()


def _add(store: Store, args: argparse.Namespace) -> int:
    if not args.release.strip():
        raise UsageError("--release must name the release (e.g. v1.4)")
    tags = _tags(args.tag)
    for path in args.runs:
        entry = build_entry(Path(path), args.release.strip(), tags)
        run_id = store.add(entry.run, entry.groups, entry.figures, entry.histograms)
        print(f"history: added {entry.run['run_id']} as release {args.release.strip()!r} (id {run_id}, "
              f"{len(entry.groups)} group(s), {len(entry.figures)} figures) to {shown(store.where)}")
    return 0


def _list(store: Store, _args: argparse.Namespace) -> int:
    runs = store.runs()
    if not runs:
        print(f"history: {shown(store.where)} holds no run yet (fourfold history add RUN --release NAME)")
        return 0
    groups = store.groups()
    rows = [["id", "release", "run", "groups", "model", "fourfold", "added", "tags"]]
    rows += [[str(r.id), r.release, r.run_id, ", ".join(sorted(g for (i, g) in groups if i == r.id)),
              r.model or "?", r.fourfold_version or "?", r.added_at,
              ", ".join(f"{k}={v}" for k, v in sorted(r.tags.items()))] for r in runs]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    print(f"({len(runs)} runs in {shown(store.where)})")
    return 0


def _show(store: Store, args: argparse.Namespace) -> int:
    if args.last is not None and args.last < 1:
        raise UsageError("--last must be >= 1")
    out = check_out_dir(args.out)
    points = trend(store, args.metric, level=args.level, scenario=args.scenario, last=args.last,
                   alpha=args.alpha)
    unit = unit_of(store, args.metric)
    print(render_table(args.metric, unit, points))
    svg_path, html_path = write_trend(args.metric, unit, points, out)
    print(f"wrote {svg_path}, {html_path}")
    return 0


def _check(store: Store, args: argparse.Namespace) -> int:
    if args.last < 1:
        raise UsageError("--last must be >= 1")
    settings = compare_settings(args)
    entry = build_entry(Path(args.run), "(checked)", {}, settings)
    result = check_entry(store, entry, settings, args.last)
    for group, releases in result.baselines.items():
        rows = [r for r in result.rows if r.group == group and (args.all_rows or r.gated)]
        print(f"## {group}: {entry.run['run_id']} against release(s) {', '.join(reversed(releases))}\n")
        print("| " + " | ".join(HEADER) + " |\n|" + "|".join(ALIGN) + "|")
        for row in rows:
            print("| " + " | ".join(cell(c) for c in row_cells(row)) + " |")
        print()
    for note in result.notes:
        print(f"note: {note}")
    if not result.baselines:
        raise UsageError(f"nothing to check {args.run} against: no group of it is in {shown(store.where)} "
                         "(fourfold history add RUN --release NAME first)")
    worse = worse_rows(result.rows)
    if worse:
        raise GateFailed(f"history check: {len(worse)} gated row(s) worse than the last releases: "
                         + "; ".join(f"{r.group} {r.metric} ({r.label}) {r.baseline:.4g} -> {r.candidate:.4g}"
                                     for r in worse))
    decided = any(r.gated and r.p_value is not None for r in result.rows)
    print("history check: passed" if decided else
          "history check: passed without a verdict: no gated row could be decided (add >= 2 releases' runs, "
          "or more requests)", file=sys.stdout)
    return 0


def _remove(store: Store, args: argparse.Namespace) -> int:
    gone = store.remove(args.ids)
    print(f"history: removed {gone} run(s) from {shown(store.where)}")
    return 0


_ACTIONS = {"add": _add, "list": _list, "show": _show, "check": _check, "remove": _remove}

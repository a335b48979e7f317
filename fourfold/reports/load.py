"""Run directories -> pandas frames -> the per-group samples that :mod:`reports.compare` tests.

:func:`load_run` validates a run directory and reads it:

- ``meta.json`` and ``summary.json`` (optional; JSON objects when present; a newer ``record_schema`` refused);
- ``records.jsonl`` through :func:`reports.records.read_record_table` (fast, bounded memory; a
  torn or damaged line is skipped with a warning, a record of a newer schema or a line that is
  not a fourfold record is refused);
- ``scores.jsonl`` when ``fourfold score`` has run (:func:`reports.scores.read_scores`: similarity,
  compliance, groundedness per scored answer, with its level, scenario, variant and item);
- the run's dataset (``meta.json`` ``settings.dataset``, else the bundled prompts) to tell *structured*
  prompts (tag ``structured``, or a ``requested_items`` count) from plain ones (the first-token probe).

What it keeps of ``records.jsonl`` and ``scores.jsonl`` comes from the run's ``compare-cache.npz``
(:mod:`reports.cache`) while valid for them, and is written there after a read (``cache=False``: neither).
Anything wrong raises :class:`RunDirError` (exit code 2) naming the file and the problem.
:func:`group_samples` turns a loaded run (or one variant of it) into :class:`reports.compare.GroupSample` s
keyed ``level:scenario`` (L4's sticky A/B ``session@A`` / ``session@B`` meet in one group; a ``--mix``
tenant's records also make its own ``level:scenario#tenant``, without answer scores). Session facts come
from the record that ends a session (``extra["session_completed"]``, ``extra["rounds"]``), L3 retrieval
quality from ``extra["recall_at_k"]``, ``extra["precision_at_k"]``, ``extra["conflict"]``. Per-request
values (TPOT, interrupted, end time, goodput, token timing) are summary.json's formulas, vectorised.
"""

from __future__ import annotations

import functools
import math
import multiprocessing
import os
import warnings
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fourfold.data import DATA_DIR, find
from fourfold.errors import RunDirError, SchemaError, UsageError
from fourfold.measure.metrics import (
    answer_tps_array,
    check_slo,
    end_offset_ms_array,
    interrupted_array,
    jitter_ms_of_gaps,
    meets_slo_array,
    pulse_hz_of_gaps,
    reasoning_ms_array,
    reasoning_tps_array,
    tpot_ms_array,
    wall_s,
)
from fourfold.measure.record import SCHEMA_VERSION
from fourfold.measure.tokentiming import token_counts_array
from fourfold.measure.toolcalls import tool_counts_array
from fourfold.reports.cache import RunCache, stamp
from fourfold.reports.compare import GroupSample, ItlSample
from fourfold.reports.costrows import cost_fields
from fourfold.reports.embedrows import embed_fields
from fourfold.reports.phaserows import add_phases
from fourfold.reports.records import (
    GAP_SAMPLE_RECORDS,
    GroupKey,
    RecordTable,
    merged_gaps,
    read_record_table,
    variant_users,
)
from fourfold.reports.replication import block_ids, per_block, sorted_with_blocks
from fourfold.reports.scores import SCORES_FILE, add_answer_scores
from fourfold.reports.scores import read_scores as _read_scores  # (a module global: tests replace it)
from fourfold.reports.telemetry import join as join_telemetry
from fourfold.reports.telemetry import read_telemetry
from fourfold.reports.tenants import is_tenant_group, tenant_groups
from fourfold.rundir.plausible import OPTIONAL_FIELDS
from fourfold.rundir.runlog import META_FILE, RECORDS_FILE, SUMMARY_FILE
from fourfold.rundir.runread import read_json_object as _read_json_object
from fourfold.rundir.runread import require_regular
from fourfold.workloads.formats import load_run_dataset

__all__ = ["SCORES_FILE", "RunData", "RunDirError", "base_scenario", "group_names", "group_samples",
           "load_run", "load_runs", "prompt_kinds", "run_variants"]

DEFAULT_DATASET = DATA_DIR / "prompts" / "prompts.jsonl"
PARALLEL_BYTES = 256 << 20


@dataclass
class RunData:
    """A loaded run directory."""

    path: Path
    label: str
    meta: dict[str, Any]
    summary: dict[str, Any] | None
    table: RecordTable
    scores: pd.DataFrame | None
    stall_ms: float
    kinds: dict[str, str] = field(default_factory=dict)    # item id -> "structured" / "plain"
    telemetry: dict[str, np.ndarray] = field(default_factory=dict)   # server_metrics.json (reports.telemetry)

    @property
    def records(self) -> pd.DataFrame:
        return self.table.frame

    @property
    def slo_ms(self) -> dict[str, float]:
        slo = (self.summary or {}).get("slo_ms") or {}
        return {str(k): float(v) for k, v in slo.items()} if isinstance(slo, dict) else {}


Entry = tuple[RunData, pd.DataFrame, list[GroupKey]]    # a run, its rows of one group, the group's keys


def _threshold(settings: dict[str, Any], summary: dict[str, Any] | None, stall_ms: float | None) -> float:
    return float(stall_ms if stall_ms is not None else
                 settings.get("stall_ms") or (summary or {}).get("stall_threshold_ms") or 150.0)


def load_run(path: str | os.PathLike[str], *, stall_ms: float | None = None, cache: bool = True) -> RunData:
    """Read and validate one run directory (see module docstring); with ``cache``, through the
    run's columnar cache (:mod:`reports.cache`), written on the first read."""
    run_dir = Path(path)
    if not run_dir.exists():
        raise RunDirError(f"{run_dir}: no such directory")
    if not run_dir.is_dir():
        raise RunDirError(f"{run_dir}: not a directory (give a run directory, runs/<UTC time>-<label>)")
    records_path = run_dir / RECORDS_FILE
    if records_path.exists():
        require_regular(records_path)      # a FIFO would wait for good: one error instead
    if not records_path.is_file():
        found = ", ".join(sorted(p.name for p in run_dir.iterdir())[:8]) or "nothing"
        raise RunDirError(f"{run_dir}: not a fourfold run directory: no {RECORDS_FILE} (found {found})")
    meta = _read_json_object(run_dir / META_FILE) or {}
    schema = meta.get("record_schema", 1)
    if not isinstance(schema, int) or schema > SCHEMA_VERSION:
        raise SchemaError(f"{run_dir / META_FILE}: record_schema {schema!r} is newer than the "
                          f"{SCHEMA_VERSION} this fourfold reads; upgrade fourfold to compare this run")
    summary = _read_json_object(run_dir / SUMMARY_FILE)
    settings = meta["settings"] if isinstance(meta.get("settings"), dict) else {}
    threshold = _threshold(settings, summary, stall_ms)
    scores_path = run_dir / SCORES_FILE
    run_cache = RunCache.open(run_dir) if cache else None
    records_stamp, scores_stamp = (stamp(records_path), stamp(scores_path)) if cache else (None, None)
    table = run_cache.table(records_stamp, threshold, GAP_SAMPLE_RECORDS) if run_cache else None
    scores = run_cache.scores(scores_stamp) if run_cache else None
    table_read = table is None
    if table is None:
        table = _read_table(records_path, threshold)
    if table.unreadable:
        warnings.warn(f"{table.first_unreadable}"
                      + (f" (and {table.unreadable - 1} more)" if table.unreadable > 1 else ""),
                      RuntimeWarning, stacklevel=2)
    if table.frame.empty:
        why = (f"all {table.warmup + table.cancelled} records are warm-up or cancelled"
               if table.warmup + table.cancelled else "no readable record")
        raise RunDirError(f"{records_path}: nothing to compare ({why})")
    scores_read = scores is None
    if scores is None:
        scores = _read_scores(scores_path)
    if scores.skipped:
        warnings.warn(f"{scores_path}: skipped {scores.skipped} unreadable line(s)", RuntimeWarning,
                      stacklevel=2)
    if (run_cache is not None and records_stamp is not None and (table_read or scores_read)
            and stamp(records_path) == records_stamp and stamp(scores_path) == scores_stamp):
        run_cache.write(records_stamp, table, threshold, GAP_SAMPLE_RECORDS, scores_stamp, scores)
    label = meta["label"] if isinstance(meta.get("label"), str) and meta["label"] else run_dir.name
    return RunData(run_dir, label, meta, summary, table, scores.frame, threshold,
                   prompt_kinds(run_dir, settings), read_telemetry(run_dir))


def _read_table(records_path: Path, threshold: float) -> RecordTable:
    try:
        return read_record_table(records_path, stall_ms=threshold)     # RecordsFormatError, SchemaError
    except OSError as exc:
        raise RunDirError(f"{records_path}: cannot read ({exc})") from None


def _bytes_to_read(path: str | os.PathLike[str], stall_ms: float | None, cache: bool) -> int:
    """The size of a run's records.jsonl, or 0 when its cache holds the table (a cheap check)."""
    run_dir = Path(path)
    try:
        size = (run_dir / RECORDS_FILE).stat().st_size
        if not cache:
            return size
        meta = _read_json_object(run_dir / META_FILE) or {}
        settings = meta.get("settings")
        threshold = _threshold(settings if isinstance(settings, dict) else {},
                               _read_json_object(run_dir / SUMMARY_FILE), stall_ms)
    except (OSError, RunDirError, TypeError, ValueError):
        return 0     # load_run says what is wrong
    fresh = RunCache.open(run_dir).has_table(stamp(run_dir / RECORDS_FILE), threshold, GAP_SAMPLE_RECORDS)
    return 0 if fresh else size


def load_runs(paths: list[str | os.PathLike[str]], *, stall_ms: float | None = None,
              cache: bool = True) -> list[RunData]:
    """:func:`load_run` for each path; in parallel processes (one per run, up to the CPU count)
    when there are several runs with more than ``PARALLEL_BYTES`` of records to read in all
    (a run whose cache holds its table does not count)."""
    sizes = [_bytes_to_read(p, stall_ms, cache) for p in paths]
    workers = min(len(paths), os.cpu_count() or 1)
    load = functools.partial(load_run, stall_ms=stall_ms, cache=cache)
    if workers < 2 or sum(sizes) < PARALLEL_BYTES:
        return [load(p) for p in paths]

    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        return list(pool.map(load, paths))


def _dataset_path(run_dir: Path, settings: dict[str, Any]) -> Path | None:
    name = settings.get("dataset") or ""
    if not name:
        return DEFAULT_DATASET
    return find(name, run_dir)


def prompt_kinds(run_dir: Path, settings: dict[str, Any]) -> dict[str, str]:
    """Item id -> ``structured`` or ``plain`` for the run's dataset ({} when it is not found)."""
    path = _dataset_path(run_dir, settings)
    if path is None:
        return {}
    try:
        items = load_run_dataset(path, settings)
    except (OSError, ValueError):
        return {}
    return {item.id: "structured" if ("structured" in (item.meta.get("tags") or [])
                                      or isinstance(item.meta.get("requested_items"), int)) else "plain"
            for item in items}


def run_variants(run: RunData) -> list[str]:
    """The non-empty variants in a run's records, sorted."""
    return sorted(v for v in run.records["variant"].astype(str).unique() if v)


def base_scenario(scenario: str, variant: str) -> str:
    suffix = f"@{variant}"
    return scenario[: -len(suffix)] if variant and scenario.endswith(suffix) else scenario


def group_names(frame: pd.DataFrame) -> pd.Series:
    """``level:scenario`` of every row (records or scores), the ``@variant`` suffix dropped;
    computed once per distinct (level, scenario, variant), not per row."""
    if frame.empty:
        return pd.Series([], index=frame.index, dtype=object)
    ids = frame.groupby(["level", "scenario", "variant"], observed=True, sort=False).ngroup().to_numpy()
    _, first = np.unique(ids, return_index=True)
    levels, scenarios, variants = (frame[c].to_numpy(dtype=object)[first]
                                   for c in ("level", "scenario", "variant"))
    names = np.array([f"{lv}:{base_scenario(str(sc), str(va))}"
                      for lv, sc, va in zip(levels, scenarios, variants)], dtype=object)
    return pd.Series(names[ids], index=frame.index, dtype=object)


def group_samples(runs: list[RunData], *, variant: str | None = None,
                  slo_ms: dict[str, float] | None = None) -> dict[str, GroupSample]:
    """``level:scenario`` -> GroupSample over ``runs`` (one side; only ``variant`` when given)."""
    parts: dict[str, list[Entry]] = {}
    for run in runs:
        frame = run.records
        if variant is not None:
            frame = frame[(frame["variant"] == variant).to_numpy()]
        if frame.empty:
            continue
        names = group_names(frame)
        groups = [(names.iloc[0], frame)] if (names == names.iloc[0]).all() else frame.groupby(names)
        for name, sub in [*groups, *tenant_groups(frame, names)]:    # (then --mix's level:scenario#tenant)
            keys = sorted(k for k in run.table.itl.keys() | run.table.tokens_per_s.keys()   # sorted: the
                          if f"{k[0]}:{base_scenario(k[1], k[2])}" == name   # ITL sample's order must not
                          and (variant is None or k[2] == variant))          # follow the hash seed
            parts.setdefault(str(name), []).append((run, sub, keys))
    samples = {n: _sample(v, variant, slo_ms, not is_tenant_group(n)) for n, v in sorted(parts.items())}
    # an A/B arm: how many users it had (its throughput is per user when arms differ)
    if variant is not None:
        users: dict[str, set[tuple[str, int]]] = {}
        for run in runs:
            for name, ids in variant_users(run.path / RECORDS_FILE, variant, base_scenario).items():
                users.setdefault(name, set()).update((str(run.path), i) for i in ids)
        for name, sample in samples.items():
            sample.users = len(users.get(name, ())) or None
    return samples


def _sample(entries: list[Entry], variant: str | None, slo_ms: dict[str, float] | None,
            scored: bool = True) -> GroupSample:
    """One side of one group (``scored``: with answer scores); per-request values: measure.metrics'."""
    frame = (pd.concat([e[1] for e in entries], ignore_index=True) if len(entries) > 1
             else entries[0][1].reset_index(drop=True))
    col = {name: frame[name].to_numpy(dtype=float)
           for name in ("output_tokens", "ttfb_ms", "ttft_ms", "e2e_ms", "queue_ms", "max_gap_ms",
                        "last_chunk_ms")}
    ok = frame["ok"].to_numpy(dtype=bool)
    error_class = frame["error_class"].to_numpy(dtype=object)
    tpot = tpot_ms_array(col["ttft_ms"], col["e2e_ms"], col["output_tokens"])
    conn = frame["conn_reused"].to_numpy(dtype=float)
    interrupted = interrupted_array(error_class, frame["status"].to_numpy(), col["ttfb_ms"],
                                    frame["terminal"].to_numpy())
    stalled = frame["stalls"].to_numpy() > 0
    sample = GroupSample(
        requests=len(frame), ok=int(ok.sum()), failures=int((~ok).sum()), interrupted=int(interrupted.sum()),
        requests_with_stall=int(stalled.sum()),
        conn_known=int(np.isfinite(conn).sum()), conn_reused=int((conn == 1).sum()),
        output_tokens_total=float(col["output_tokens"].sum()),
        unit="arm" if variant is not None else "run",
    )
    blocks = block_ids(frame["started_at"].to_numpy(dtype=float), col["e2e_ms"])
    for name in OPTIONAL_FIELDS:
        col[name] = frame[name].to_numpy(dtype=float)
    reasoned = ok & (np.nan_to_num(col["reasoning_tokens"]) > 0)
    sample.requests_reasoning = int(reasoned.sum())
    thinking = reasoning_ms_array(col["ttft_ms"], col["ttfo_ms"], np.nan_to_num(col["reasoning_chunks"]))
    answer = answer_tps_array(col["ttfo_ms"], col["e2e_ms"], col["output_tokens"], col["reasoning_tokens"])
    speed = reasoning_tps_array(col["ttft_ms"], col["ttfo_ms"], col["reasoning_tokens"],
                                col["reasoning_chunks"])
    for name, values in (("ttft_ms", col["ttft_ms"][ok]), ("e2e_ms", col["e2e_ms"][ok]),
                         ("tpot_ms", tpot[ok]), ("ttfo_ms", col["ttfo_ms"][ok]),
                         ("reasoning_ms", thinking[ok]), ("answer_tps", answer[ok]),
                         ("reasoning_tps", speed[ok])):
        values, sample.blocks_of[name] = sorted_with_blocks(values, blocks[ok])
        setattr(sample, name, values)
    tokens = token_counts_array(ok, frame["n_chunks"].to_numpy(), col["multi_token_chunks"],
                                col["output_tokens"], col["reasoning_tokens"], col["reasoning_chunks"],
                                col["client_output_tokens"])
    tokens.update(tool_counts_array(ok, frame["tool_call_count"].to_numpy(),
                                    frame["tool_calls_invalid"].to_numpy()))
    for name, values in tokens.items():
        setattr(sample, name, type(getattr(sample, name))(values.sum()))
    cached = np.isfinite(col["cached_tokens"]) & (np.nan_to_num(col["input_tokens"]) > 0)
    sample.cached_tokens_total = float(col["cached_tokens"][cached].sum())
    sample.cache_input_tokens = float(col["input_tokens"][cached].sum())
    plans = [plan for run, _, _ in entries if type(plan := run.meta.get("dataset_cache_hit_share")) is float]
    sample.cache_hit_planned = float(np.mean(plans)) if plans else None     # (workloads.cacheplan)
    failed_classes, failed_counts = np.unique(error_class[~ok].astype(str), return_counts=True)
    sample.error_classes = dict(zip(failed_classes.tolist(), failed_counts.tolist()))
    ended = frame["session_completed"].to_numpy(dtype=float)
    has_session = np.isfinite(ended)
    per_request = {"requests": np.ones(len(frame), dtype=bool), "ok": ok, "failures": ~ok,
                   "interrupted": interrupted, "requests_with_stall": stalled,
                   "conn_known": np.isfinite(conn), "conn_reused": conn == 1, "sessions_ended": has_session,
                   "sessions_completed": ended == 1, "requests_reasoning": reasoned, **tokens,
                   "cached_tokens_total": np.where(cached, np.nan_to_num(col["cached_tokens"]), 0.0),
                   "cache_input_tokens": np.where(cached, np.nan_to_num(col["input_tokens"]), 0.0),
                   **{f"error.{name}": ~ok & (error_class.astype(str) == name)
                      for name in sample.error_classes}}
    sample.block_counts = per_block(blocks, per_request)
    kinds: dict[str, str] = {}
    for run, _, _ in entries:
        kinds.update(run.kinds)
    if kinds:
        kind = frame["item_id"].astype(str).map(kinds).to_numpy(dtype=object)
        sample.ttft_plain_ms = _sorted(col["ttft_ms"][ok & (kind == "plain")])
        sample.ttft_structured_ms = _sorted(col["ttft_ms"][ok & (kind == "structured")])
    sample.itl, sample.itl_token = _itl(entries), _itl(entries, per_token=True)
    # rhythm of the sampled ok requests (all of them up to GAP_SAMPLE_RECORDS per key)
    if sample.itl is not None:
        rhythms = [(jitter_ms_of_gaps(gaps), pulse_hz_of_gaps(gaps)) for gaps in sample.itl.sample]
        sample.jitter_ms = _sorted(np.array([j for j, _ in rhythms if j is not None], dtype=float))
        sample.pulse_hz = _sorted(np.array([p for _, p in rhythms if p is not None], dtype=float))
    first = frame["started_at"].to_numpy(dtype=float)
    end = first + end_offset_ms_array(col["e2e_ms"], col["ttft_ms"], col["ttfb_ms"],
                                      col["last_chunk_ms"]) / 1000
    t0, t1 = float(first.min()), float(end.max())
    sample.wall_s = wall_s(t0, t1)
    sample.tokens_per_s = _token_series(entries, t0, t1)
    vars(sample).update(embed_fields(frame["inputs"].to_numpy(), col["input_tokens"], ok, end, t0, t1),
                        **cost_fields(entries[0][0].meta, col["input_tokens"]))
    add_phases(sample, frame, blocks)
    try:
        slo = check_slo(slo_ms if slo_ms is not None else entries[0][0].slo_ms)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if slo:
        good = meets_slo_array(ok, {"ttfb_ms": col["ttfb_ms"], "ttft_ms": col["ttft_ms"],
                                    "ttfo_ms": col["ttfo_ms"],
                                    "e2e_ms": col["e2e_ms"], "queue_ms": col["queue_ms"],
                                    "itl_ms": col["max_gap_ms"], "tpot_ms": tpot}, slo)
        sample.good = int(good.sum())
        sample.good_per_s = _count_series(end[good], t0, t1)
    sample.sessions_ended, sample.sessions_completed = int(has_session.sum()), int((ended == 1).sum())
    rounds = frame["rounds"].to_numpy(dtype=float)
    sample.rounds = rounds[has_session & np.isfinite(rounds)]
    calls = frame["session_tool_calls"].to_numpy(dtype=float)      # an agentic session's (levels.l4_agent)
    sample.tool_calls_per_session = calls[has_session & np.isfinite(calls)]
    items = frame["item_id"].to_numpy(dtype=object)
    for name in ("recall", "precision"):
        values = frame[f"{name}_at_k"].to_numpy(dtype=float)
        known = np.isfinite(values)
        setattr(sample, name, values[known])
        setattr(sample, f"{name}_items", items[known])
    conflict = frame["conflict"].to_numpy(dtype=float)      # L3: ok requests whose service reported ids
    sample.conflict = conflict[ok & np.isfinite(conflict)]
    if scored:      # (scores.jsonl has no tenant: a tenant's own group has none)
        _add_scores(sample, entries, variant)
    # each group: its runs' server
    sample.telemetry = join_telemetry([run.telemetry for run, _, _ in entries])
    return sample


def _sorted(values: np.ndarray) -> np.ndarray:
    return np.sort(values[np.isfinite(values)])


def _count_series(times_s: np.ndarray, t0: float, t1: float) -> np.ndarray:
    bins = max(1, math.ceil(t1 - t0))
    index = np.clip(np.floor(times_s - t0).astype(np.int64), 0, bins - 1)
    return np.bincount(index, minlength=bins).astype(float)


def _token_series(entries: list[Entry], t0: float,
                  t1: float) -> np.ndarray:
    bins = max(1, math.ceil(t1 - t0))
    out = np.zeros(bins)
    for run, _, keys in entries:
        for key in keys:
            per_second = run.table.tokens_per_s.get(key, {})
            if not per_second:
                continue
            seconds = np.fromiter(per_second.keys(), dtype=np.int64, count=len(per_second))
            weights = np.fromiter(per_second.values(), dtype=float, count=len(per_second))
            index = np.clip(seconds - math.floor(t0), 0, bins - 1)
            out += np.bincount(index, weights=weights, minlength=bins)
    return out


def _itl(entries: list[Entry], per_token: bool = False) -> ItlSample | None:
    merged, sample, records = merged_gaps([(run.table, keys) for run, _, keys in entries], per_token)
    if not merged.count:
        return None
    keys_array, counts = merged.arrays()
    return ItlSample(keys_array, counts, merged.min, merged.max, records, sample)


def _add_scores(sample: GroupSample, entries: list[Entry],
                variant: str | None) -> None:
    frames = []
    for run, sub, _ in entries:
        scores = run.scores
        if scores is None or scores.empty:
            continue
        name = group_names(sub.iloc[:1]).iloc[0]
        mask = (group_names(scores) == name).to_numpy()
        if variant is not None:
            mask = mask & (scores["variant"] == variant).to_numpy()
        frames.append(scores[mask])
    if not frames:
        return
    add_answer_scores(sample, pd.concat(frames, ignore_index=True))

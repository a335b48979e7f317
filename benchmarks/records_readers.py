"""Ways to read ``records.jsonl`` for a report, side by side on the same file: CPU and wall
seconds per 100,000 records, whether the table equals the shipped reader's, lines to maintain.

The file is made as ``benchmarks/report.py`` makes its runs (``RequestRecord.to_json``'s exact
format, 60-180 chunk offsets, a 40-90 word answer: ~2.5 KB a line), or given with ``--file``.
Every option ends in the same :class:`fourfold.reports.records.RecordTable`: what it decodes goes
through the same block reduction (gaps, stalls, ITL buckets, tokens per second), timed with it.

- ``c-scanner``: ``read_record_table(native=True)``, the compiled scanner with its exact fallback
  (what ``fourfold compare`` runs);
- ``fallback``: ``read_record_table(native=False)``, every line decoded whole with orjson (what an
  install without a C compiler runs);
- ``polars`` / ``polars-1-thread``: ``polars.read_ndjson`` with an explicit schema of the columns
  needed (default thread count / ``POLARS_MAX_THREADS=1``);
- ``msgspec``: ``msgspec.json.Decoder(<Struct of the columns>).decode_lines`` per block;
- ``sidecar-read``: a columnar sidecar written beside records.jsonl at run time (fixed-width rows
  of the scalars + one float64 stream of offsets), read with ``np.fromfile``;
- ``reduction``: the block reduction alone, on blocks decoded before the clock starts (the part
  every option shares);
- ``sidecar-write`` (separately): what writing that sidecar adds to ``RunWriter.append`` in the
  load generator, in microseconds per record.

Each option runs in a fresh child process (imports and file generation not timed), ``--repeat``
times, options alternating; the table shows medians. polars and msgspec are optional (``pip
install polars msgspec`` into any directory and pass it with ``--extra-path``); an option whose
module is missing is reported as such.

    python benchmarks/records_readers.py                       # 100,000 records, 3 rounds
    python benchmarks/records_readers.py --records 20000 --repeat 1
    python benchmarks/records_readers.py --file RUN/records.jsonl --extra-path /tmp/pkgs
"""

from __future__ import annotations

import argparse
import hashlib
import inspect
import json
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from fourfold.measure.record import RequestRecord  # noqa: E402
from fourfold.reports import recordlines, records  # noqa: E402
from fourfold.reports.recordlines import (  # noqa: E402
    EXTRA_KEYS,
    FLAG_COLUMNS,
    NUMBER_COLUMNS,
    TEXT_COLUMNS,
    Block,
)

OPTIONS = ("c-scanner", "fallback", "polars", "polars-1-thread", "msgspec", "sidecar-read", "reduction")
BLOCK_BYTES = 16 << 20


# ---- the options: each yields Blocks of a records.jsonl --------------------------------------

def line_starts(data: bytes) -> np.ndarray:
    """Where each line of ``data`` starts."""
    ends = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == 10) + 1
    return (np.concatenate([[0], ends[:-1]]) if ends.size and ends[-1] == len(data)
            else np.concatenate([[0], ends]))


def in_blocks(block: Block, size: int = 6500) -> Any:
    """One whole-file Block as blocks of ``size`` records (about what the scanner's 16 MB holds),
    so every option's reduction works on blocks of the same size."""
    bounds = np.concatenate([[0], np.cumsum(block.lens)])
    for a in range(0, len(block.lens), size):
        b = min(a + size, len(block.lens))
        yield Block(block.nums[a:b], [t[a:b] for t in block.texts], block.extras[a:b], block.lens[a:b],
                    block.flat[bounds[a]:bounds[b]], block.starts[a:b])


def polars_blocks(path: Path) -> Any:
    """polars.read_ndjson with an explicit schema: the whole file as one frame."""
    import polars as pl

    schema: dict[str, Any] = {name: pl.Float64 for name in NUMBER_COLUMNS if name not in FLAG_COLUMNS}
    schema.update({name: pl.Boolean for name in FLAG_COLUMNS})
    schema.update({"status": pl.Int64, "output_tokens": pl.Int64, "conn_reused": pl.Boolean})
    schema.update({name: pl.String for name in TEXT_COLUMNS})
    schema["chunk_offsets_ms"] = pl.List(pl.Float64)
    schema["extra"] = pl.Struct({"session_completed": pl.Boolean, "rounds": pl.Int64,
                                 "recall_at_k": pl.Float64, "precision_at_k": pl.Float64})
    frame = pl.read_ndjson(path, schema=schema)
    nums = np.column_stack([(frame[name].fill_null(False) if name in FLAG_COLUMNS else frame[name])
                            .cast(pl.Float64).to_numpy() for name in NUMBER_COLUMNS])
    extra = frame["extra"]
    extras = np.column_stack([extra.struct.field(k).cast(pl.Float64).to_numpy() for k in EXTRA_KEYS])
    offsets = frame["chunk_offsets_ms"]
    lens = offsets.list.len().fill_null(0).to_numpy().astype(np.int64)
    flat = offsets.explode().drop_nulls().to_numpy()
    yield from in_blocks(Block(nums, [frame[name].to_list() for name in TEXT_COLUMNS], extras, lens, flat,
                               line_starts(path.read_bytes())))


def msgspec_blocks(path: Path) -> Any:
    """msgspec.json.Decoder(Struct).decode_lines, a block of whole lines at a time."""
    import msgspec

    number = float | bool | None
    extra = msgspec.defstruct("Extra", [(name, number, None) for name in EXTRA_KEYS])
    record = msgspec.defstruct("Record", [*((name, str | None) for name in TEXT_COLUMNS),
                                          *((name, number) for name in NUMBER_COLUMNS),
                                          ("chunk_offsets_ms", list[float], []),
                                          ("extra", extra | None, None)])
    decoder = msgspec.json.Decoder(record)
    no_extra = extra()
    position = 0
    with open(path, "rb") as fh:
        while data := fh.read(BLOCK_BYTES):
            data += fh.readline()
            rows = decoder.decode_lines(data)
            nums = np.array([(r.started_at, r.status, r.ttfb_ms, r.ttft_ms, r.e2e_ms, r.queue_ms,
                              r.output_tokens, r.conn_reused, bool(r.warmup), bool(r.terminal))
                             for r in rows], dtype=np.float64)
            texts = [[r.level for r in rows], [r.scenario for r in rows], [r.variant for r in rows],
                     [r.item_id for r in rows], [r.error_class for r in rows]]
            extras = np.array([(e.session_completed, e.rounds, e.recall_at_k, e.precision_at_k)
                               for e in (r.extra or no_extra for r in rows)], dtype=np.float64)
            flat: list[float] = []
            for r in rows:
                flat += r.chunk_offsets_ms
            lens = np.array([len(r.chunk_offsets_ms) for r in rows], dtype=np.int64)
            yield Block(nums, texts, extras, lens, np.array(flat), line_starts(data) + position)
            position += len(data)


SIDE_ROW = np.dtype([("nums", "<f8", len(NUMBER_COLUMNS)), ("extras", "<f8", len(EXTRA_KEYS)),
                     ("start", "<i8"), ("n", "<i4"), ("texts", "<u2", len(TEXT_COLUMNS))])


class SidecarWriter:
    """What the run writer would add per record: one fixed-width row and the offsets as float64,
    texts as codes into a table written at close (a sketch: no versioning, no torn-file repair)."""

    def __init__(self, base: Path) -> None:
        self.rows = open(base.with_suffix(".rows"), "wb")
        self.offsets = open(base.with_suffix(".offsets"), "wb")
        self.base, self.codes, self.position = base, {}, 0
        self.pack = struct.Struct(f"<{len(NUMBER_COLUMNS) + len(EXTRA_KEYS)}dqi{len(TEXT_COLUMNS)}H").pack

    def append(self, record: RequestRecord, nbytes: int) -> None:
        codes = self.codes
        texts = [codes.setdefault(getattr(record, name), len(codes)) for name in TEXT_COLUMNS]
        nums = [getattr(record, name) for name in NUMBER_COLUMNS]
        extra = record.extra
        facts = [extra.get(k) for k in EXTRA_KEYS] if extra else [None] * len(EXTRA_KEYS)
        self.rows.write(self.pack(*[np.nan if v is None else v for v in nums + facts], self.position,
                                  len(record.chunk_offsets_ms), *texts))
        self.offsets.write(np.array(record.chunk_offsets_ms, dtype="<f8").tobytes())
        self.position += nbytes

    def close(self) -> None:
        self.rows.close()
        self.offsets.close()
        self.base.with_suffix(".texts").write_text(json.dumps(list(self.codes)))


def sidecar_blocks(base: Path) -> Any:
    """The sidecar read back: two np.fromfile calls and the text table."""
    rows = np.fromfile(base.with_suffix(".rows"), dtype=SIDE_ROW)
    flat = np.fromfile(base.with_suffix(".offsets"), dtype="<f8")
    table = np.array(json.loads(base.with_suffix(".texts").read_text()), dtype=object)
    yield from in_blocks(Block(rows["nums"],
                               [table[rows["texts"][:, j]].tolist() for j in range(len(TEXT_COLUMNS))],
                               rows["extras"], rows["n"].astype(np.int64), flat, rows["start"]))


def write_sidecar(path: Path, base: Path) -> None:
    writer = SidecarWriter(base)
    with open(path, "rb") as fh:
        for line in fh:
            writer.append(RequestRecord.from_dict(json.loads(line)), len(line))
    writer.close()


# ---- one option in this process -----------------------------------------------------------------

def digest(table: records.RecordTable) -> str:
    """What must be equal between two readers' tables (sums over differently cut blocks rounded)."""
    h = hashlib.sha256()
    frame = table.frame
    for name in frame.columns:
        column = frame[name]
        h.update(name.encode())
        h.update("\x1f".join(map(str, column.tolist())).encode() if column.dtype == "category"
                 else np.ascontiguousarray(column.to_numpy()).tobytes())
    for key, hist in sorted(table.itl.items()):
        h.update(repr((key, sorted(hist.counts.items()), hist.count, hist.min, hist.max,
                       f"{hist.sum:.9g}")).encode())
    for key, kept in sorted(table.gap_samples.items()):
        h.update(repr(key).encode())
        for gaps in kept:
            h.update(gaps.tobytes())
    for key, per_second in sorted(table.tokens_per_s.items()):
        h.update(repr((key, [(s, f"{v:.9g}") for s, v in sorted(per_second.items())])).encode())
    h.update(repr((sorted(table.ok_with_gaps.items()), table.warmup, table.cancelled,
                   table.unreadable)).encode())
    return h.hexdigest()[:12]


def reduce_blocks(blocks: Any) -> records.RecordTable:
    acc = records._Accumulator(150.0, records.GAP_SAMPLE_RECORDS)
    for block in blocks:
        acc.add_block(block)
    return acc.result()


def run_child(option: str, path: Path, workdir: Path) -> dict[str, Any]:
    if option == "sidecar-write":
        return measure_sidecar_write(path, workdir)
    sidecar = workdir / "records"
    if option == "sidecar-read" and not sidecar.with_suffix(".rows").exists():
        write_sidecar(path, sidecar)
    readers = {
        "c-scanner": lambda: records.read_record_table(path, native=True),
        "fallback": lambda: records.read_record_table(path, native=False),
        "polars": lambda: reduce_blocks(polars_blocks(path)),
        "polars-1-thread": lambda: reduce_blocks(polars_blocks(path)),
        "msgspec": lambda: reduce_blocks(msgspec_blocks(path)),
        "sidecar-read": lambda: reduce_blocks(sidecar_blocks(sidecar)),
    }
    if option == "reduction":
        blocks = list(recordlines.read_blocks(path))
        readers["reduction"] = lambda: reduce_blocks(blocks)
    try:
        if option.startswith("polars"):
            import polars  # noqa: F401
        if option == "msgspec":
            import msgspec  # noqa: F401
    except ImportError as exc:
        return {"missing": str(exc)}
    cpu, wall = time.process_time(), time.perf_counter()
    table = readers[option]()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return {"cpu": cpu, "wall": wall, "records": len(table.frame) + table.warmup + table.cancelled,
            "digest": digest(table)}


def measure_sidecar_write(path: Path, workdir: Path, n: int = 20_000, rounds: int = 5) -> dict[str, Any]:
    """RunWriter.append's work (to_json + a buffered write) against the same plus the sidecar's,
    alternating, the fastest of ``rounds`` each."""
    with open(path, "rb") as fh:
        recs = [RequestRecord.from_dict(json.loads(next(fh))) for _ in range(n)]
    best = {"jsonl": float("inf"), "jsonl+sidecar": float("inf")}
    for _ in range(rounds):
        for name in best:
            side = SidecarWriter(workdir / "timing") if name == "jsonl+sidecar" else None
            with open(workdir / "timing.jsonl", "w", encoding="utf-8") as out:
                cpu = time.process_time()
                for record in recs:
                    line = record.to_json() + "\n"
                    out.write(line)
                    if side is not None:
                        side.append(record, len(line))
                best[name] = min(best[name], (time.process_time() - cpu) / n * 1e6)
            if side is not None:
                side.close()
    return {"us_per_record": best}


# ---- lines to maintain ---------------------------------------------------------------------------

def code_lines(*objects: Any) -> int:
    """Non-blank lines of files (Path) or of functions / classes (their source)."""
    total = 0
    for obj in objects:
        text = obj.read_text() if isinstance(obj, Path) else inspect.getsource(obj)
        total += sum(1 for line in text.splitlines() if line.strip())
    return total


def lines_to_maintain() -> dict[str, str]:
    scanner_c = REPO / "fourfold" / "reports" / "_records_scan.c"
    lines_py = REPO / "fourfold" / "reports" / "recordlines.py"
    fallback = code_lines(lines_py) - code_lines(recordlines._scan, recordlines._in_file_order)
    return {
        "c-scanner": f"{code_lines(scanner_c) + code_lines(lines_py)} (C {code_lines(scanner_c)}, "
                     f"recordlines.py {code_lines(lines_py)} with the fallback)",
        "fallback": f"~{fallback} (recordlines.py without the scanner's glue)",
        "polars": f"{code_lines(polars_blocks, line_starts, in_blocks)} + the fallback ~{fallback} "
                  "(a torn line fails the whole read) + a dependency",
        "polars-1-thread": "(as polars)",
        "msgspec": f"{code_lines(msgspec_blocks, line_starts)} + the fallback ~{fallback} "
                   "(decode_lines stops at a bad line) + a dependency",
        "sidecar-read": f"{code_lines(SidecarWriter, sidecar_blocks, in_blocks)} as sketched "
                        "(no versioning, no torn-file repair) "
                        f"+ the fallback ~{fallback} for runs without one",
        "reduction": f"{code_lines(records._Accumulator)} (records.py; shared by all)",
    }


# ---- the table -------------------------------------------------------------------------------------

def make_file(records_n: int, workdir: Path) -> Path:
    sys.path.insert(0, str(REPO / "benchmarks"))
    from report import write_run

    run = write_run(workdir, "bench-readers", records_n, 5000, 1, False)
    return run / "records.jsonl"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=100_000,
                        help="records in the generated file (default 100,000)")
    parser.add_argument("--file", type=Path, help="read this records.jsonl instead of generating one")
    parser.add_argument("--repeat", type=int, default=3, help="rounds (default 3); medians are shown")
    parser.add_argument("--options", nargs="+", default=list(OPTIONS), choices=OPTIONS, metavar="OPTION")
    parser.add_argument("--extra-path", default="", help="a directory with polars / msgspec installed")
    parser.add_argument("--child", nargs=3, metavar=("OPTION", "FILE", "WORKDIR"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        if args.extra_path:
            sys.path.append(args.extra_path)
        option, file, workdir = args.child
        print(json.dumps(run_child(option, Path(file), Path(workdir))))
        return 0
    with tempfile.TemporaryDirectory(prefix="fourfold-readers-") as tmp:
        workdir = Path(tmp)
        path = args.file or make_file(args.records, workdir)
        print(f"{path}: {path.stat().st_size / 1e6:.0f} MB", flush=True)

        def child(option: str) -> dict[str, Any]:
            env = {**os.environ, **({"POLARS_MAX_THREADS": "1"} if option == "polars-1-thread" else {})}
            out = subprocess.run([sys.executable, __file__, "--extra-path", args.extra_path,
                                  "--child", option, str(path), str(workdir)],
                                 env=env, capture_output=True, text=True, check=False)
            if out.returncode:
                return {"failed": out.stderr.strip().splitlines()[-1] if out.stderr.strip()
                                  else out.returncode}
            return json.loads(out.stdout.strip().splitlines()[-1])

        results: dict[str, list[dict[str, Any]]] = {option: [] for option in args.options}
        for _ in range(args.repeat):
            for option in args.options:
                results[option].append(child(option))
        write = child("sidecar-write")
    lines = lines_to_maintain()
    reference = next((r[0].get("digest") for o, r in results.items() if o == "c-scanner" and r), None)
    print("\n| option | CPU s / 100k records | wall s / 100k records | same table as c-scanner "
          "| lines to maintain |")
    print("|---|---|---|---|---|")
    for option, runs in results.items():
        done = [r for r in runs if "cpu" in r]
        if not done:
            print(f"| {option} | {runs[0]} | | | {lines.get(option, '')} |")
            continue
        scale = 100_000 / done[0]["records"]
        cpu = statistics.median(r["cpu"] for r in done) * scale
        wall = statistics.median(r["wall"] for r in done) * scale
        same = "n/a" if option == "reduction" else "yes" if done[0]["digest"] == reference else "NO"
        print(f"| {option} | {cpu:.2f} | {wall:.2f} | {same} | {lines.get(option, '')} |")
    if "us_per_record" in write:
        plain, both = write["us_per_record"]["jsonl"], write["us_per_record"]["jsonl+sidecar"]
        print(f"\nsidecar-write: RunWriter's line {plain:.1f} µs per record, with the sidecar {both:.1f} µs "
              f"(+{both - plain:.1f} µs per record in the load generator)")
    else:
        print(f"\nsidecar-write: {write}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Time and peak memory of ``fourfold compare`` on two synthetic runs of 1,000,000 records each.

The runs are written into a temporary directory (removed at the end unless ``--keep``) in the
exact format ``RequestRecord.to_json`` writes, with realistic L1 records: 60-180 content chunks
each (their offsets), an answer of a few hundred characters, the simulator's plan header, and a
``scores.jsonl`` row per answer in the exact format ``fourfold score`` writes. The candidate
differs the way the simulator's ``candidate`` profile does (faster tokens, no orchestrator
delay, half of the streams pausing ~200 ms every 20 chunks). To write 2 x 1,000,000 lines
quickly, each record picks one of ``--streams`` pre-drawn chunk-offset lists.

``fourfold compare`` then runs twice as a child process: *cold* (any ``compare-cache.npz`` in
the runs removed first: it reads the JSONL files and writes the cache) and *warm* (the same
command again: it reads the cache). The figures are each child's wall time, its CPU time and
``ru_maxrss`` (the largest resident set of the child and anything it waited for), plus the sum
of the resident sets of the child's process tree sampled every 0.1 s (psutil), and the load
average of the machine (1 minute) before and after.

    python benchmarks/report.py                         # 2 x 1,000,000 records
    python benchmarks/report.py --records 100000 --keep /tmp/runs
    python benchmarks/report.py --chunks 16 48 --text-words 0 0      # compact records
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from fourfold.fingerprint.score import ScoreRow  # noqa: E402
from fourfold.measure.record import RequestRecord  # noqa: E402
from fourfold.reports.cache import CACHE_FILE  # noqa: E402
from fourfold.rundir.runlog import RunWriter  # noqa: E402

T0 = 1_790_000_000.0
SENTINELS = {"item_id": "\u00a7I\u00a7", "request_id": "\u00a7R\u00a7", "text": "\u00a7T\u00a7"}
WORDS = ("token latency stream answer model quantum annealing gateway cache batch decode prefill memory "
         "bandwidth orchestrator structure points reference similarity").split()


def line_template() -> str:
    """RequestRecord.to_json() of a prototype, with str.format fields where the values vary."""
    proto = RequestRecord(
        level="l1", scenario="saturation", dialect="openai", endpoint="/v1/chat/completions",
        item_id=SENTINELS["item_id"], request_id=SENTINELS["request_id"], user_id=11111, started_at=22222.5,
        sent_mono_s=33333.5, status=200, ttfb_ms=44444.5, ttft_ms=55555.5, e2e_ms=66666.5,
        chunk_offsets_ms=[77777.5], output_tokens=88888, output_tokens_source="usage", input_tokens=31,
        content_chunks=99999, terminal=True, finish_reason="stop", text=SENTINELS["text"],
        response_bytes=12121, conn_reused=True, http_version="HTTP/1.1",
        plan={"seed": 0, "profile": "sim", "ttft_ms": 55555.5, "itl_ms": 20.0, "orchestrator_ms": 0.0,
              "output_tokens": 88888, "pauses": [], "finish_reason": "stop", "structured": False,
              "item_id": SENTINELS["item_id"], "load_factor": 1.0, "queued_ms": 0.01})
    text = proto.to_json().replace("{", "{{").replace("}", "}}")
    for name, value in (("user", "11111"), ("started", "22222.5"), ("mono", "33333.5"), ("ttfb", "44444.5"),
                        ("ttft", "55555.5"), ("e2e", "66666.5"), ("offsets", "77777.5"), ("tokens", "88888"),
                        ("chunks", "99999"), ("bytes", "12121"), ("item", SENTINELS["item_id"]),
                        ("rid", SENTINELS["request_id"]), ("text", SENTINELS["text"])):
        text = text.replace(value, "{" + name + "}")
    return text


def stream_pool(rng: random.Random, n: int, candidate: bool,
                chunks: tuple[int, int]) -> list[tuple[str, float, float, int]]:
    """(offsets joined, ttft, e2e, tokens) for ``n`` pre-drawn streams."""
    pool = []
    for _ in range(n):
        tokens = rng.randint(*chunks)
        structured = rng.random() < 0.5
        ttft = (rng.gauss(70, 6) if candidate
                else rng.gauss(80, 6) + (rng.gauss(58, 12) if structured else 0.0))
        pulse = candidate and rng.random() < 0.5
        offsets = [max(1.0, ttft)]
        for j in range(1, tokens):
            gap = rng.gauss(15 if candidate else 20, 1.5)
            if pulse:
                gap = 5.0 if j % 20 not in range(10, 20) else gap
                gap += rng.gauss(200, 20) if j % 20 == 10 else 0.0
            offsets.append(offsets[-1] + max(0.2, gap))
        pool.append((",".join(f"{v:.3f}" for v in offsets), offsets[0], offsets[-1], tokens))
    return pool


def write_run(base: Path, label: str, records: int, streams: int, seed: int, candidate: bool,
              chunks: tuple[int, int] = (60, 180), text_words: tuple[int, int] = (40, 90)) -> Path:
    rng = random.Random(seed)
    writer = RunWriter(label, base, now_s=T0)
    writer.write_meta({"level": "l1", "settings": {"dataset": "", "stall_ms": 150.0}})
    writer.write_summary({"records": records, "slo_ms": {}})
    pool = stream_pool(rng, streams, candidate, chunks)
    texts = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(*text_words))) for _ in range(64)]
    template = line_template()
    similarity = [round(min(1.0, rng.gauss(0.86 if candidate else 0.85, 0.05)), 6) for _ in range(4096)]
    with open(writer.run_dir / "records.jsonl", "w", encoding="utf-8") as out, \
            open(writer.run_dir / "scores.jsonl", "w", encoding="utf-8") as scores:
        batch, score_batch = [], []
        for i in range(records):
            offsets, ttft, e2e, tokens = pool[rng.randrange(streams)]
            item = f"item-{i % 46}"
            rid = f"{seed:04d}{i:028x}"
            batch.append(template.format(
                user=i % 64, started=f"{T0 + i * 0.002:.6f}", mono=f"{1000 + i * 0.002:.6f}", ttfb="1.5",
                ttft=f"{ttft:.3f}", e2e=f"{e2e:.3f}", offsets=offsets, tokens=tokens, chunks=tokens,
                bytes=tokens * 180, item=item, rid=rid, text=texts[i % 64]))
            structured = bool(i % 2)
            row = ScoreRow(request_id=rid, item_id=item, level="l1", scenario="saturation",
                           similarity=similarity[i % 4096], requested_items=3 if structured else None,
                           requested_source="prompt" if structured else "", delivered_items=3 if i % 7 else 2,
                           delivered_kind="list" if structured else "none",
                           compliant=(i % 7 != 0) if structured else None)
            score_batch.append(json.dumps(row.to_dict(), ensure_ascii=False, separators=(",", ":")))
            if len(batch) >= 10_000:
                out.write("\n".join(batch) + "\n")
                scores.write("\n".join(score_batch) + "\n")
                batch, score_batch = [], []
        if batch:
            out.write("\n".join(batch) + "\n")
            scores.write("\n".join(score_batch) + "\n")
    return writer.run_dir


def sample_tree_rss(pid: int, peak: list[int], stop: threading.Event) -> None:
    try:
        root = psutil.Process(pid)
    except psutil.NoSuchProcess:
        return
    while not stop.is_set():
        try:
            total = sum(p.memory_info().rss for p in [root, *root.children(recursive=True)])
            peak[0] = max(peak[0], total)
        except psutil.Error:
            pass
        stop.wait(0.1)


def measure(name: str, command: list[str], records: int) -> int:
    """Run ``command`` once as a child process and print its wall, CPU and memory figures."""
    load_before = psutil.getloadavg()[0]
    peak, stop = [0], threading.Event()
    started = time.perf_counter()
    proc = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    sampler = threading.Thread(target=sample_tree_rss, args=(proc.pid, peak, stop), daemon=True)
    sampler.start()
    assert proc.stdout is not None
    output = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)      # this child's own figures (and its children's)
    wall = time.perf_counter() - started
    stop.set()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        print(output[-3000:])
        return proc.returncode
    cpu = usage.ru_utime + usage.ru_stime
    print(output.strip().splitlines()[-1])
    print(f"fourfold compare ({name}), 2 x {records:,} records: wall {wall:.1f} s, CPU {cpu:.1f} s, "
          f"peak RSS (ru_maxrss, largest process) {usage.ru_maxrss / 1024:.0f} MiB, process tree peak "
          f"(sampled) {peak[0] / 2**20:.0f} MiB, load average {load_before:.1f} "
          f"-> {psutil.getloadavg()[0]:.1f} on {psutil.cpu_count()} CPUs", flush=True)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000, help="records per run (default 1,000,000)")
    parser.add_argument("--streams", type=int, default=5000, help="distinct pre-drawn streams (default 5000)")
    parser.add_argument("--chunks", type=int, nargs=2, default=(60, 180), metavar=("MIN", "MAX"),
                        help="content chunks per record "
                             "(default 60 180: full answers of the bundled prompts)")
    parser.add_argument("--text-words", type=int, nargs=2, default=(40, 90), metavar=("MIN", "MAX"),
                        help="words per answer text (default 40 90; 0 0 as with --no-record-text)")
    parser.add_argument("--keep", default=None, help="write the runs here and keep them")
    parser.add_argument("--reuse", action="store_true", help="reuse runs already in --keep")
    args = parser.parse_args()
    base = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="fourfold-report-bench-"))
    try:
        runs = sorted(p for p in base.glob("*-bench-*") if p.is_dir()) if args.reuse else []
        if len(runs) != 2:
            started = time.perf_counter()
            shape = {"chunks": tuple(args.chunks), "text_words": tuple(args.text_words)}
            runs = [write_run(base, "bench-baseline", args.records, args.streams, 1, False, **shape),
                    write_run(base, "bench-candidate", args.records, args.streams, 2, True, **shape)]
            print(f"wrote 2 x {args.records:,} records in {time.perf_counter() - started:.0f} s "
                  f"({sum((r / 'records.jsonl').stat().st_size for r in runs) / 1e9:.2f} GB of "
                  f"records.jsonl, {sum((r / 'scores.jsonl').stat().st_size for r in runs) / 1e9:.2f} GB "
                  "of scores.jsonl)")
        command = [sys.executable, "-m", "fourfold", "compare", *map(str, runs),
                   "--out", str(base / "report")]
        for run in runs:
            (run / CACHE_FILE).unlink(missing_ok=True)
        for name in ("cold", "warm"):
            rc = measure(name, command, args.records)
            if rc:
                return rc
            if name == "cold":
                sizes = [(run / CACHE_FILE).stat().st_size for run in runs if (run / CACHE_FILE).is_file()]
                print(f"  compare-cache.npz written: {len(sizes)} of {len(runs)} runs, "
                      f"{sum(sizes) / 2**20:.0f} MiB in all")
        return 0
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

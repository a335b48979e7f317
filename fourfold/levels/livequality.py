"""``--score-live``: a running test's answers scored by a child process, shown live, kept in summary.json.

On the local runner or the master (the process that writes ``records.jsonl``: a worker's records
reach it with the worker's reports), every record written is offered here. The cheap part runs
on the gevent hub: :func:`fourfold.fingerprint.live.eligible`, the sampler (1 in
``--score-live-every``, at most ``--score-live-max-per-s`` a second) and ``put_nowait`` on a
bounded queue: a full queue drops the answer and counts it (``dropped``); nothing here waits. A
writer greenlet feeds the queue to the child's stdin and a reader greenlet takes its results
(gevent's cooperative pipes), so the child's model never runs on the hub
(:mod:`fourfold.fingerprint.live`).

``quality_live`` (summary.json, and ``/fourfold/llm.json`` while the test runs): ``scored``,
``sampled``, ``dropped`` (queue full), ``capped`` (over the per-second cap), ``pending`` (sent,
not yet scored when the block was made), ``skipped`` by reason, ``every``, ``max_per_s``, the
similarity and structure figures of :func:`fourfold.fingerprint.score.summarize` over the scored
answers, ``scorer_cpu_s`` (the child's CPU seconds so far, the model's load included) and
``scores_file``: the scored rows, ``scores_live.jsonl`` in the run directory (``scores.jsonl``'s
format). Each web-UI test has its own block; results of an earlier test that arrive late are
ignored.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections import Counter
from typing import Any

import gevent
from gevent import subprocess as gsubprocess
from gevent.queue import Full, Queue

from fourfold.fingerprint.live import LiveSampler, eligible, job_record
from fourfold.fingerprint.score import ScoreRow, summarize
from fourfold.levels.runtime import get_runtime
from fourfold.levels.state import state_of

log = logging.getLogger("fourfold")
QUEUE_SIZE = 256
FINISH_WAIT_S = 5.0            # at a test's end, how long answers still being scored are waited for
LOAD_WAIT_S = 30.0             # ... and how long a scorer still loading its model is (then 5 s more)
LIVE_SCORES_FILE = "scores_live.jsonl"


class LiveQuality:
    def __init__(self, runtime: Any) -> None:
        self.runtime = runtime
        self.queue: Queue = Queue(QUEUE_SIZE)
        self.proc: Any = None
        self.error = ""
        self.ready = False
        self.ready_at: float | None = None
        self.fed = False                # the child was told the run's dataset and is fed answers
        self.cpu_s = 0.0
        self._greenlets: list[gevent.Greenlet] = []
        self.begin(0)

    # ---- one test ----
    def begin(self, test: int) -> None:
        settings = self.runtime.settings
        self.enabled = settings.score_live
        self.every, self.max_per_s = settings.score_live_every, settings.score_live_max_per_s
        self.test = test
        self.sampler = LiveSampler(self.every, self.max_per_s)
        self.rows: list[ScoreRow] = []
        self.skipped: Counter[str] = Counter()
        self.dropped = 0
        self.returned = 0

    def offer(self, record: Any) -> None:
        """A written record: maybe sent to the child (never blocks, never raises)."""
        try:
            if (self.proc is None or not self.enabled or not eligible(record)
                    or not self.sampler.offer(time.monotonic())):
                return
            self.queue.put_nowait((self.test, job_record(record)))
        except Full:
            self.dropped += 1
        except Exception:  # noqa: BLE001 - live scoring must never disturb the run
            log.exception("fourfold: --score-live could not take an answer")

    def block(self) -> dict[str, Any]:
        total = summarize(self.rows)
        return {
            "scored": len(self.rows), "sampled": self.sampler.sampled, "dropped": self.dropped,
            "capped": self.sampler.capped,
            "pending": max(0, self.sampler.sampled - self.dropped - self.returned),
            "skipped": dict(sorted(self.skipped.items())), "every": self.every, "max_per_s": self.max_per_s,
            **{k: total[k] for k in ("similarity_n", "similarity_mean", "similarity_p5", "similarity_p50",
                                     "structure_n", "structure_compliance", "forced_length_n")},
            "scorer_cpu_s": round(self.cpu_s, 2), "scorer_ready": self.ready,
            **({"error": self.error} if self.error else {}), "scores_file": LIVE_SCORES_FILE,
        }

    # ---- the child ----
    def spawn(self) -> None:
        """The child, loading its model (at init with ``--score-live`` given, so it loads before the test)."""
        if self.proc is not None:
            return
        env = {**os.environ, "FOURFOLD_LIVE_PARENT": str(os.getpid()), "HF_HUB_OFFLINE": "1"}
        self.proc = gsubprocess.Popen([sys.executable, "-m", "fourfold.fingerprint.live"],
                                      stdin=gsubprocess.PIPE, stdout=gsubprocess.PIPE,
                                      stderr=gsubprocess.DEVNULL, env=env)
        self._greenlets = [gevent.spawn(self._read)]

    def start(self) -> None:
        """At a test's start: the child spawned, and at the first test told the run's dataset, then fed."""
        self.spawn()
        if self.fed:
            return
        writer = self.runtime.writer
        first = {"meta": self.runtime.meta(),
                 "run_dir": str(writer.run_dir) if writer else self.runtime.settings.run_dir}
        self._send(first)
        self.fed = True
        self._greenlets.append(gevent.spawn(self._feed))

    def _send(self, message: dict[str, Any]) -> None:
        self.proc.stdin.write((json.dumps(message, ensure_ascii=False) + "\n").encode("utf-8"))
        self.proc.stdin.flush()

    def _feed(self) -> None:
        while True:
            test, record = self.queue.get()
            try:
                self._send({"test": test, "record": record})
            except (OSError, ValueError) as exc:     # the child is gone: stop feeding it
                self.error = self.error or f"the scorer process ended ({exc})"
                return

    def _read(self) -> None:
        for line in self.proc.stdout:
            try:
                message = json.loads(line)
            except ValueError:
                continue
            self.cpu_s = float(message.get("cpu_s", self.cpu_s))
            if message.get("ready"):
                self.ready, self.ready_at = True, time.monotonic()
            elif "error" in message:
                self.error = str(message["error"])
                log.error("fourfold: --score-live: %s", self.error)
            elif message.get("test") == self.test:
                self.returned += 1
                if "row" in message:
                    self.rows.append(ScoreRow(**message["row"]))
                else:
                    self.skipped[str(message.get("skipped"))] += 1
        if not self.error:
            self.error = f"the scorer process ended (exit code {self.proc.wait()})"

    def stop(self) -> None:
        if self.proc is None:
            return
        gevent.killall(self._greenlets, block=False)
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=3)
        except Exception:  # noqa: BLE001 - still running or gone: make sure it ends
            self.proc.kill()
        self.proc, self.fed = None, False

    # ---- the test's end ----
    def finish(self, environment: Any) -> None:
        """``finish`` listener: wait a little for answers in flight, then the block and the rows."""
        if not self.enabled:
            if self.runtime.quitting:
                self.stop()
            return
        started = time.monotonic()
        while self.proc is not None and self.block()["pending"] and not self.error:
            now = time.monotonic()
            if now - started > LOAD_WAIT_S + FINISH_WAIT_S or \
                    (self.ready_at is not None and now - max(started, self.ready_at) > FINISH_WAIT_S):
                break
            gevent.sleep(0.1)
        self.runtime.extras.summary["quality_live"] = self.block()
        writer = self.runtime.writer
        if writer is not None:
            try:
                with open(writer.run_dir / LIVE_SCORES_FILE, "w", encoding="utf-8") as fh:
                    for row in self.rows:
                        fh.write(json.dumps(row.to_dict(), ensure_ascii=False, separators=(",", ":")) + "\n")
            except OSError as exc:
                log.error("fourfold: %s not written: %s", LIVE_SCORES_FILE, exc.strerror or exc)
        if self.runtime.quitting:
            self.stop()


def register(environment: Any) -> LiveQuality | None:
    """Attach live scoring to the environment (local runner or master); it scores in the tests
    started with ``--score-live`` (the option is read at each test's start: the web UI's form)."""

    runtime = get_runtime(environment)
    if runtime.is_worker or state_of(environment).get(LiveQuality) is not None:
        return None
    live = state_of(environment).put(LiveQuality(runtime))
    runtime.extras.on_record(live.offer)     # every record the run directory gets, also offered here
    runtime.extras.on_finish(live.finish, first=True)   # runs after the levels' finishers

    def _on_test_start(**_kw: Any) -> None:
        live.begin(runtime.tests)
        if not live.enabled:
            return
        try:
            live.start()
        except OSError as exc:
            live.error = live.error or f"the scorer process could not start: {exc}"
            log.error("fourfold: --score-live: %s", live.error)

    environment.events.test_start.add_listener(_on_test_start)
    if runtime.settings.score_live:
        try:
            live.spawn()
        except OSError as exc:
            live.error = f"the scorer process could not start: {exc}"
    return live


QUALITY_TAB_KEY = "quality"
QUALITY_COLUMNS = (("metric", "live quality (--score-live)"), ("value", "value"))


def quality_rows(block: dict[str, Any] | None) -> list[dict[str, str]]:
    """The web UI's "LLM quality" tab: the block's figures as (metric, value) rows (pure)."""
    if block is None:
        return [{"metric": "off", "value": "start the test with --score-live"}]

    def num(value: Any, pattern: str = "{:.3f}") -> str:
        return "-" if value is None else pattern.format(value)

    structure = "-" if not block["structure_n"] else \
        f"{num(block['structure_compliance'], '{:.1%}')} of {block['structure_n']}"
    rows = [("answers scored", f"{block['scored']} (1 in {block['every']}, " + \
            (f"at most {block['max_per_s']:g}/s)" if block["max_per_s"] else "no cap)")),
            ("similarity mean", num(block["similarity_mean"])),
            ("similarity p5", num(block["similarity_p5"])),
            ("structure compliance", structure),
            ("waiting / dropped / over the cap",
             f"{block['pending']} / {block['dropped']} / {block['capped']}"),
            ("scorer CPU", f"{block['scorer_cpu_s']:.1f} s"
             + ("" if block["scorer_ready"] else " (loading the model)"))]
    if block.get("error"):
        rows.append(("error", block["error"]))
    return [{"metric": metric, "value": value} for metric, value in rows]


def quality_stats(environment: Any) -> list[dict[str, Any]]:
    """The "LLM quality" tab's entry of Locust's ``extended_stats``."""
    return [{"key": QUALITY_TAB_KEY, "data": quality_rows(live_block(environment))}]


def live_block(environment: Any) -> dict[str, Any] | None:
    """The current test's ``quality_live`` block, or None without ``--score-live``."""
    live = state_of(environment).get(LiveQuality)
    return live.block() if live is not None and live.enabled else None


__all__ = ["LIVE_SCORES_FILE", "QUALITY_COLUMNS", "QUALITY_TAB_KEY", "LiveQuality", "live_block",
           "quality_rows", "quality_stats", "register"]

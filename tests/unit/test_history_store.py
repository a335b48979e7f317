"""The run history's store and trend without runs: SQLite files in a temporary directory, entries made
from hand-built samples (fourfold.history.entry.entry_of_samples), values checked by hand."""

from __future__ import annotations

import math
import sqlite3

import numpy as np
import pytest

from fourfold.errors import UsageError
from fourfold.history.check import check_entry, trend
from fourfold.history.entry import entry_of_samples
from fourfold.history.store import DEFAULT_FILE, open_store, resolve, shown
from fourfold.reports.compare import CompareSettings, GroupSample
from fourfold.reports.replication import block_ids


def facts(run_id: str, release: str, started: str) -> dict:
    return {"release": release, "run_id": run_id, "run_path": f"/runs/{run_id}",
            "added_at": "2026-12-04T00:00:00Z",
            "started_at": started, "level": "l1", "fourfold_version": "0.1.0", "dataset_hash": "abc",
            "target": "http://127.0.0.1:1", "model": "m", "machine": "vm (2 CPUs)", "tags": {"gpu": "none"},
            "meta": {"run_id": run_id}, "summary": {"records": 400}}


def sample(ttft: np.ndarray) -> GroupSample:
    """A group of ok requests with these TTFTs, run one after another (each its own block)."""
    n = ttft.size
    g = GroupSample(requests=n, ok=n, conn_known=n, conn_reused=n)
    order = np.argsort(ttft, kind="stable")
    g.ttft_ms = ttft[order]
    g.blocks_of["ttft_ms"] = block_ids(np.arange(n, dtype=float), np.full(n, 1.0))[order]
    return g


def add(store, run_id, release, started, ttft):
    entry = entry_of_samples(facts(run_id, release, started), {"l1:sat": sample(ttft)})
    return store.add(entry.run, entry.groups, entry.figures, entry.histograms), entry


def test_runs_kept_listed_in_the_order_they_ran_and_removed(tmp_path):
    store = open_store(str(tmp_path / "h.sqlite"))
    rng = np.random.default_rng(0)
    second, _ = add(store, "r2", "v2", "2026-12-02T00:00:00Z", rng.normal(100, 5, 400))
    first, _ = add(store, "r1", "v1", "2026-12-01T00:00:00Z", rng.normal(100, 5, 400))
    runs = store.runs()
    assert [r.run_id for r in runs] == ["r1", "r2"] and [r.id for r in runs] == [first, second]
    assert runs[0].tags == {"gpu": "none"} and runs[0].machine == "vm (2 CPUs)"
    assert store.blobs(first) == ({"run_id": "r1"}, {"records": 400})
    figures = {f["metric"]: f for f in store.figures("l1:sat", [first])}
    assert figures["ttft_p50"]["n"] == 400 and figures["ttft_p50"]["within_var"] > 0
    assert figures["ttft_p50"]["too_few"] == "" and "p99 of 400 values" in figures["ttft_p99"]["too_few"]
    with pytest.raises(UsageError, match="already in the history as release 'v1'"):
        add(store, "r1", "v9", "2026-12-03T00:00:00Z", rng.normal(100, 5, 400))
    assert store.remove([first]) == 1 and [r.run_id for r in store.runs()] == ["r2"]
    assert store.figures("l1:sat", [first]) == [] and store.histograms("l1:sat", "ttft", [first]) == {}
    store.close()


def test_a_store_of_a_newer_schema_is_refused(tmp_path):
    path = tmp_path / "h.sqlite"
    open_store(str(path)).close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE fourfold_schema SET version = 99")
    with pytest.raises(UsageError, match="schema 99, newer than this fourfold's"):
        open_store(str(path))


def test_a_file_that_is_no_store_is_one_error(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("not a database " * 100)
    with pytest.raises(UsageError, match="not a fourfold history"):
        open_store(str(path))


def test_where_the_store_is(tmp_path, monkeypatch):
    monkeypatch.delenv("FOURFOLD_HISTORY", raising=False)
    assert resolve(None, tmp_path) == str(tmp_path / DEFAULT_FILE)
    assert resolve(".", tmp_path) == str(tmp_path / DEFAULT_FILE)          # a directory: the file in it
    assert resolve("team.sqlite", tmp_path) == str(tmp_path / "team.sqlite")
    monkeypatch.setenv("FOURFOLD_HISTORY", "postgresql://u:pw@db:5432/h")
    assert resolve(None, tmp_path) == "postgresql://u:pw@db:5432/h"
    assert shown("postgresql://u:pw@db:5432/h") == "postgresql://u:***@db:5432/h"
    assert shown("postgres://u@db/h") == "postgres://u@db/h" and shown("/tmp/h.sqlite") == "/tmp/h.sqlite"


def test_the_trend_of_a_kept_row_and_of_a_quantile_from_the_histograms(tmp_path):
    store = open_store(str(tmp_path / "h.sqlite"))
    rng = np.random.default_rng(1)
    for i, (release, centre) in enumerate((("v1", 100.0), ("v1", 104.0), ("v2", 150.0))):
        add(store, f"r{i}", release, f"2026-12-0{i + 1}T00:00:00Z", rng.normal(centre, 5, 400))
    points = trend(store, "ttft_p50")["l1:sat"]
    assert [p.release for p in points] == ["v1", "v2"] and [p.runs for p in points] == [2, 1]
    kept = {f["run"]: f["value"] for f in store.figures("l1:sat", [r.id for r in store.runs()], "ttft_p50")}
    v1 = [kept[r.id] for r in store.runs() if r.release == "v1"]
    assert points[0].value == pytest.approx(sum(v1) / 2) and points[0].low < points[0].value < points[0].high
    assert points[0].why == "2 runs" and points[1].why.startswith("1 run: within-run interval")
    p90 = trend(store, "ttft_p90")["l1:sat"]            # no row: from the 0.5 % histograms, no interval
    assert p90[1].value == pytest.approx(150 + 5 * 1.2816, rel=0.03) and p90[1].low is None
    with pytest.raises(UsageError, match="no run in the history has 'nonsense'"):
        trend(store, "nonsense")
    store.close()


def test_check_needs_earlier_releases_and_leaves_the_run_itself_out(tmp_path):
    store = open_store(str(tmp_path / "h.sqlite"))
    rng = np.random.default_rng(2)
    _, entry = add(store, "r0", "v1", "2026-12-01T00:00:00Z", rng.normal(100, 5, 400))
    result = check_entry(store, entry, entry_settings())
    assert result.rows == [] and "no earlier release" in result.notes[0]
    for i in range(1, 4):
        add(store, f"r{i}", f"v{i + 1}", f"2026-12-0{i + 1}T00:00:00Z", rng.normal(100, 5, 400))
    result = check_entry(store, entry, entry_settings(), last=2)
    assert result.baselines == {"l1:sat": ["v4", "v3"]}
    row = next(r for r in result.rows if r.metric == "ttft_p50")
    assert row.runs_baseline == 2 and row.runs_candidate == 1 and math.isfinite(row.baseline)
    store.close()


def entry_settings() -> CompareSettings:
    return CompareSettings(resamples=400)

"""``fourfold history check`` is a claim too: a new run of the same version against the last releases
decides nothing in at least 95 % of the checks (A/A), and a known regression fails the check.
Simulated runs (simulate.py) go through the history's own path: reduced to the kept figures
(:func:`fourfold.history.entry.entry_of_samples`), stored in SQLite, checked by
:func:`fourfold.history.check.check_entry`."""

from __future__ import annotations

import sqlite3
from itertools import count

import numpy as np
import pytest

from fourfold.history.check import check_entry, worse_rows
from fourfold.history.entry import entry_of_samples
from fourfold.history.store import Store
from fourfold.reports.compare import CompareSettings
from tests.calibration.simulate import ITEMS, NOISY, QUIET, Version, decided, simulate_run

SETTINGS = CompareSettings(resamples=400)
GROUP = "l1:sim"
_ids = count()


def _facts(release: str) -> dict:
    return {"release": release, "run_id": f"run-{next(_ids)}", "run_path": "/nowhere", "added_at": "t",
            "started_at": None, "level": "l1", "fourfold_version": None, "dataset_hash": None, "target": None,
            "model": None, "machine": None, "tags": {}, "meta": {}, "summary": {}}


def _store() -> Store:
    return Store(sqlite3.connect(":memory:", isolation_level=None), "sqlite", ":memory:")


def check_once(releases: list[Version], new: Version, rng: np.random.Generator, runs_each: int = 1):
    """The releases added one run each (``runs_each``), then a run of ``new`` checked against them."""
    store = _store()
    levels = rng.uniform(0.6, 0.9, ITEMS)
    for i, version in enumerate(releases):
        for _ in range(runs_each):
            entry = entry_of_samples(_facts(f"v{i}"), {GROUP: simulate_run(version, rng, levels)}, SETTINGS)
            store.add(entry.run, entry.groups, entry.figures, entry.histograms)
    entry = entry_of_samples(_facts("new"), {GROUP: simulate_run(new, rng, levels)}, SETTINGS)
    return check_entry(store, entry, SETTINGS, last=len(releases)).rows


@pytest.mark.parametrize("version, releases", [(NOISY, 5), (QUIET, 3)])
def test_a_a_history_check_false_positive_rate_is_at_most_alpha(version, releases):
    rng = np.random.default_rng(40 + releases)
    reps = 60
    alarms = sum(bool(decided(check_once([version] * releases, version, rng))) for _ in range(reps))
    assert alarms / reps <= SETTINGS.alpha


def test_one_earlier_release_gives_no_verdict():
    """One earlier run: no between-run variance on either side, so no verdict on a row of runs (as
    fourfold compare with one run a side)."""
    rng = np.random.default_rng(3)
    for _ in range(10):
        rows = check_once([NOISY], NOISY.slower(1.5), rng)
        assert not [r for r in decided(rows, gated_only=False) if r.metric.startswith(("ttft", "e2e"))]


@pytest.mark.parametrize("effect, candidate, at_least", [
    ("TTFT +40 %, noisy, 5 releases", NOISY.slower(1.4), 0.8),
    ("TTFT +20 %, quiet, 5 releases", QUIET.slower(1.2), 0.8),
])
def test_power_of_history_check_on_a_known_effect(effect, candidate, at_least):
    base = NOISY if candidate.between_cv == NOISY.between_cv else QUIET
    rng = np.random.default_rng(21)
    reps = 20
    hits = sum(any(r.metric in ("ttft_p50", "ttft_p95")
                   for r in worse_rows(check_once([base] * 5, candidate, rng))) for _ in range(reps))
    assert hits / reps >= at_least, effect

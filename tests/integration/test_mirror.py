"""Mirror mode: a share of requests also goes to a second target, paired by pair_id."""

from __future__ import annotations

import collections
import json

import pytest

from tests.conftest import only_run_dir, read_jsonl, run_locust

pytestmark = pytest.mark.integration


def test_mirrored_requests_are_paired_and_kept_apart(tmp_path, locustfile):
    proc = run_locust(["-f", locustfile("l1_throughput.py"), "--headless", "-u", "3", "-r", "3", "-t", "6s",
                       "--max-tokens", "16", "--sim-profile", "baseline", "--mirror-host", "sim:candidate",
                       "--mirror-share", "0.5", "--metrics-url", "off"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = only_run_dir(tmp_path)
    records = read_jsonl(run / "records.jsonl")
    meta = json.loads((run / "meta.json").read_text())
    assert meta["embedded_mirror"]["profile"] == "candidate"
    primaries = [r for r in records if r["variant"] == "" and not r["warmup"]]
    mirrors = [r for r in records if r["variant"] == "mirror"]
    assert mirrors and all(r["scenario"] == "saturation@mirror" for r in mirrors)
    by_pair = collections.defaultdict(list)
    for r in records:
        if r["pair_id"]:
            by_pair[r["pair_id"]].append(r)
    # every mirrored request has exactly its original and its copy, with the same item
    assert all(len(p) == 2 and {r["variant"] for r in p} == {"", "mirror"} and p[0]["item_id"] == p[1]["item_id"]
               for p in by_pair.values())
    assert len(by_pair) == len(mirrors)
    # the share is exact per user: every second measured request
    per_user = collections.Counter(r["user_id"] for r in primaries)
    mirrored_per_user = collections.Counter(r["user_id"] for r in mirrors)
    assert all(mirrored_per_user[u] == n // 2 for u, n in per_user.items())
    summary = json.loads((run / "summary.json").read_text())
    scenarios = {g["scenario"] for g in summary["groups"]}
    assert scenarios == {"saturation", "saturation@mirror"}

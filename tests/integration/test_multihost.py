"""Master and workers on separate network hosts: four network namespaces on one bridge.

The test makes the hosts itself (``ip netns``, veth pairs to a bridge that lives in a fifth, switch
namespace) and removes them after, failures included:

    target  10.77.0.1   simulator (and, for L3, the reference RAG service with the simulator upstream)
    master  10.77.0.2   locust --master --master-bind-host 10.77.0.2: run directory, SLO gate
    worker1 10.77.0.3   locust --worker --master-host 10.77.0.2
    worker2 10.77.0.4   locust --worker --master-host 10.77.0.2

The namespaces have no route anywhere but 10.77.0.0/24 and nothing connects them to the machine's
own namespace: the load stays inside. Namespace names carry the run's start time, so a run killed
before its clean-up never collides with a later one, which removes such leftovers (older than
LEFTOVER_AGE_S, so a concurrent run is left alone). Where namespaces cannot be made (not root, no
``ip``, EPERM in a container) the tests skip and say why.
"""

from __future__ import annotations

import calendar
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from fourfold.errors import RagServiceStartError
from fourfold.levels.l3_rag import DEFAULT_QUESTIONS
from fourfold.rundir.runread import read_records
from fourfold.targets.launch import SimProcess, spawn_listening, start_simulator
from fourfold.targets.rag.cli import LISTENING_PREFIX as RAG_LISTENING
from fourfold.targets.rag.launch import rag_command
from tests.conftest import LOCUST, REPO, locust_env, only_run_dir, preflight_requests

pytestmark = pytest.mark.integration

PREFIX = "ffmh"                       # ffmh<epoch>x<random>-<role>
SUBNET = "10.77.0"
ROLES = ("target", "master", "worker1", "worker2")
ADDRESS = {role: f"{SUBNET}.{i}" for i, role in enumerate(ROLES, start=1)}
MASTER_PORT = 5557
LEFTOVER_AGE_S = 600
LEFTOVER = re.compile(rf"^{PREFIX}(\d+)x[0-9a-f]+-")


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=15, check=False)
    if check and proc.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {proc.stderr.strip()}")
    return proc


def _netns_list() -> list[str]:
    return [line.split()[0] for line in _ip("netns", "list", check=False).stdout.splitlines() if line.strip()]


def _delete_netns(name: str) -> None:
    """Kill what still runs in ``name`` (processes this test started there), then remove it."""
    for pid in _ip("netns", "pids", name, check=False).stdout.split():
        try:
            os.kill(int(pid), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass
    _ip("netns", "delete", name, check=False)


def _remove_leftovers(now: float) -> None:
    for name in _netns_list():
        match = LEFTOVER.match(name)
        if match and now - int(match.group(1)) > LEFTOVER_AGE_S:
            _delete_netns(name)


def _why_not() -> str | None:
    """Why network namespaces cannot be made here, or None."""
    if shutil.which("ip") is None:
        return "no `ip` command (iproute2) to make network namespaces"
    if os.geteuid() != 0:
        return "not root: `ip netns add` needs CAP_SYS_ADMIN"
    probe = f"{PREFIX}{int(time.time())}x{secrets.token_hex(3)}-probe"
    made = _ip("netns", "add", probe, check=False)
    if made.returncode != 0:
        return f"`ip netns add` failed: {made.stderr.strip() or made.returncode}"
    _ip("netns", "delete", probe, check=False)
    return None


@dataclass
class Hosts:
    ns: dict[str, str]          # role -> namespace name

    def exec(self, role: str) -> list[str]:
        return ["ip", "netns", "exec", self.ns[role]]

    def popen(self, role: str, args: list[str], cwd: Path) -> subprocess.Popen[str]:
        return subprocess.Popen([*self.exec(role), *args], cwd=cwd, env=locust_env(), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)


@pytest.fixture(scope="module")
def hosts():
    why = _why_not()
    if why:
        pytest.skip(f"multi-host test needs network namespaces: {why}")
    now = time.time()
    _remove_leftovers(now)
    run = f"{PREFIX}{int(now)}x{secrets.token_hex(3)}"
    ns = {role: f"{run}-{role}" for role in (*ROLES, "sw")}
    try:
        for name in ns.values():
            _ip("netns", "add", name)
        sw = ns["sw"]
        _ip("-n", sw, "link", "add", "br0", "type", "bridge")
        _ip("-n", sw, "link", "set", "br0", "up")
        for i, role in enumerate(ROLES, start=1):
            # the pair is made inside the switch namespace: no interface ever exists in the host's
            _ip("-n", sw, "link", "add", f"p{i}", "type", "veth", "peer", "name", "eth0", "netns", ns[role])
            _ip("-n", sw, "link", "set", f"p{i}", "master", "br0")
            _ip("-n", sw, "link", "set", f"p{i}", "up")
            _ip("-n", ns[role], "addr", "add", f"{ADDRESS[role]}/24", "dev", "eth0")
            _ip("-n", ns[role], "link", "set", "eth0", "up")
            _ip("-n", ns[role], "link", "set", "lo", "up")
        yield Hosts({role: ns[role] for role in ROLES})
    finally:
        for name in ns.values():
            _delete_netns(name)
    assert not [name for name in _netns_list() if name.startswith(run)], "namespaces left behind"


@pytest.fixture(scope="module")
def target(hosts, tmp_path_factory):
    """(simulator, RAG service URL) in the target namespace, bound to its address only."""
    cwd = tmp_path_factory.mktemp("target")
    sim = start_simulator(profile="baseline", seed=3, host=ADDRESS["target"], prefix=hosts.exec("target"),
                          cwd=cwd, extra_args=["--prompts", str(DEFAULT_QUESTIONS)])
    rag = None
    try:
        command = [*hosts.exec("target"), *rag_command(sim.url, "bm25", "none", 3, [], sys.executable,
                                                        ADDRESS["target"])]
        rag, rag_url, _ = spawn_listening(command, RAG_LISTENING, "RAG service", 30,
                                          RagServiceStartError, cwd)
        yield sim, rag_url
    finally:
        sim.stop()
        if rag is not None and rag.poll() is None:
            rag.kill()
            rag.wait(10)


def _received(hosts: Hosts, sim: SimProcess) -> int:
    """Generation requests the simulator saw, read from inside the target namespace."""
    code = ("import re, sys, urllib.request as u; "
            "t = u.urlopen(sys.argv[1] + '/metrics', timeout=5).read().decode(); "
            "print(re.search(r'^fourfold_sim_received_total(?:\\{[^}]*\\})? (\\S+)', t, re.M).group(1))")
    out = subprocess.run([*hosts.exec("target"), sys.executable, "-c", code, sim.url], capture_output=True,
                         text=True, timeout=30, check=True).stdout
    return int(float(out))


def _distributed(hosts: Hosts, base: Path, common: list[str], master_args: list[str],
                 kill_after_lines: int = 0) -> tuple[subprocess.Popen[str], str, list[str], float,
                                                     list[subprocess.Popen[str]]]:
    """A headless run: master in its namespace, one worker in each worker namespace. With
    ``kill_after_lines``, worker2 gets SIGKILL once the master's records.jsonl has that many lines.
    Returns (master, its output, each worker's output, the kill's wall-clock time or 0, the workers)."""
    dirs = {role: base / role for role in ("master", "worker1", "worker2")}
    for path in dirs.values():
        path.mkdir()
    master = hosts.popen("master", [*LOCUST, *common, "--master", "--master-bind-host", ADDRESS["master"],
                                    "--master-bind-port", str(MASTER_PORT), "--headless",
                                    "--expect-workers", "2", "--expect-workers-max-wait", "40",
                                    *master_args], dirs["master"])
    workers = [hosts.popen(role, [*LOCUST, *common, "--worker", "--master-host", ADDRESS["master"],
                                  "--master-port", str(MASTER_PORT)], dirs[role])
               for role in ("worker1", "worker2")]
    killed_at = 0.0
    try:
        if kill_after_lines:
            # the kill comes once the master holds kill_after_lines records and each worker has had
            # time for a report (one every 3 s from its own start: the first lines may be one
            # worker's); the master then needs ~3 s of missed heartbeats to call it missing
            deadline, first_seen = time.monotonic() + 45, None
            while time.monotonic() < deadline and master.poll() is None:
                found = list((dirs["master"] / "runs").glob("*/records.jsonl"))
                lines = found[0].read_bytes().count(b"\n") if found else 0
                if lines and first_seen is None:
                    first_seen = time.monotonic()
                if (lines >= kill_after_lines and first_seen is not None
                        and time.monotonic() - first_seen >= 3.5):
                    break
                time.sleep(0.1)
            assert master.poll() is None, \
                "the master ended before the kill:\n" + master.communicate()[0][-3000:]
            workers[1].kill()                           # SIGKILL: no handler, no final report
            killed_at = time.time()
        out, _ = master.communicate(timeout=90)
        outs = [proc.communicate(timeout=30)[0] for proc in workers]
    finally:
        for proc in (master, *workers):
            if proc.poll() is None:
                proc.kill()
                proc.communicate(timeout=10)
    return master, out, outs, killed_at, workers


def _measured(worker_out: str) -> tuple[int, str]:
    """(records measured, worker id) from a worker's closing line."""
    match = re.search(r"fourfold worker: (\d+) records measured.* \(worker (\S+)\)", worker_out)
    assert match, worker_out[-3000:]
    return int(match.group(1)), match.group(2)


def test_namespaces_reach_only_each_other(hosts):
    for role in ROLES:
        routes = _ip("-n", hosts.ns[role], "route", "show").stdout.strip().splitlines()
        assert [r.split() for r in routes] == \
            [f"{SUBNET}.0/24 dev eth0 proto kernel scope link src {ADDRESS[role]}".split()]
    for role in ("master", "worker1", "worker2"):
        ping = subprocess.run([*hosts.exec(role), sys.executable, "-c",
                               f"import socket; socket.create_connection(({ADDRESS['target']!r}, 9), 2)"],
                              capture_output=True, text=True, timeout=20)
        assert "ConnectionRefused" in ping.stderr, ping.stderr      # reached the target host: port 9 closed


def test_l1_across_hosts_merges_every_record_and_gates_on_the_master(hosts, target, tmp_path):
    sim, _ = target
    before = _received(hosts, sim)
    common = ["-f", str(REPO / "locustfiles" / "l1_throughput.py"), "--max-tokens", "12", "--ignore-eos"]
    master, out, outs, _, workers = _distributed(
        hosts, tmp_path, common,
        ["-u", "4", "-r", "4", "-t", "5s", "--host", sim.url, "--label", "mh-l1",
         "--slo", "ttft_p95<=30s,e2e_p99<=1ms"])
    sent = _received(hosts, sim) - before
    assert "Traceback" not in out and not any("Traceback" in o for o in outs), out[-3000:]
    assert master.returncode == 3, out[-3000:]                  # the gate: e2e_p99<=1ms missed, on the master
    assert [w.returncode for w in workers] == [0, 0], outs
    run = only_run_dir(tmp_path / "master")
    for role in ("worker1", "worker2"):                         # no run directory on a worker
        assert not (tmp_path / role / "runs").exists()
    summary = json.loads((run / "summary.json").read_text())
    records = list(read_records(run))
    per_worker = [_measured(o)[0] for o in outs]
    assert min(per_worker) > 0, per_worker                     # both workers took part
    assert summary["records"] == len(records) == sum(per_worker) == sent - preflight_requests(run)
    assert summary["total"]["ok"] == sum(1 for r in records if r.error_class == "ok" and not r.warmup)
    assert summary["workers"] == {"count": 2, "stopped_reporting": [], "unaccounted": 0}
    telemetry = summary["server_metrics"]                      # sampled by the master, from its own host
    assert telemetry["metrics_urls"] == [sim.url + "/metrics"] and not telemetry["errors"], telemetry
    assert telemetry["metrics"]["server.running"]["samples"] >= 2
    verdicts = {v["metric"]: v["status"] for v in summary["slo"]["verdicts"]}
    assert verdicts == {"ttft_p95": "pass", "e2e_p99": "miss"}, summary["slo"]
    assert summary["slo"]["exit_code"] == 3 and summary["slo"]["failed"] == 1


def test_l3_across_hosts_names_the_killed_worker(hosts, target, tmp_path):
    sim, rag_url = target
    before = _received(hosts, sim)
    common = ["-f", str(REPO / "locustfiles" / "l3_rag.py")]
    master, out, outs, killed_at, _ = _distributed(
        hosts, tmp_path, common, ["-u", "4", "-r", "4", "-t", "12s", "--host", rag_url, "--label", "mh-l3"],
        kill_after_lines=8)                                     # the kill at ~7 s, noticed at ~10 s
    sent = _received(hosts, sim) - before
    assert "Traceback" not in out, out[-3000:]
    run = only_run_dir(tmp_path / "master")
    summary = json.loads((run / "summary.json").read_text())
    records = list(read_records(run))
    survivor, survivor_id = _measured(outs[0])
    assert survivor > 0 and summary["records"] == len(records) > survivor     # the killed one shipped too
    assert len(records) <= sent                                 # its unshipped records are lost
    assert all(r.extra.get("retrieved_ids") for r in records if r.error_class == "ok")
    assert summary["rag"]["recall_at_k"] is not None
    workers = summary["workers"]
    assert workers["count"] == 2
    [lost] = workers["stopped_reporting"]
    assert lost["worker"] != survivor_id
    heard = calendar.timegm(time.strptime(lost["last_heard_at"], "%Y-%m-%dT%H:%M:%SZ"))   # whole seconds
    assert killed_at - 4 <= heard <= killed_at + 1, (lost, killed_at)  # when: its last word before the kill
    assert lost["records_received"] > 0
    assert 0 < lost["unaccounted"] == lost["requests_started"] - lost["records_received"]
    assert lost["unaccounted"] <= sent - len(records)           # a lower bound of what is really missing
    assert workers["unaccounted"] == lost["unaccounted"]
    assert f"fourfold: worker {lost['worker']} stopped reporting at {lost['last_heard_at']}" in out

"""Check the L1 GPU sampler against the GPU itself (needs an NVIDIA GPU, torch and nvidia-ml-py).

    python benchmarks/gpu_sampler_check.py --out OUTDIR

Runs a real L1 Locust run (embedded simulator, ``--sample-interval 0.5``) while this process puts
the GPU through known phases: idle, a 16 GiB allocation held idle, a memory-bound copy loop, a
compute-bound bf16 matrix-product loop, idle again (utilisation, memory and power draw: nvidia-smi's
power.draw against NVML's power usage, and summary.json's energy per token from it). An NVML reader
thread (``pynvml``, the library nvidia-smi itself reads) samples every 0.1 s on its own. At the end the run's
``server_metrics.json`` (the ``nvidia_smi.*`` columns our sampler wrote) is compared phase by phase
with NVML and with what each phase must show; every check prints PASS or FAIL and the exit code is
the number of failures. Results go to ``OUTDIR/gpu_sampler_check.json``.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GIB = 1 << 30


class NvmlReader(threading.Thread):
    """Independent ground truth: NVML utilisation and memory every ``period_s``."""

    def __init__(self, period_s: float = 0.1) -> None:
        super().__init__(daemon=True)
        import pynvml

        self.nvml = pynvml
        pynvml.nvmlInit()
        self.handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        self.total_mib = pynvml.nvmlDeviceGetMemoryInfo(self.handle).total / (1 << 20)
        self.period_s = period_s
        self.rows: list[dict[str, float]] = []
        self.stop_flag = threading.Event()

    def run(self) -> None:
        nv = self.nvml
        while not self.stop_flag.is_set():
            util = nv.nvmlDeviceGetUtilizationRates(self.handle)
            mem = nv.nvmlDeviceGetMemoryInfo(self.handle)
            self.rows.append({"t_s": time.time(), "gpu_util_pct": float(util.gpu),
                              "mem_bw_util_pct": float(util.memory),
                              "gpu_mem_used_mib": mem.used / (1 << 20),
                              "power_w": nv.nvmlDeviceGetPowerUsage(self.handle) / 1000.0})
            time.sleep(self.period_s)


def gpu_phases(seconds: float) -> list[dict[str, float | str]]:
    """Put the GPU through known states; return each phase's name and wall-clock bounds."""
    import torch

    dev = torch.device("cuda")
    torch.ones(1, device=dev)                       # CUDA context before the first phase
    torch.cuda.synchronize()
    phases: list[dict[str, float | str]] = []

    def phase(name: str, body) -> None:
        start = time.time()
        deadline = start + seconds
        body(deadline)
        torch.cuda.synchronize()
        phases.append({"name": name, "start": start, "end": time.time()})

    def idle(deadline: float) -> None:
        time.sleep(max(0.0, deadline - time.time()))

    phase("idle", idle)
    held = torch.empty(16 * GIB, dtype=torch.uint8, device=dev)
    held.fill_(1)
    torch.cuda.synchronize()
    phase("alloc_16gib_idle", idle)

    def loop(step):
        def body(deadline: float) -> None:
            while time.time() < deadline:
                for _ in range(50):
                    step()
                torch.cuda.synchronize()
        return body

    t = {"src": torch.empty(4 * GIB, dtype=torch.uint8, device=dev)}
    t["dst"] = torch.empty_like(t["src"])
    phase("copy_loop", loop(lambda: t["dst"].copy_(t["src"])))     # memory-bound
    t = {"x": torch.randn(8192, 8192, dtype=torch.bfloat16, device=dev),
         "y": torch.randn(8192, 8192, dtype=torch.bfloat16, device=dev)}
    phase("matmul_loop", loop(lambda: torch.mm(t["x"], t["y"])))   # compute-bound bf16 products
    t.clear()
    del held
    torch.cuda.empty_cache()
    phase("idle_after", idle)
    return phases


def window_mean(rows: list[dict[str, float]], key: str, start: float, end: float) -> float | None:
    values = [r[key] for r in rows if start <= r["t_s"] <= end and key in r]
    return sum(values) / len(values) if values else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="out/gpu-check")
    ap.add_argument("--phase-s", type=float, default=10.0)
    ap.add_argument("--users", type=int, default=16)
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    smi = shutil.which("nvidia-smi")
    if not smi:
        print("no nvidia-smi on PATH: this check needs an NVIDIA GPU")
        return 2
    print(subprocess.run([smi,
                          "--query-gpu=name,driver_version,memory.total,utilization.gpu,utilization.memory",
                          "--format=csv"], capture_output=True, text=True).stdout)

    nvml = NvmlReader()
    nvml.start()
    run_dir = out / "runs"
    run_s = int(args.phase_s * 5 + 12)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    locust = subprocess.Popen(
        [sys.executable, "-m", "locust", "-f", str(ROOT / "locustfiles/l1_throughput.py"), "--headless",
         "-u", str(args.users), "-r", str(args.users), "-t", f"{run_s}s", "--run-dir", str(run_dir),
         "--label", "gpucheck", "--sample-interval", "0.5", "--max-tokens", "256"],
        cwd=ROOT, env=env, stdout=open(out / "locust.log", "w"), stderr=subprocess.STDOUT)
    time.sleep(4.0)                                 # Locust up and the sampler ticking
    phases = gpu_phases(args.phase_s)
    rc = locust.wait(timeout=run_s + 60)
    nvml.stop_flag.set()
    nvml.join()

    run = sorted(glob.glob(str(run_dir / "*gpucheck*")))[-1]
    ours = json.loads(Path(run, "server_metrics.json").read_text())
    summary = json.loads(Path(run, "summary.json").read_text())
    sm = summary.get("server_metrics", {})

    table = []
    for p in phases:
        lo, hi = float(p["start"]) + 2.0, float(p["end"]) - 0.5   # NVML's utilisation averages ~1 s back
        row: dict[str, object] = {"phase": p["name"],
                                  "seconds": round(float(p["end"]) - float(p["start"]), 1),
                                  "samples": sum(1 for r in ours if lo <= r["t_s"] <= hi)}
        for key in ("gpu_util_pct", "mem_bw_util_pct", "gpu_mem_used_mib", "power_w"):
            row[f"ours.{key}"] = window_mean(ours, f"nvidia_smi.{key}", lo, hi)
            row[f"nvml.{key}"] = window_mean(nvml.rows, key, lo, hi)
        table.append(row)

    by = {r["phase"]: r for r in table}
    checks: list[tuple[str, bool, str]] = []

    def check(name: str, ok: bool, detail: str) -> None:
        checks.append((name, bool(ok), detail))

    check("locust exit 0", rc == 0, f"rc={rc}")
    check("sampler saw nvidia-smi", sm.get("nvidia_smi") is True and not sm.get("errors"),
          f"nvidia_smi={sm.get('nvidia_smi')} errors={sm.get('errors')}")
    n_smi = sum(1 for r in ours if "nvidia_smi.gpu_util_pct" in r)
    check("a sample every 0.5 s", n_smi >= 0.8 * run_s / 0.5, f"{n_smi} samples in {run_s} s")
    total = [r["nvidia_smi.gpu_mem_total_mib"] for r in ours if "nvidia_smi.gpu_mem_total_mib" in r]
    check("memory total = NVML's", bool(total) and abs(total[-1] - nvml.total_mib) <= 1.0,
          f"ours {total[-1] if total else None} MiB, NVML {nvml.total_mib:.0f} MiB")
    gpus = {r.get("nvidia_smi.gpus") for r in ours if "nvidia_smi.gpus" in r}
    check("one GPU", gpus == {1.0}, f"gpus={gpus}")

    def val(phase: str, key: str) -> float:
        v = by[phase][key]
        return float(v) if v is not None else float("nan")

    delta = val("alloc_16gib_idle", "ours.gpu_mem_used_mib") - val("idle", "ours.gpu_mem_used_mib")
    check("16 GiB allocation seen", abs(delta - 16384) <= 0.03 * 16384, f"used +{delta:.0f} MiB")
    check("idle: gpu util < 10 %", val("idle", "ours.gpu_util_pct") < 10,
          f"{val('idle', 'ours.gpu_util_pct'):.1f}")
    check("copy loop: memory-bandwidth util > 50 %", val("copy_loop", "ours.mem_bw_util_pct") > 50,
          f"{val('copy_loop', 'ours.mem_bw_util_pct'):.1f}")
    check("matmul loop: gpu util > 90 %", val("matmul_loop", "ours.gpu_util_pct") > 90,
          f"{val('matmul_loop', 'ours.gpu_util_pct'):.1f}")
    check("idle after: util back < 10 %", val("idle_after", "ours.gpu_util_pct") < 10,
          f"{val('idle_after', 'ours.gpu_util_pct'):.1f}")
    for r in table:
        for key, tol in (("gpu_util_pct", 10.0), ("mem_bw_util_pct", 10.0),
                         ("gpu_mem_used_mib", 0.01 * nvml.total_mib)):
            a, b = r[f"ours.{key}"], r[f"nvml.{key}"]
            ok = a is not None and b is not None and abs(float(a) - float(b)) <= tol
            check(f"{r['phase']}: {key} within {tol:.0f} of NVML", ok, f"ours {a} NVML {b}")
    # power (issue 35's energy): nvidia-smi's power.draw against NVML's, phase by phase; the matrix
    # products draw well above idle; summary.json's cost block turns the mean into J per token
    for r in table:
        a, b = r["ours.power_w"], r["nvml.power_w"]
        tol = max(30.0, 0.10 * float(b)) if b is not None else 0.0
        ok = a is not None and b is not None and abs(float(a) - float(b)) <= tol
        check(f"{r['phase']}: power_w within {tol:.0f} W of NVML", ok, f"ours {a} NVML {b}")
    rise = val("matmul_loop", "ours.power_w") - val("idle", "ours.power_w")
    check("matmul loop draws >= 100 W above idle", rise >= 100, f"+{rise:.0f} W")
    # the cost block takes the target's power series first (server.power_w: here the embedded
    # simulator's, which follows its load), nvidia-smi's where the target exports none
    cost = summary.get("cost") or {}
    metrics = sm.get("metrics", {})
    series = next((n for n in ("server.power_w", "nvidia_smi.power_w") if n in metrics), None)
    power_mean = (metrics.get(series) or {}).get("mean") if series else None
    wall, tokens = (summary.get("total") or {}).get("wall_s"), (summary.get("total") or {}).get(
        "output_tokens_total")
    expected = power_mean * wall / tokens if power_mean and wall and tokens else None
    check(f"summary.json cost: power_w_mean = {series}'s mean, joules_per_token = it x wall / tokens",
          expected is not None and cost.get("power_w_mean") == power_mean
          and abs(cost.get("joules_per_token", -1) - expected) <= 1e-4 + 1e-6 * expected,
          f"cost={json.dumps(cost)} expected J/token {expected}")
    smi_mean = (metrics.get("nvidia_smi.power_w") or {}).get("mean")
    sampled = [r["t_s"] for r in ours if "nvidia_smi.power_w" in r]
    nvml_mean = window_mean(nvml.rows, "power_w", min(sampled), max(sampled)) if sampled else None
    check("summary.json nvidia_smi.power_w mean within 5 % of NVML's over the same seconds",
          smi_mean is not None and nvml_mean is not None and abs(smi_mean - nvml_mean) <= 0.05 * nvml_mean,
          f"ours {smi_mean} NVML {nvml_mean}")
    for name, least_max in (("nvidia_smi.gpu_util_pct", 90.0), ("nvidia_smi.mem_bw_util_pct", 50.0)):
        m = sm.get("metrics", {}).get(name, {})
        check(f"summary.json has mean/max of {name} (max >= {least_max:g})",
              "mean" in m and "max" in m and m["max"] >= least_max, json.dumps(m))

    print(f"{'phase':18} {'s':>5} {'n':>3} | {'gpu% ours':>9} {'NVML':>6} | "
          f"{'membw% ours':>11} {'NVML':>6} | {'used MiB ours':>13} {'NVML':>8} | {'W ours':>7} {'NVML':>6}")
    for r in table:
        def f(v: object) -> str:
            return "-" if v is None else f"{float(v):.1f}"
        print(f"{r['phase']:18} {r['seconds']:>5} {r['samples']:>3} | "
              f"{f(r['ours.gpu_util_pct']):>9} {f(r['nvml.gpu_util_pct']):>6} | "
              f"{f(r['ours.mem_bw_util_pct']):>11} {f(r['nvml.mem_bw_util_pct']):>6} | "
              f"{f(r['ours.gpu_mem_used_mib']):>13} {f(r['nvml.gpu_mem_used_mib']):>8} | "
              f"{f(r['ours.power_w']):>7} {f(r['nvml.power_w']):>6}")
    failures = 0
    for name, ok, detail in checks:
        failures += not ok
        print(f"{'PASS' if ok else 'FAIL'}  {name}: {detail}")
    (out / "gpu_sampler_check.json").write_text(json.dumps(
        {"phases": phases, "table": table, "checks": checks, "summary_server_metrics": sm,
         "samples": ours, "nvml_rows": len(nvml.rows)}, indent=1, default=str))
    shutil.copy(Path(run, "summary.json"), out / "summary.json")
    print(f"{failures} failed of {len(checks)}")
    return failures


if __name__ == "__main__":
    sys.exit(main())

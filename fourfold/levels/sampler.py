"""Server-metrics sampler: the target's Prometheus /metrics and local nvidia-smi, once a second.

Runs as one greenlet on the local runner or the master (the target is one server, however many
workers load it). Each tick appends ``{"t_s": unix seconds, "source.metric": value, ...}``; at the
end the series goes to ``server_metrics.json`` and a per-metric summary into ``summary.json``.
A target without /metrics or a machine without nvidia-smi just yields fewer columns.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import time
from typing import Any

import gevent
import httpx

from fourfold.measure.prom import (
    NVIDIA_SMI_ARGS,
    canonical_metrics,
    parse_nvidia_smi,
    parse_prometheus,
    summarize_series,
)

log = logging.getLogger("fourfold")


class Sampler:
    def __init__(self, metrics_url: str, interval_s: float = 1.0, nvidia_smi: str | None = None) -> None:
        self.metrics_url = metrics_url
        self.interval_s = interval_s
        self.nvidia_smi = nvidia_smi
        self.rows: list[dict[str, float]] = []
        self.errors: dict[str, str] = {}
        self._client = httpx.Client(timeout=httpx.Timeout(max(interval_s, 1.0)))
        self._greenlet: gevent.Greenlet | None = None

    def sample_once(self) -> dict[str, float]:
        row: dict[str, float] = {"t_s": round(time.time(), 3)}
        if self.metrics_url:
            try:
                response = self._client.get(self.metrics_url)
                if response.status_code == 200:
                    for key, value in canonical_metrics(parse_prometheus(response.text)).items():
                        row[f"server.{key}"] = value
                else:
                    self.errors["metrics"] = f"HTTP {response.status_code} from {self.metrics_url}"
            except httpx.HTTPError as exc:
                self.errors["metrics"] = f"{exc.__class__.__name__}: {exc}"
        if self.nvidia_smi:
            try:
                out = subprocess.run([self.nvidia_smi, *NVIDIA_SMI_ARGS[1:]], capture_output=True,
                                     text=True, timeout=5, check=False)
                for key, value in parse_nvidia_smi(out.stdout).items():
                    row[f"nvidia_smi.{key}"] = value
            except (OSError, subprocess.SubprocessError) as exc:
                self.errors["nvidia_smi"] = str(exc)
        self.rows.append(row)
        return row

    def _loop(self) -> None:
        while True:
            started = time.monotonic()
            self.sample_once()
            gevent.sleep(max(0.0, self.interval_s - (time.monotonic() - started)))

    def start(self) -> Sampler:
        self._greenlet = gevent.spawn(self._loop)
        return self

    def stop(self) -> dict[str, Any]:
        if self._greenlet is not None:
            self._greenlet.kill(block=True, timeout=2)
            self._greenlet = None
        self._client.close()
        return {"metrics_url": self.metrics_url, "nvidia_smi": bool(self.nvidia_smi),
                "errors": dict(self.errors), "metrics": summarize_series(self.rows)}

    def series(self) -> list[dict[str, float]]:
        return list(self.rows)


def start_sampler(runtime: Any) -> Sampler | None:
    settings = runtime.settings
    url = settings.metrics_url
    if url == "off":
        return None
    if not url:
        host = (runtime.environment.host or "").rstrip("/")
        url = f"{host}/metrics" if host else ""
    nvidia_smi = shutil.which("nvidia-smi")
    if not url and not nvidia_smi:
        return None
    return Sampler(url, settings.sample_interval_s, nvidia_smi).start()

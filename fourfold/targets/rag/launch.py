"""Start the reference RAG service as a subprocess on a free port (like :mod:`fourfold.targets.launch`).

    with start_simulator(extra_args=["--prompts", str(DEFAULT_QUESTIONS)]) as sim, \\
            start_rag_service(sim.url, rerank="lexical") as rag:
        httpx.post(rag.url + "/v1/rag", json={"question": "Who founded Velora Systems?"})

The child is ``python -m fourfold.targets.rag --port 0 ...``; its one listening line on stdout gives the
URL. ``stop()`` sends SIGTERM, waits, and kills the child if it does not exit in time.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fourfold.errors import RagServiceStartError
from fourfold.targets.launch import ChildProcess, spawn_listening
from fourfold.targets.rag.cli import LISTENING_PREFIX, stages

__all__ = ["RagProcess", "RagServiceStartError", "rag_command", "start_rag_service"]

START_TIMEOUT_S = 20.0
DENSE_START_TIMEOUT_S = 180.0     # torch import + model load + corpus embedding on a cold cache


@dataclass
class RagProcess(ChildProcess):
    config: dict[str, Any] = field(default_factory=dict)


def rag_command(upstream: str, retriever: str | None, rerank: str | None, top_k: int,
                extra_args: Sequence[str], python: str, host: str, profile: str | None = None) -> list[str]:
    """The child's command line; a stage left None comes from ``profile`` (else bm25 / none)."""
    command = [python, "-m", "fourfold.targets.rag", "--upstream", upstream]
    command += ["--retriever", retriever] if retriever else []
    command += ["--rerank", rerank] if rerank else []
    command += ["--profile", profile] if profile else []
    return [*command, "--top-k", str(top_k), "--host", host, "--port", "0", *extra_args]


def start_rag_service(
    upstream: str,
    retriever: str | None = "bm25",
    rerank: str | None = "none",
    top_k: int = 3,
    extra_args: Sequence[str] = (),
    python: str = sys.executable,
    host: str = "127.0.0.1",
    timeout_s: float | None = None,
    cwd: str | Path | None = None,
    profile: str | None = None,
) -> RagProcess:
    """Run the service on a free port and return once it listens (see module docstring). With
    ``profile`` (a simulator profile), a stage passed as None is that profile's ``rag_retriever`` /
    ``rag_rerank``: ``start_rag_service(url, None, None, profile="candidate")`` re-ranks."""

    retriever, rerank = stages(profile, retriever, rerank)
    if timeout_s is None:
        timeout_s = DENSE_START_TIMEOUT_S if "dense" in (retriever, rerank) else START_TIMEOUT_S
    command = rag_command(upstream, retriever, rerank, top_k, extra_args, python, host)
    process, url, stderr_lines = spawn_listening(command, LISTENING_PREFIX, "RAG service", timeout_s,
                                                 RagServiceStartError, cwd)
    config = {"retriever": retriever, "rerank": rerank, "top_k": top_k, "upstream": upstream}
    return RagProcess(process, url, config=config, _stderr_lines=stderr_lines)

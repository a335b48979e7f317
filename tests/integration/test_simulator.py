"""The simulator as a subprocess, spoken to with raw sockets (never client.dialects).

Every response is read byte by byte here: the status line, headers, and the chunked framing, so
these tests pin the exact wire format that real servers send and fourfold's parsers must read.
"""

from __future__ import annotations

import json
import selectors
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from fourfold.targets.launch import SimProcess, SimulatorStartError, start_simulator
from fourfold.targets.sim.answers import AnswerBook
from tests.integration.corewait import core_wait

pytestmark = pytest.mark.integration

BOOK = AnswerBook.load()
SKY = "Why is the sky blue?"          # 6 prompt tokens: "Why ", "is ", "the ", "sky ", "blue", "?"


# --- a tiny raw HTTP/1.1 client -------------------------------------------------------------
@dataclass
class RawResponse:
    status: int
    headers: dict[str, str]
    body: bytes = b""
    chunks: list[tuple[float, bytes]] = field(default_factory=list)   # (seconds since send, payload)
    t_head_s: float = 0.0
    t_send_s: float = 0.0          # perf_counter (CLOCK_MONOTONIC, the simulator's plan clock) at the send

    @property
    def plan(self) -> dict:
        return json.loads(self.headers["x-fourfold-plan"])

    def json(self) -> dict:
        return json.loads(self.body)

    def events(self) -> list[str]:
        return [e for e in self.body.decode().split("\n\n") if e]


def request_bytes(method: str, path: str, body: dict | bytes | None = None,
                  headers: dict[str, str] | None = None) -> bytes:
    payload = body if isinstance(body, bytes) else (json.dumps(body).encode() if body is not None else b"")
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1",
             *(f"{k}: {v}" for k, v in (headers or {}).items())]
    if body is not None:
        lines += ["Content-Type: application/json", f"Content-Length: {len(payload)}"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + payload


class Conn:
    """One keep-alive connection; ``exchange`` sends a request and reads one whole response."""

    def __init__(self, sim: SimProcess) -> None:
        self.sock = socket.create_connection(("127.0.0.1", sim.port), timeout=15)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buffer = b""

    def close(self) -> None:
        self.sock.close()

    def _more(self) -> bytes:
        data = self.sock.recv(65536)
        if not data:
            raise ConnectionError("server closed the connection")
        return data

    def exchange(self, raw: bytes) -> RawResponse:
        t_send = time.perf_counter()
        self.sock.sendall(raw)
        while b"\r\n\r\n" not in self.buffer:
            self.buffer += self._more()
        head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        status_line, *header_lines = head.decode("latin-1").split("\r\n")
        assert status_line.startswith("HTTP/1.1 ")
        headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in header_lines)}
        response = RawResponse(int(status_line.split()[1]), headers, t_head_s=time.perf_counter() - t_send,
                               t_send_s=t_send)
        if "content-length" in headers:
            length = int(headers["content-length"])
            while len(self.buffer) < length:
                self.buffer += self._more()
            response.body, self.buffer = self.buffer[:length], self.buffer[length:]
            return response
        assert headers["transfer-encoding"] == "chunked"
        while True:
            while b"\r\n" not in self.buffer:
                self.buffer += self._more()
            size_line, rest = self.buffer.split(b"\r\n", 1)
            size = int(size_line, 16)
            while len(rest) < size + 2:
                rest += self._more()
            if size == 0:
                assert rest[:2] == b"\r\n", "last chunk must end with an empty line"
                self.buffer = rest[2:]
                return response
            payload, trailer, self.buffer = rest[:size], rest[size:size + 2], rest[size + 2:]
            assert trailer == b"\r\n"
            response.chunks.append((time.perf_counter() - t_send, payload))
            response.body += payload


def call(sim: SimProcess, method: str, path: str, body=None, headers=None) -> RawResponse:
    conn = Conn(sim)
    try:
        return conn.exchange(request_bytes(method, path, body, headers))
    finally:
        conn.close()


def chat(prompt: str, **extra) -> dict:
    return {"model": "m", "messages": [{"role": "user", "content": prompt}], **extra}


# --- simulators --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def flat() -> Iterator[SimProcess]:
    with start_simulator("flat", seed=1) as sim:
        yield sim


@pytest.fixture(scope="module")
def fast_flat() -> Iterator[SimProcess]:
    with start_simulator("flat", seed=1, extra_args=["--ttft-ms", "5", "--itl-ms", "1"]) as sim:
        yield sim


# --- formats -----------------------------------------------------------------------------
def test_openai_stream_format_and_usage(fast_flat: SimProcess) -> None:
    body = chat(SKY, stream=True, stream_options={"include_usage": True})
    response = call(fast_flat, "POST", "/v1/chat/completions", body)
    assert response.status == 200
    assert response.headers["content-type"] == "text/event-stream; charset=utf-8"
    events = response.events()
    assert all(e.startswith("data: ") and "\n" not in e for e in events)
    assert events[-1] == "data: [DONE]"
    chunks = [json.loads(e[6:]) for e in events[:-1]]
    assert {c["id"] for c in chunks} == {chunks[0]["id"]} and chunks[0]["object"] == "chat.completion.chunk"
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    content = chunks[1:-2]
    assert all(c["choices"][0]["finish_reason"] is None and set(c["choices"][0]["delta"]) == {"content"}
               for c in content)
    assert "".join(c["choices"][0]["delta"]["content"] for c in content) == BOOK.answer(SKY).text
    final = chunks[-2]["choices"][0]
    assert final["delta"] == {} and final["finish_reason"] == "stop"
    usage = chunks[-1]
    assert usage["choices"] == [] and usage["usage"] == {
        "prompt_tokens": 6, "completion_tokens": len(content), "total_tokens": 6 + len(content),
        "prompt_tokens_details": {"cached_tokens": 0}}     # vLLM's --enable-prompt-tokens-details
    assert all(c["usage"] is None for c in chunks[:-1])
    assert response.plan["output_tokens"] == len(content) and response.plan["input_tokens"] == 6


def test_openai_non_stream_and_max_tokens(fast_flat: SimProcess) -> None:
    response = call(fast_flat, "POST", "/v1/chat/completions", chat(SKY, max_tokens=5))
    data = response.json()
    assert response.headers["content-type"] == "application/json"
    assert data["object"] == "chat.completion"
    assert data["choices"][0]["message"] == {"role": "assistant", "content": "The sky looks blue because "}
    assert data["choices"][0]["finish_reason"] == "length"
    assert data["usage"] == {"prompt_tokens": 6, "completion_tokens": 5, "total_tokens": 11,
                             "prompt_tokens_details": {"cached_tokens": 0}}


def test_ignore_eos_produces_exactly_max_tokens(fast_flat: SimProcess) -> None:
    response = call(fast_flat, "POST", "/v1/chat/completions",
                    chat(SKY, stream=True, max_tokens=300, ignore_eos=True,
                         stream_options={"include_usage": True}))
    chunks = [json.loads(e[6:]) for e in response.events()[:-1]]
    assert sum(1 for c in chunks if c["choices"] and c["choices"][0]["delta"].get("content")) == 300
    assert chunks[-2]["choices"][0]["finish_reason"] == "length"
    assert chunks[-1]["usage"]["completion_tokens"] == 300
    unbounded = call(fast_flat, "POST", "/v1/chat/completions", chat(SKY, max_tokens=1000)).json()
    assert unbounded["choices"][0]["finish_reason"] == "stop"
    assert unbounded["choices"][0]["message"]["content"] == BOOK.answer(SKY).text


def test_anthropic_stream_format(fast_flat: SimProcess) -> None:
    prompt = "简述量子退火原理。"
    body = {"model": "claude", "max_tokens": 1024, "stream": True, "system": "Be brief.",
            "messages": [{"role": "user", "content": [{"type": "text", "text": prompt}]}]}
    response = call(fast_flat, "POST", "/v1/messages", body)
    parsed = []
    for event in response.events():
        name_line, data_line = event.split("\n")
        assert name_line.startswith("event: ") and data_line.startswith("data: ")
        data = json.loads(data_line[6:])
        assert data["type"] == name_line[7:]
        parsed.append(data)
    names = [d["type"] for d in parsed]
    n = len(BOOK.answer(prompt).text)             # Chinese: one character per token
    assert names == ["message_start", "content_block_start", "ping"] + ["content_block_delta"] * n + [
        "content_block_stop", "message_delta", "message_stop"]
    start = parsed[0]["message"]
    assert start["role"] == "assistant" and start["content"] == [] and start["usage"]["input_tokens"] == 9 + 3
    assert parsed[1]["content_block"] == {"type": "text", "text": ""}
    deltas = [d["delta"] for d in parsed[3:-3]]
    assert all(d["type"] == "text_delta" for d in deltas)
    assert "".join(d["text"] for d in deltas) == BOOK.answer(prompt).text
    assert parsed[-2]["delta"]["stop_reason"] == "end_turn" and parsed[-2]["usage"]["output_tokens"] == n


@pytest.fixture(scope="module")
def thinking() -> Iterator[SimProcess]:
    """Every answer reasons first, 6 tokens (``reasoning_field`` the newer vLLM spelling)."""
    with start_simulator("thinking", seed=1, extra_args=[
            "--ttft-ms", "5", "--itl-ms", "1", "--set", "reasoning_share=1", "--set", "reasoning_tokens=6",
            "--set", "reasoning_tokens_jitter=0", "--set", "reasoning_field=reasoning"]) as sim:
        yield sim


def test_a_reasoning_answer_streams_its_reasoning_first_and_counts_it(thinking: SimProcess) -> None:
    body = chat(SKY, stream=True, stream_options={"include_usage": True})
    response = call(thinking, "POST", "/v1/chat/completions", body)
    chunks = [json.loads(e[6:]) for e in response.events()[:-1]]
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    kinds = ["reasoning" if "reasoning" in d else "content" for d in deltas[1:-1]]
    assert kinds == ["reasoning"] * 6 + ["content"] * (len(kinds) - 6)
    assert "".join(d.get("content") or "" for d in deltas) == BOOK.answer(SKY).text     # the answer alone
    usage = chunks[-1]["usage"]
    assert usage["completion_tokens"] == len(kinds)
    assert usage["completion_tokens_details"] == {"reasoning_tokens": 6}
    plan = response.plan
    assert plan["reasoning_tokens"] == 6 and plan["answer_ms"] == pytest.approx(5 + 6 * 1, abs=0.01)
    data = call(thinking, "POST", "/v1/chat/completions", chat(SKY)).json()
    message = data["choices"][0]["message"]
    assert message["content"] == BOOK.answer(SKY).text and message["reasoning"].startswith("Let me think")


def test_a_reasoning_answer_in_the_messages_api_is_a_thinking_block_then_a_text_block(thinking) -> None:
    body = {"model": "claude", "max_tokens": 1024, "stream": True,
            "messages": [{"role": "user", "content": SKY}]}
    parsed = [json.loads(e.split("\n")[1][6:]) for e in call(thinking, "POST", "/v1/messages", body).events()]
    blocks = [(d["index"], d["content_block"]["type"]) for d in parsed if d["type"] == "content_block_start"]
    assert blocks == [(0, "thinking"), (1, "text")]
    deltas = [(d["index"], d["delta"]["type"]) for d in parsed if d["type"] == "content_block_delta"]
    assert deltas[:7] == [(0, "thinking_delta")] * 6 + [(0, "signature_delta")]
    assert {d for d in deltas[7:]} == {(1, "text_delta")}
    stops = [d["index"] for d in parsed if d["type"] == "content_block_stop"]
    assert stops == [0, 1] and parsed[-1]["type"] == "message_stop"


def test_anthropic_non_stream_and_errors(fast_flat: SimProcess) -> None:
    body = {"model": "claude", "max_tokens": 3, "messages": [{"role": "user", "content": SKY}]}
    data = call(fast_flat, "POST", "/v1/messages", body).json()
    assert data["type"] == "message" and data["stop_reason"] == "max_tokens"
    assert data["content"] == [{"type": "text", "text": "The sky looks "}]
    assert data["usage"] == {"input_tokens": 6, "output_tokens": 3}
    missing = call(fast_flat, "POST", "/v1/messages", {"messages": body["messages"]})
    assert missing.status == 400
    assert missing.json() == {"type": "error", "error": {"type": "invalid_request_error",
                                                         "message": "max_tokens: Field required"}}


def test_triton_generate_and_infer(fast_flat: SimProcess) -> None:
    stream = call(fast_flat, "POST", "/v2/models/ensemble/generate_stream",
                  {"text_input": SKY, "max_tokens": 4})
    events = [json.loads(e[6:]) for e in stream.events()]
    assert events[0] == {"model_name": "ensemble", "model_version": "1", "text_output": "The "}
    assert "".join(e["text_output"] for e in events) == "The sky looks blue "
    whole = call(fast_flat, "POST", "/v2/models/ensemble/generate",
                 {"text_input": SKY, "parameters": {"max_tokens": 2}})
    assert whole.json() == {"model_name": "ensemble", "model_version": "1", "text_output": "The sky "}
    infer = call(fast_flat, "POST", "/v2/models/ensemble/infer", {"id": "r1", "inputs": [
        {"name": "text_input", "shape": [1], "datatype": "BYTES", "data": [SKY]},
        {"name": "max_tokens", "shape": [1], "datatype": "INT32", "data": [3]}]})
    data = infer.json()
    assert data["outputs"] == [{"name": "text_output", "datatype": "BYTES", "shape": [1],
                                "data": ["The sky looks "]}]
    assert data["id"] == "r1" and data["inference_time_ms"] == pytest.approx(5 + 2 * 1, abs=0.5)


def test_routes_and_http_errors(fast_flat: SimProcess) -> None:
    models = call(fast_flat, "GET", "/v1/models").json()
    assert models["data"][0]["id"] == "fourfold-sim"
    assert call(fast_flat, "GET", "/health").status == 200
    assert call(fast_flat, "GET", "/v2/health/ready").status == 200
    missing = call(fast_flat, "GET", "/nope")
    assert missing.status == 404 and "error" in missing.json() and "x-fourfold-plan" in missing.headers
    wrong_method = call(fast_flat, "GET", "/v1/chat/completions")
    assert wrong_method.status == 405 and wrong_method.headers["allow"] == "POST"
    assert call(fast_flat, "POST", "/v1/chat/completions", b"{not json").status == 400
    assert call(fast_flat, "POST", "/v1/chat/completions", {"messages": []}).status == 400
    conn = Conn(fast_flat)
    no_length = conn.exchange(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n\r\n")
    assert no_length.status == 411 and no_length.headers["connection"] == "close"
    conn.close()


# --- timing ------------------------------------------------------------------------------
@pytest.mark.timing
def test_plan_header_matches_observed_timing(flat: SimProcess) -> None:
    body = chat("List three advantages of HTTP/3.", stream=True, max_tokens=30)
    with core_wait() as wait:
        response = call(flat, "POST", "/v1/chat/completions", body, {"x-fourfold-plan-detail": "1"})
    plan = response.plan
    assert response.t_head_s < 0.02                       # headers at once (TTFB ~ 0)
    offsets = plan["offsets_ms"]
    assert len(offsets) == plan["output_tokens"] == 30 and offsets[0] == plan["ttft_ms"] == 50.0
    # a token is due at its offset; a simulator woken late (beside busy loops) writes every token
    # then due in one chunk, so each token's arrival is the read of the chunk that carried it
    per_chunk = [(t * 1000, payload.count(b'{"content":')) for t, payload in response.chunks]
    arrivals_ms = [t_ms for t_ms, n in per_chunk for _ in range(n)]
    assert len(arrivals_ms) == 30
    # each token read at its offset from the simulator's admission of the request (its clock is
    # this one): never before, and late by what the simulator's and this process's waits for a
    # core add, up to a scheduler slice (~3-6 ms) beside two busy loops. Each offset counts from
    # the admission, so a drift would add up (0.5 ms a token puts the median 7 ms off)
    admitted_ms = (plan["t0_monotonic_s"] - response.t_send_s) * 1000
    late_ms = [a - (admitted_ms + o) for a, o in zip(arrivals_ms, offsets)]
    print(f"\nadmitted after {admitted_ms:.2f} ms; tokens late {[round(x, 1) for x in late_ms]} ms; "
          f"wake-ups late p50 {wait.quantile_ms(0.5):.2f}, max {wait.max_ms:.2f} ms")
    assert min(late_ms) > -0.5
    assert late_ms[0] < 8 + wait.max_ms                  # one sample: what the machine added at most
    assert sorted(late_ms)[len(late_ms) // 2] < 7 + wait.quantile_ms(0.5)
    gaps = [b - a for a, b in zip(arrivals_ms, arrivals_ms[1:])]
    assert abs(sum(gaps) / len(gaps) - 10.0) < 1.0


def test_large_detail_plan_is_served_by_url(fast_flat: SimProcess) -> None:
    body = chat(SKY, max_tokens=3000, ignore_eos=True)
    response = call(fast_flat, "POST", "/v1/chat/completions", body, {"x-fourfold-plan-detail": "1"})
    assert len(response.headers["x-fourfold-plan"]) < 12_000 and "offsets_ms" not in response.plan
    full = call(fast_flat, "GET", response.plan["offsets_url"]).json()
    assert (len(full["offsets_ms"]) == 3000
            and full["offsets_ms"][1] - full["offsets_ms"][0] == pytest.approx(1.0))


def test_half_closed_client_still_gets_its_stream(fast_flat: SimProcess) -> None:
    conn = Conn(fast_flat)
    conn.sock.sendall(request_bytes("POST", "/v1/chat/completions", chat(SKY, stream=True, max_tokens=5)))
    conn.sock.shutdown(socket.SHUT_WR)
    response = conn.exchange(b"")
    assert response.events()[-1] == "data: [DONE]" and response.headers["connection"] == "keep-alive"
    assert conn.sock.recv(10) == b""
    conn.close()


def _ttfts(sim: SimProcess, prompts: list[str]) -> list[float]:
    """Send every prompt at once on its own fresh connection; first-content-chunk time of each (ms),
    in order."""
    selector = selectors.DefaultSelector()
    pending = {}
    ttfts = [0.0] * len(prompts)
    for index, prompt in enumerate(prompts):
        sock = socket.create_connection(("127.0.0.1", sim.port))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.sendall(request_bytes("POST", "/v1/chat/completions", chat(prompt, stream=True, max_tokens=1),
                                   {"Connection": "close"}))
        pending[sock] = [time.perf_counter(), b"", index]
        selector.register(sock, selectors.EVENT_READ)
    while pending:
        for key, _ in selector.select(5):
            sock = key.fileobj
            data = sock.recv(65536)
            state = pending[sock]
            state[1] += data
            if b'{"content":"' in state[1] or not data:
                ttfts[state[2]] = (time.perf_counter() - state[0]) * 1000
                selector.unregister(sock)
                sock.close()
                del pending[sock]
    return ttfts


@pytest.mark.timing
@pytest.mark.parametrize(("profile", "low_ms", "high_ms"),
                         [("baseline", 45.0, 72.0), ("candidate", -8.0, 8.0)])
def test_orchestrator_delay_on_structured_prompts(profile: str, low_ms: float, high_ms: float) -> None:
    a, b = "Briefly explain quantum annealing.", "Explain quantum annealing in three points."
    with start_simulator(profile, seed=5, extra_args=["--set", "cold_requests=0"]) as sim:
        ttfts = _ttfts(sim, [a, b] * 20)       # interleaved, so both prompts see the same load
    mean_a, mean_b = sum(ttfts[0::2]) / 20, sum(ttfts[1::2]) / 20
    assert low_ms < mean_b - mean_a < high_ms


def test_candidate_sees_fewer_input_tokens(fast_flat: SimProcess) -> None:
    prompt = "Compare CNN and RNN in a table."
    with start_simulator("baseline", extra_args=["--ttft-ms", "1", "--itl-ms", "0.2",
                                                 "--set", "orchestrator_ms=1"]) as old, \
         start_simulator("candidate", extra_args=["--ttft-ms", "1", "--itl-ms", "0.2"]) as new:
        before = call(old, "POST", "/v1/chat/completions",
                      chat(prompt, max_tokens=1)).json()["usage"]["prompt_tokens"]
        after = call(new, "POST", "/v1/chat/completions",
                     chat(prompt, max_tokens=1)).json()["usage"]["prompt_tokens"]
    assert 12 <= before - after <= 18


# --- determinism, metrics, connections -------------------------------------------------
SEQUENCE = ["Give five tips for better sleep.", SKY, "Give five tips for better sleep.",
            "请分三点说明HTTP/3的优势。", "Unknown?"]


def _run_sequence(seed: int) -> list[tuple[dict, str]]:
    args = ["--ttft-ms", "2", "--itl-ms", "0.2", "--set", "itl_jitter_ms=0.2", "--set", "cold_requests=0",
            "--set", "pulse.pause_ms=3", "--set", "pulse.burst_itl_ms=0.1", "--set", "pulse.probability=1"]
    out = []
    with start_simulator("candidate", seed=seed, extra_args=args) as sim:
        for prompt in SEQUENCE:
            response = call(sim, "POST", "/v1/chat/completions", chat(prompt),
                            {"x-fourfold-plan-detail": "1"})
            plan = {k: v for k, v in response.plan.items() if k not in ("t0_monotonic_s", "queued_ms")}
            out.append((plan, response.json()["choices"][0]["message"]["content"]))
    return out


def test_same_seed_same_plans_and_answers() -> None:
    first, second, other = _run_sequence(11), _run_sequence(11), _run_sequence(12)
    assert first == second
    assert [p for p, _ in first] != [p for p, _ in other]
    assert first[0][0]["offsets_ms"] != first[2][0]["offsets_ms"]    # n-th occurrence seeds differently


def _metrics(sim: SimProcess) -> dict[str, float]:
    text = call(sim, "GET", "/metrics").body.decode()
    samples = {}
    helped = {line.split()[2] for line in text.splitlines() if line.startswith("# HELP")}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            assert name.split("{")[0].removesuffix("_bucket").removesuffix("_sum").removesuffix("_count") \
                in helped
            samples[name] = float(value)
    return samples


def test_metrics_reflect_open_streams(flat: SimProcess) -> None:
    conns = [Conn(flat) for _ in range(3)]
    body = request_bytes("POST", "/v1/chat/completions",
                         chat(SKY, stream=True, max_tokens=1000, ignore_eos=True))
    for conn in conns:
        conn.sock.sendall(body)
        conn.sock.recv(4096)                               # the response head has arrived
    during = _metrics(flat)
    assert during['vllm:num_requests_running{model_name="fourfold-sim"}'] == 3
    assert during['vllm:kv_cache_usage_perc{model_name="fourfold-sim"}'] > 0
    assert 0 < during['DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-fourfold-sim-0",device="nvidia0",'
                      'modelName="fourfold simulated GPU",Hostname="fourfold-sim"}'] <= 100
    for conn in conns:
        conn.close()
    deadline = time.time() + 5
    while (_metrics(flat)['vllm:num_requests_running{model_name="fourfold-sim"}'] != 0
           and time.time() < deadline):
        time.sleep(0.02)
    after = _metrics(flat)
    assert after['vllm:num_requests_running{model_name="fourfold-sim"}'] == 0
    assert after['fourfold_sim_aborted_total{model_name="fourfold-sim"}'] >= 3
    assert after['vllm:generation_tokens_total{model_name="fourfold-sim"}'] > 0


def test_keep_alive_pipelining_and_close(fast_flat: SimProcess) -> None:
    conn = Conn(fast_flat)
    first = conn.exchange(request_bytes("POST", "/v1/chat/completions", chat(SKY, max_tokens=2)))
    second = conn.exchange(request_bytes("POST", "/v1/chat/completions",
                                         chat(SKY, max_tokens=2, stream=True)))
    assert first.status == second.status == 200 and first.headers["connection"] == "keep-alive"
    conn.sock.sendall(request_bytes("GET", "/health")
                      + request_bytes("GET", "/v1/models", headers={"Connection": "close"}))
    assert conn.exchange(b"").status == 200
    last = conn.exchange(b"")
    assert last.json()["object"] == "list" and last.headers["connection"] == "close"
    assert conn.sock.recv(10) == b""                      # the server closed after "Connection: close"
    conn.close()


@pytest.mark.timing
def test_gateway_limit_429_queue_and_idle_timeout() -> None:
    long = request_bytes("POST", "/v1/chat/completions",
                         chat(SKY, stream=True, max_tokens=200, ignore_eos=True))
    with start_simulator("flat", extra_args=["--max-concurrency", "1", "--over-limit", "429"]) as sim:
        holder = Conn(sim)
        holder.sock.sendall(long)
        holder.sock.recv(4096)
        rejected = call(sim, "POST", "/v1/chat/completions", chat(SKY, max_tokens=1))
        assert rejected.status == 429 and rejected.headers["retry-after"] == "1"
        holder.close()
    with start_simulator("flat",
                         extra_args=["--max-concurrency", "1", "--keepalive-timeout-s", "0.3"]) as sim:
        holder = Conn(sim)                                 # admitted (its head read): 50 + 39 x 10 ms
        holder.sock.sendall(request_bytes("POST", "/v1/chat/completions",
                                          chat(SKY, stream=True, max_tokens=40, ignore_eos=True)))
        holder.sock.recv(4096)
        queued = call(sim, "POST", "/v1/chat/completions", chat(SKY, max_tokens=1))
        assert queued.status == 200 and queued.plan["queued_ms"] > 200   # 440 less any stall of ours
        idle = Conn(sim)
        assert idle.exchange(request_bytes("GET", "/health")).status == 200
        time.sleep(0.6)
        assert idle.sock.recv(10) == b""                  # closed by the idle keep-alive timeout
        idle.close()
        holder.close()


def test_anthropic_beta_probe() -> None:
    body = {"model": "claude", "max_tokens": 1, "messages": [{"role": "user", "content": SKY}]}
    beta = {"anthropic-beta": "max-tokens-3-5-sonnet-2024-07-15"}
    fast = ["--ttft-ms", "1", "--itl-ms", "1"]
    with start_simulator("baseline", extra_args=fast) as old, \
         start_simulator("candidate", extra_args=fast) as new:
        refused = call(old, "POST", "/v1/messages", body, beta)
        assert refused.status == 400 and "Unknown beta feature" in refused.json()["error"]["message"]
        assert call(new, "POST", "/v1/messages", body, beta).status == 200


def test_launcher_reports_start_failures_and_stops_cleanly(fast_flat: SimProcess) -> None:
    with pytest.raises(SimulatorStartError, match="valid profiles: baseline"):
        start_simulator("no-such-profile")
    sim = start_simulator("flat")
    assert sim.url.startswith("http://127.0.0.1:") and sim.alive()
    assert sim.stop() == 0

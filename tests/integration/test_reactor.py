"""fourfold.client.reactor on real loopback sockets: kernel receive stamps, lazy wake-ups, no lost bytes.

The "server" side is a plain socket driven by the test (or a greenlet), so every send time is
known exactly; the client side is read through the process's reactor as the transport does.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import gevent
import pytest

from fourfold.client import reactor as reactor_mod
from fourfold.client.dialects import RequestOptions, get_dialect
from fourfold.client.factory import make_http_client
from fourfold.client.stream import send
from fourfold.measure.metrics import PHASES
from fourfold.measure.record import STAMPS_BEFORE_SEND, RequestRecord
from fourfold.workloads.items import Item

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(not sys.platform.startswith("linux"),
                                 reason="epoll and SO_TIMESTAMPNS are Linux")]


@pytest.fixture(autouse=True, params=["c", "python"])
def reads(request, monkeypatch):
    """Every test here runs with the reactor's reads and whole chunks in C (``fourfold.client._hotpath``:
    drain, take_chunks) and in Python (the fallback where no compiler built it)."""
    if request.param == "python":
        from fourfold.client import h1body

        monkeypatch.setattr(reactor_mod, "drain_native", None)
        monkeypatch.setattr(h1body, "take_chunks", None)
    elif reactor_mod.drain_native is None:
        pytest.skip("fourfold.client._hotpath was not built")
    return request.param


@pytest.fixture
def pair():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    client = socket.create_connection(listener.getsockname())
    server, _ = listener.accept()
    listener.close()
    server.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    assert reactor_mod.enable_timestamps(client)
    _until_stamped(client, server)
    yield client, server
    client.close()
    server.close()


def _until_stamped(client: socket.socket, server: socket.socket) -> None:
    """Wait until the kernel stamps this connection's packets: when no socket on the host wanted
    stamps, Linux turns them on from a deferred work item (see ``enable_timestamps``)."""
    raw = client._sock if hasattr(client, "_sock") else client
    for _ in range(100):
        server.sendall(b"?")
        gevent.sleep(0.01)
        try:
            _, ancdata, _, _ = raw.recvmsg(16, socket.CMSG_SPACE(16))
        except BlockingIOError:
            continue
        if ancdata:
            return
    pytest.fail("the kernel never stamped a packet of this connection")


def _busy(ms: float) -> None:
    """Hold the CPU (and so the gevent hub) without yielding."""
    end = time.perf_counter_ns() + int(ms * 1e6)
    while time.perf_counter_ns() < end:
        pass


@pytest.mark.timing
def test_bytes_get_their_arrival_time_not_the_time_they_were_read(pair):
    client, server = pair
    reader = reactor_mod.reader_for(client)
    assert reader is not None
    try:
        sent_ns = time.perf_counter_ns()
        server.sendall(b"first token")
        _busy(30)                      # the process is busy: nobody reads for 30 ms
        t, data = reader.read()
        read_ns = time.perf_counter_ns()
    finally:
        reader.close()
    assert data == b"first token"
    assert read_ns - sent_ns >= 30e6
    # the kernel's stamp: when the bytes arrived (within a few ms of the send even on a busy
    # machine), not when they were read 30 ms later. The stamp is the kernel's CLOCK_REALTIME turned
    # into perf_counter time: beside two CPU hogs it read 36 us, then twice ~450 us, before the send
    # (the clock offset read at its tightest: reactor.realtime_offset_ns), so 2 ms are allowed
    assert -2e6 <= t - sent_ns < 10e6 and read_ns - t >= 20e6


def test_a_read_is_never_stamped_before_the_connection_s_previous_read(pair):
    """Where the kernel's clock and perf_counter disagree, a read's stamp can come out before the
    previous read's (or its request's send): the reader keeps its times in order, so no gap between
    two reads of a stream is negative. Here the previous read is made to lie 5 s ahead."""
    client, server = pair
    reader = reactor_mod.reader_for(client)
    assert reader is not None
    try:
        ahead = reader.last_ns = time.perf_counter_ns() + 5_000_000_000
        server.sendall(b"next token")
        t, data = reader.read()
    finally:
        reader.close()
    assert data == b"next token" and t == ahead == reader.last_ns


def test_a_stamp_that_reads_before_the_send_gives_no_negative_latency(pair, monkeypatch):
    """The kernel's clock made to read 1 s behind perf_counter (what a disagreement of the two clocks
    does, magnified): every stamped read of the answer comes out before its request was sent. The
    record keeps its latencies at 0 or more and says how many receive times were raised."""
    true_offset = reactor_mod.realtime_offset_ns
    monkeypatch.setattr(reactor_mod, "realtime_offset_ns", lambda: true_offset() - 1_000_000_000)
    listener = _one_shot_server(_HEAD + _chunks(3) + _END)
    try:
        record = _ask(listener, read_timeout_s=5)
    finally:
        listener.close()
    assert record.error_class == "ok" and record.content_chunks == 3
    assert record.extra[STAMPS_BEFORE_SEND] >= 1           # (the pair fixture made the host stamp)
    offsets = record.chunk_offsets_ms
    assert record.ttft_ms == offsets[0] >= 0 and record.ttfb_ms >= 0 and record.e2e_ms >= offsets[-1]
    assert offsets == sorted(offsets)


def _paced_body(client: socket.socket, server: socket.socket) -> tuple[int, list, list[int]]:
    """Send a chunked body of 20 tokens 4 ms apart and read it through the reactor: the reader's
    wake-ups, its reads (stamp, bytes) and the send times."""
    reader = reactor_mod.reader_for(client)
    assert reader is not None
    reader.body("chunked")
    sent: list[int] = []

    def talk() -> None:
        for i in range(20):
            sent.append(time.perf_counter_ns())
            payload = b"data: token %d\n\n" % i
            server.sendall(b"%x\r\n%s\r\n" % (len(payload), payload))
            gevent.sleep(0.004)
        server.sendall(b"0\r\n\r\n")

    talker = gevent.spawn(talk)
    blocked, items = 0, []
    try:
        while True:
            blocked += not reader.queue    # each empty queue means one wait and one wake-up
            t, data = reader.read()
            items.append((t, data))
            if data.endswith(b"0\r\n\r\n"):
                break
    finally:
        reader.close()
        talker.join()
    return blocked, items, sent


@pytest.mark.timing
def test_a_body_wakes_its_reader_once_and_keeps_every_read_apart(pair):
    client, server = pair
    # The talker and the reader share this process: when it waits for a core longer than a
    # token's 4 ms, the talker's timer and the read fire in one loop turn and two tokens arrive
    # as one read (one stamp, by design). Such a body is sent again; a reactor that joins reads
    # or loses bytes misses on every try.
    for _ in range(3):
        blocked, items, sent = _paced_body(client, server)
        assert b"".join(data for _, data in items).count(b"data: token") == 20   # no byte lost
        if len(items) == 21:
            break
    assert blocked <= 2                # woken at the end of the body, not per token
    assert len(items) == 21            # ... and still one read, one stamp, per token
    for (t, _), t_sent in zip(items, sent):
        assert 0 <= t - t_sent < 10e6


def _ask(listener: socket.socket, read_timeout_s: float) -> RequestRecord:
    """One streamed chat request (openai dialect, 5 tokens at most) to the server on ``listener``."""
    host, port = listener.getsockname()
    dialect = get_dialect("openai")
    item = Item(id="q", messages=({"role": "user", "content": "hi"},))
    with make_http_client(f"http://{host}:{port}", read_timeout_s=read_timeout_s) as client:
        return send(client, dialect, dialect.build(item, RequestOptions(max_tokens=5)), RequestRecord())


def _stalling_server(tokens: int,
                     sent_ms: list[tuple[float, float]]) -> tuple[socket.socket, gevent.Greenlet]:
    """Serve one streamed answer: ``tokens`` tokens 10 ms apart (the clock before and after each
    send appended to ``sent_ms``), then 5 s of silence on the open connection."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)

    def serve() -> None:
        conn, _ = listener.accept()
        buf = b""
        while b"\r\n\r\n" not in buf:
            buf += conn.recv(65536)
        conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                     b"transfer-encoding: chunked\r\n\r\n")
        for i in range(tokens):
            payload = b'data: {"choices":[{"index":0,"delta":{"content":"t%d"}}]}\n\n' % i
            before = time.perf_counter() * 1000
            conn.sendall(b"%x\r\n%s\r\n" % (len(payload), payload))
            sent_ms.append((before, time.perf_counter() * 1000))
            gevent.sleep(0.01)
        gevent.sleep(5)               # then silence, connection open
        conn.close()

    return listener, gevent.spawn(serve)


@pytest.mark.timing
def test_a_read_timeout_keeps_the_tokens_that_came_before_it():
    # The server shares this process: when it waits for a core longer than the 10 ms between
    # tokens, the server's next send and the read come in one loop turn and two tokens are read
    # as one (one stamp, by design). Such an answer is asked for again; a reader that joins reads
    # misses on every try.
    for _ in range(3):
        sent_ms: list[tuple[float, float]] = []
        listener, server = _stalling_server(tokens=3, sent_ms=sent_ms)
        try:
            record = _ask(listener, read_timeout_s=0.3)
        finally:
            server.kill()
            listener.close()
        assert record.error_class == "read_timeout"   # not ttft_timeout: the first token was seen
        assert record.text == "t0t1t2"
        if record.content_chunks == 3:
            break
    assert record.content_chunks == 3, record.chunk_offsets_ms
    # each token is stamped when it arrived, i.e. when the server sent it (a late read moves nothing)
    # (each gap within the two sends' own spans, give or take the 2 ms the kernel's stamp may read off)
    gaps = [b - a for a, b in zip(record.chunk_offsets_ms, record.chunk_offsets_ms[1:])]
    spans = [(b[0] - a[1], b[1] - a[0]) for a, b in zip(sent_ms, sent_ms[1:])]
    assert all(low - 2 <= g <= high + 2 for g, (low, high) in zip(gaps, spans)), (gaps, spans)


_TALKER = r"""
import socket, sys, time
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(8)
print(listener.getsockname()[1], flush=True)
conns = [listener.accept()[0] for _ in range(8)]
for c in conns:
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
rounds = int(sys.argv[1])
for i in range(rounds * 8):   # a token every 0.5 ms, the streams' turns staggered (4 ms per token each)
    payload = b"data: token %d\n\n" % (i // 8)
    conns[i % 8].sendall(b"%x\r\n%s\r\n" % (len(payload), payload))
    time.sleep(0.0005)
for c in conns:
    c.sendall(b"0\r\n\r\n")
time.sleep(1)
"""


@pytest.mark.timing
def test_busy_streams_are_drained_from_a_timer_without_restarting_the_io_watcher():
    """While reads keep coming the reactor drains once per timer tick and leaves its epoll
    unwatched: restarting the io watcher every tick made libev re-add the reactor's epoll to its
    own each time (a nested-epoll check in the kernel per tick). The "server" is another process,
    so its sends do not keep step with the reactor's timer."""
    rounds = 60
    talker = subprocess.Popen([sys.executable, "-c", _TALKER, str(rounds)], stdout=subprocess.PIPE)
    try:
        port = int(talker.stdout.readline())
        clients = [socket.create_connection(("127.0.0.1", port)) for _ in range(8)]
        readers = [reactor_mod.reader_for(client) for client in clients]
        assert all(r is not None for r in readers)
        for reader in readers:
            reader.body("chunked")
        reactor = readers[0]._reactor
        starts_before = reactor.watcher_starts
        drains: list[tuple[int, bool, int]] = []     # (when, from the timer, sockets read)
        drain = reactor.drain

        def counted_drain():
            found = drain()
            drains.append((time.perf_counter_ns(), not reactor._watcher.active, found))
            return found

        reactor.drain = counted_drain

        def consume(reader) -> int:
            received = b""
            while not received.endswith(b"0\r\n\r\n"):
                received += reader.read()[1]
            return received.count(b"data: token")

        try:
            counts = [c.get(timeout=10) for c in [gevent.spawn(consume, r) for r in readers]]
        finally:
            del reactor.drain
            for reader in readers:
                reader.close()
            for client in clients:
                client.close()
    finally:
        talker.kill()
        talker.wait()
    assert counts == [rounds] * 8                       # nothing lost
    # a timer-driven drain comes one libev tick (~1 ms) after a drain that found bytes, not at once
    # (a spent libev timer started again fires immediately: the reactor makes a new one per tick)
    ticks = [b[0] - a[0] for a, b in zip(drains, drains[1:]) if a[2] and b[1]]
    assert len(ticks) > 20 and sorted(ticks)[len(ticks) // 2] >= 0.8e6
    # ~250 busy ticks; the watcher restarted only when a tick found nothing (the old code: every
    # tick). How many ticks are quiet is the talker's luck with a core: 0 on a quiet machine, 25 of
    # 276 beside five hogs, each one restart (and the one at the end)
    timer_drains = [found for _, from_timer, found in drains if from_timer]
    quiet = timer_drains.count(0)
    restarts = reactor.watcher_starts - starts_before
    assert len(timer_drains) - quiet > 20 and restarts <= quiet + 2, (len(timer_drains), quiet, restarts)


def _one_shot_server(response: bytes, pause_after: int = 0,
                     pieces: list[bytes] | None = None) -> socket.socket:
    """Answers one request on each connection with ``response`` (in 64-byte pieces, 1 ms apart
    after the first ``pause_after`` bytes; or ``pieces`` 2 ms apart after it), then closes it."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:         # the test closed the listener: no traceback on stderr
                return
            try:
                buf = b""
                while b"\r\n\r\n" not in buf:
                    buf += conn.recv(65536)
                conn.sendall(response[:pause_after])
                for i in range(pause_after, len(response), 64):
                    conn.sendall(response[i:i + 64])
                    gevent.sleep(0.001)
                for piece in pieces or ():
                    conn.sendall(piece)
                    gevent.sleep(0.002)
                gevent.sleep(0.05)
            except OSError:         # the client dropped a bad body: serve the next connection
                pass
            conn.close()

    gevent.spawn(serve)
    return listener


def _steady_pair(record_of, first: str, second, chunks: int, attempts: int = 3):
    """The two records of one body, each read by another loop. The server paces its pieces, but a
    process that waits for a core reads two pieces in one read (one content chunk, one stamp), and
    the two runs then differ by timing, not by code: such a pair is read again (a loop that really
    miscounts misses ``chunks`` every time)."""
    tries = 0
    while True:
        ours, theirs = record_of(first), record_of(second)
        tries += 1
        if ours.content_chunks == theirs.content_chunks == chunks or tries == attempts:
            return ours, theirs, tries


_HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"


def _chunks(n: int) -> bytes:
    events = [b'data: {"choices":[{"index":0,"delta":{"content":"t%d "}}]}\n\n' % i for i in range(n)]
    return b"".join(b"%x\r\n%s\r\n" % (len(e), e) for e in events)


_FINISH = b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
_END = b"".join(b"%x\r\n%s\r\n" % (len(e), e) for e in (_FINISH, b"data: [DONE]\n\n")) + b"0\r\n\r\n"


@pytest.mark.parametrize("body, limit, error_class, chunks", [
    (_chunks(30) + _END, 1 << 20, "ok", 30),                                     # a whole body
    (_chunks(30) + _END + b"HTTP/1.1 200 OK\r\n\r\n", 1 << 20, "malformed_stream", 30),   # unsolicited bytes
    (_chunks(30)[:-7], 1 << 20, "interrupted", 29),                              # torn inside a chunk
    (_chunks(30) + _END, 900, "too_large", 15),                                  # over the size limit
    (b"zz\r\n" + _chunks(3), 1 << 20, "malformed_stream", 0),                    # a bad chunk size
])
def test_the_chunked_body_loop_reads_as_the_generator_pipeline_does(body, limit, error_class, chunks,
                                                                    monkeypatch):
    """RawStream.read_into's one loop over the reactor's queue (the common case) gives the record
    the generator pipeline (``RawStream.__iter__`` + ``read_pieces``) gives."""
    from fourfold.client import h1body
    from fourfold.client.stream import StreamLimits

    listener = _one_shot_server(_HEAD + body, pause_after=len(_HEAD) + 40)
    host, port = listener.getsockname()
    dialect = get_dialect("openai")
    item = Item(id="q", messages=({"role": "user", "content": "hi"},))
    fused = []
    original = h1body.RawStream._read_chunked

    def counted(self, *args):
        fused.append(1)
        return original(self, *args)

    def record_of(loop: str) -> RequestRecord:
        if loop == "generator":
            monkeypatch.setattr(h1body.RawStream, "_read_chunked",
                                lambda self, times, payloads, max_bytes, deadline:
                                h1body.read_pieces(self, times, payloads, max_bytes, deadline, self.recv_ns))
        else:
            monkeypatch.setattr(h1body.RawStream, "_read_chunked", counted)
        with make_http_client(f"http://{host}:{port}", read_timeout_s=5) as client:
            return send(client, dialect, dialect.build(item, RequestOptions(max_tokens=5)), RequestRecord(),
                        StreamLimits(max_response_bytes=limit))

    try:
        ours, theirs, tries = _steady_pair(record_of, "fused", "generator", chunks)
    finally:
        listener.close()
    assert len(fused) == tries                     # one fused loop per body it read
    assert _facts(ours) == _facts(theirs)
    assert len(ours.chunk_offsets_ms) == len(theirs.chunk_offsets_ms)
    assert ours.error_class == error_class
    assert ours.content_chunks == chunks


def _chunk(event: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(event), event)


_CONTENT = [_chunk(b'data: {"choices":[{"index":0,"delta":{"content":"t%d "}}]}\n\n' % i) for i in range(30)]


@pytest.mark.parametrize("pieces, limit, error_class, chunks", [
    (_CONTENT + [_END], 1 << 20, "ok", 30),
    (_CONTENT[:10] + [_chunk(b": ping\n\n"), _chunk(b'data: {"type":"ping"}\n\n')] + _CONTENT[10:20] + [_END],
     1 << 20, "ok", 20),                                           # idle pieces: the watchdog's note decides
    (_CONTENT + [_END], 900, "too_large", 16),
    ([b"".join(_CONTENT[i:i + 3]) for i in range(0, 30, 3)] + [_END], 1 << 20, "ok", 10),   # 3 chunks a read
    ([_CONTENT[0] + _CONTENT[1] + _CONTENT[2][:20], _CONTENT[2][20:]] + _CONTENT[3:] + [_END],
     1 << 20, "ok", 29),
    # a size line Python's int() reads but plain hex is not: C leaves it to Python's decoder, which
    # refuses it (fourfold#32); the 5 events before it are kept
    (_CONTENT[:5] + [b"0x10\r\n" + b"d" * 16 + b"\r\n"] + _CONTENT[5:10] + [_END], 1 << 20,
     "malformed_stream", 5),
])
def test_whole_chunks_taken_in_c_give_the_python_loops_record(pieces, limit, error_class, chunks,
                                                              monkeypatch):
    """Reads that are each one whole chunk (a server that flushes one event per chunk) are taken
    by ``_hotpath.take_chunks``; the record is the one the Python loop gives."""
    from fourfold.client import h1body
    from fourfold.client.native import take_chunks
    from fourfold.client.stream import StreamLimits

    if take_chunks is None:
        pytest.skip("fourfold.client._hotpath was not built")
    listener = _one_shot_server(_HEAD, len(_HEAD), pieces=pieces)
    host, port = listener.getsockname()
    dialect = get_dialect("openai")
    item = Item(id="q", messages=({"role": "user", "content": "hi"},))
    taken = []
    native = take_chunks          # also under the Python reads: the C step is what is compared here

    def counted(queue, *args):
        before = len(queue)
        out = native(queue, *args)
        taken.append(before - len(queue))
        return out

    def record_of(step) -> RequestRecord:
        monkeypatch.setattr(h1body, "take_chunks", step)
        with make_http_client(f"http://{host}:{port}", read_timeout_s=5) as client:
            return send(client, dialect, dialect.build(item, RequestOptions(max_tokens=5)), RequestRecord(),
                        StreamLimits(max_response_bytes=limit))

    try:
        ours, theirs, _ = _steady_pair(record_of, counted, None, chunks)
    finally:
        listener.close()
    assert sum(taken) > 0                          # some reads were taken in C
    assert _facts(ours) == _facts(theirs)
    assert len(ours.chunk_offsets_ms) == len(theirs.chunk_offsets_ms)
    assert ours.error_class == error_class and ours.content_chunks == chunks


def _facts(record: RequestRecord) -> dict:
    """What two reads of one body must agree on: the request phases (record.extra's times) aside."""
    keys = ("error_class", "text", "content_chunks", "response_bytes", "terminal")
    return {**{k: getattr(record, k) for k in keys},
            "extra": {k: v for k, v in record.extra.items() if k not in PHASES}}

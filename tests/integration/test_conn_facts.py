"""Connection facts of fourfold's HTTP/1.1 transport against a real server, without Locust."""

from __future__ import annotations

import gc
import socket
import threading
import time

import gevent
import httpx
import pytest

from fourfold.client.dialects import RequestOptions, get_dialect
from fourfold.client.factory import make_http_client
from fourfold.client.stream import send
from fourfold.client.transport import RawH1Transport
from fourfold.measure.record import RequestRecord
from fourfold.targets.launch import start_simulator
from fourfold.workloads.items import Item

pytestmark = [pytest.mark.integration, pytest.mark.timing]
ITEM = Item(id="q", messages=({"role": "user", "content": "Briefly explain quantum annealing."},))


def test_reused_new_and_reconnected_after_the_server_closed_an_idle_connection():
    dialect = get_dialect("openai")
    request = dialect.build(ITEM, RequestOptions(max_tokens=3, ignore_eos=True))
    with start_simulator("flat", extra_args=["--keepalive-timeout-s", "0.3"]) as sim:
        client = make_http_client(sim.url)
        records = []
        for pause_s in (0.0, 0.0, 0.8):          # the third request finds its connection closed
            time.sleep(pause_s)
            records.append(send(client, dialect, request, RequestRecord()))
        client.close()
    assert [r.error_class for r in records] == ["ok", "ok", "ok"]
    assert [(r.conn_reused, r.conn_reconnected) for r in records] == \
        [(False, False), (True, False), (False, True)]
    assert (records[0].connect_ms is not None and records[1].connect_ms is None
            and records[2].connect_ms is not None)
    assert {r.http_version for r in records} == {"HTTP/1.1"}


def test_a_bad_content_length_leaves_no_watchdog_behind():
    """The read-timeout watchdog must stop with a request that fails in its head: a leaked one
    throws ReadTimeout into whatever the greenlet runs next."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)

    def answer() -> None:
        conn, _ = server.accept()
        with conn:
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n")

    threading.Thread(target=answer, daemon=True).start()
    client = httpx.Client(transport=RawH1Transport(read_timeout_s=0.2), timeout=0.2,
                          base_url=f"http://127.0.0.1:{server.getsockname()[1]}")
    with pytest.raises(httpx.RemoteProtocolError, match="bad Content-Length"):
        client.get("/")
    gevent.sleep(0.6)        # a leaked watchdog would throw httpx.ReadTimeout here
    client.close()
    server.close()


def test_the_body_is_read_by_the_transport_in_one_loop(monkeypatch):
    """send() must reach RawH1Transport's read_into through httpx's wrapper around the stream
    (BoundSyncStream); through iter_raw every token also went through httpx's generators."""
    from fourfold.client.h1body import RawStream

    calls = []
    original = RawStream.read_into

    def spy(self, *args):  # type: ignore[no-untyped-def]
        calls.append(self._reader is not None)
        return original(self, *args)

    monkeypatch.setattr(RawStream, "read_into", spy)
    dialect = get_dialect("openai")
    request = dialect.build(ITEM, RequestOptions(max_tokens=20, ignore_eos=True))
    with start_simulator("flat") as sim:
        client = make_http_client(sim.url)
        records = [send(client, dialect, request, RequestRecord()) for _ in range(2)]
        client.close()
    assert calls == [True, True]                 # the reactor's queue, read in one loop, twice
    assert [(r.error_class, r.output_tokens, r.terminal) for r in records] == [("ok", 20, True)] * 2
    # one offset per read that carried content: 20 tokens 10 ms apart are 20 reads on a quiet
    # machine, but tokens that arrive while this process or the simulator waits for a core are
    # written or read (and timed) as one (in CI beside two hogs the simulator once wrote 30 tokens in
    # 20 chunks); every token is still counted (output_tokens, from the usage). That each read is
    # kept apart is test_reactor's; here the body must come in more than one read
    assert all(1 < r.content_chunks == len(r.chunk_offsets_ms) <= 20 for r in records)
    assert records[1].conn_reused                # the body was read to its end: the connection went back


def test_nothing_between_a_requests_clock_start_and_its_send_yields_to_other_greenlets(monkeypatch):
    """TTFT counts from when the request is issued (as vLLM's bench and AIPerf do), so the send
    must follow at once: with other greenlets ready to run (busy streams finishing their bodies),
    a yield in between - gevent's select() yields even with a zero timeout, and the idle-connection
    check used it - held requests for milliseconds (256 streams: ~7 ms median, ~80 ms at worst),
    all counted as the target's time.

    Four greenlets that are always ready stamp every turn they get; a yield between the request's
    clock start (``sent_mono_s``) and the moment its bytes are in the kernel (``sendall``
    returned) gives one of them a turn in that interval. Both ends are this process's own clock
    and the turns are counted, not timed, so the check holds however long the machine makes this
    process or the simulator wait for a core (a bound on the simulator's admission time did not:
    387 ms with two CPU hogs running)."""
    from gevent._socket3 import socket as gevent_socket

    dialect = get_dialect("openai")
    request = dialect.build(ITEM, RequestOptions(max_tokens=2, ignore_eos=True))
    stop = False
    turns_ns: list[int] = []          # when each hog turn began
    written_ns: list[int] = []        # when each request's bytes were in the kernel
    sendall = gevent_socket.sendall

    def stamped_sendall(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        result = sendall(self, *args, **kwargs)
        written_ns.append(time.perf_counter_ns())
        return result

    def hog() -> None:                # a greenlet that is always ready and holds the hub 10 ms a turn
        while not stop:
            turns_ns.append(time.perf_counter_ns())
            end = time.perf_counter_ns() + 10_000_000
            while time.perf_counter_ns() < end:
                pass
            gevent.sleep(0)

    with start_simulator("flat") as sim:
        client = make_http_client(sim.url)
        send(client, dialect, request, RequestRecord())          # opens the connection
        monkeypatch.setattr(gevent_socket, "sendall", stamped_sendall)
        hogs = [gevent.spawn(hog) for _ in range(4)]
        gevent.sleep(0)
        try:
            records = [send(client, dialect, request, RequestRecord()) for _ in range(5)]
        finally:
            stop = True
            gevent.joinall(hogs)
            client.close()
    assert all(r.error_class == "ok" and r.conn_reused for r in records)
    assert len(written_ns) == len(records) and len(turns_ns) >= len(records)    # the hogs ran in between
    started_ns = [round(r.sent_mono_s * 1e9) for r in records]      # perf_counter_ns: the same clock
    between = [[t for t in turns_ns if start <= t <= written]
               for start, written in zip(started_ns, written_ns)]
    assert between == [[]] * len(records), [(round((w - s) / 1e6, 3), len(b))
                                            for s, w, b in zip(started_ns, written_ns, between)]


def test_a_streamed_request_leaves_nothing_for_the_cyclic_collector():
    """httpx's streamed Response and its stream point at each other; unbroken, every request left
    ~33 objects that only a full collection frees, and at 256 streams those collections held the
    hub 30-100 ms every few seconds (tokens then arrive unread and merge into one read)."""
    dialect = get_dialect("openai")
    request = dialect.build(ITEM, RequestOptions(max_tokens=3, ignore_eos=True))
    with start_simulator("flat") as sim:
        client = make_http_client(sim.url)
        send(client, dialect, request, RequestRecord())
        gc.collect()
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            records = [send(client, dialect, request, RequestRecord()) for _ in range(5)]
            gc.collect()
            garbage = [type(o).__name__ for o in gc.garbage]
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
            client.close()
    assert [r.error_class for r in records] == ["ok"] * 5
    assert garbage == []

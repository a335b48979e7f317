"""The C hot path's stamped read (``_hotpath.recv_stamped``) against the Python reader it mirrors
(``client.reactor.Reader._read``), on real loopback TCP connections: the kernel's receive stamp,
not the time of the read. The rest of the C steps, on recorded bytes, are in
tests/unit/test_hotpath.py."""

from __future__ import annotations

from typing import Any

import pytest

from fourfold.client import native

pytestmark = [pytest.mark.integration, pytest.mark.timing,
              pytest.mark.skipif(native._hotpath is None, reason="fourfold.client._hotpath was not built")]


def _pair(stamps: bool = True) -> tuple[Any, Any]:
    import socket

    server = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(server.getsockname())
    peer, _ = server.accept()
    server.close()
    if stamps:
        client.setsockopt(socket.SOL_SOCKET, 35, 1)     # SO_TIMESTAMPNS
    client.setblocking(False)
    return client, peer


@pytest.mark.skipif(not hasattr(native._hotpath, "recv_stamped"),
                    reason="no kernel-stamped read here (Linux only)")
def test_recv_stamped_reads_as_the_python_reader_does() -> None:
    import socket
    import struct
    import time

    from fourfold.client.reactor import Reader

    client, peer = _pair()
    reader = Reader.__new__(Reader)            # only _read's inputs: the socket's own recvmsg
    reader._recvmsg, reader._recv = client.recvmsg, client.recv
    offset = time.perf_counter_ns() - time.time_ns()
    try:
        for _ in range(100):    # Linux turns stamping on from a deferred work item: wait for a stamp
            peer.sendall(b"?")
            time.sleep(0.01)
            t, data, now = native._hotpath.recv_stamped(client.fileno(), offset)
            if now - t > 5e6:
                break
        else:
            pytest.fail("the kernel never stamped a packet of this connection")
        assert native._hotpath.recv_stamped(client.fileno(), offset) is None        # nothing there yet
        assert reader._read(offset)[1] is None
        for read in (lambda: native._hotpath.recv_stamped(client.fileno(), offset),
                     lambda: reader._read(offset)):
            peer.sendall(b"token")
            time.sleep(0.03)                   # the stamp is the arrival, 30 ms before the read
            t, data, now = read()
            assert data == b"token" and 25e6 < now - t < 1e9
        peer.sendall(b"x" * 100_000)
        time.sleep(0.05)
        t, data, now = native._hotpath.recv_stamped(client.fileno(), offset)
        assert len(data) == 65536 and t < now
        peer.close()
        time.sleep(0.02)
        rest = native._hotpath.recv_stamped(client.fileno(), offset)[1]
        assert len(rest) == 100_000 - 65536
        assert native._hotpath.recv_stamped(client.fileno(), offset)[1] == b""      # EOF
    finally:
        client.close()
    unstamped, peer = _pair(stamps=False)      # no stamp: the time of the read
    try:
        peer.sendall(b"a")
        time.sleep(0.03)
        t, data, now = native._hotpath.recv_stamped(unstamped.fileno(), offset)
        assert data == b"a" and t == now
        peer.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        peer.sendall(b"b")
        peer.close()                           # a reset after the data
        time.sleep(0.03)
        got = [native._hotpath.recv_stamped(unstamped.fileno(), offset)[1] for _ in range(2)]
        assert got[0] == b"b" or isinstance(got[0], ConnectionResetError)
        assert isinstance(got[-1], ConnectionResetError) or got[-1] == b""
    finally:
        unstamped.close()
    with pytest.raises(TypeError):
        native._hotpath.recv_stamped("3", 0)
    # a closed descriptor: EBADF as data
    assert isinstance(native._hotpath.recv_stamped(10**6, 0)[1], OSError)

import socket
import threading

import httpx
import pytest

from hermes_replay._runner.netblock import NetworkBlocked, block_network


@pytest.fixture
def loopback_server():
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    accepted: list[tuple[socket.socket, object]] = []
    t = threading.Thread(target=lambda: accepted.append(srv.accept()), daemon=True)
    t.start()
    yield srv.getsockname()
    # end the accept before closing: closing under a blocked accept() raised EBADF in the thread,
    # and its traceback, formatted while the main thread ran on, surfaced in a later test
    if not accepted:
        socket.create_connection(srv.getsockname(), timeout=2).close()
    t.join(timeout=5)
    for conn, _ in accepted:
        conn.close()
    srv.close()


def test_non_loopback_is_refused_with_next_step():
    with block_network():
        s = socket.socket()
        try:
            with pytest.raises(NetworkBlocked, match=r"10\.1\.2\.3.*re-record"):
                s.connect(("10.1.2.3", 443))
        finally:
            s.close()


def test_loopback_is_allowed(loopback_server):
    with block_network():
        s = socket.create_connection(loopback_server, timeout=2)
        s.close()


def test_httpx_to_a_remote_address_fails_fast_and_patch_is_removed():
    original = socket.socket.connect
    with block_network(), block_network():  # re-entrant
        with pytest.raises(httpx.ConnectError, match="blocked"):
            httpx.get("http://192.0.2.1:9/", timeout=5)
    assert socket.socket.connect is original

"""Refuse outbound sockets to anything but loopback while replaying.

Replay promises "nothing reaches the network"; this makes a leak loud instead of slow.
The seam is ``socket.socket.connect``/``connect_ex`` — every client (httpx, httpx2,
aiohttp, requests, asyncio's ``sock_connect``) ends there — patched only inside
``block_network()``.
"""

from __future__ import annotations

import ipaddress
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["NetworkBlocked", "block_network"]

_LOCK = threading.Lock()
_DEPTH = 0
_ORIGINAL: dict[str, Any] = {}


class NetworkBlocked(ConnectionRefusedError):
    """A socket tried to reach a non-loopback address during an offline replay."""


def _is_allowed(address: Any) -> bool:
    if not isinstance(address, tuple) or not address:
        return True  # AF_UNIX paths and other local families
    host = str(address[0])
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
    except ValueError:
        return False  # a hostname: it would need DNS, which is already off-box


def _guard(address: Any) -> None:
    if not _is_allowed(address):
        raise NetworkBlocked(
            f"hermes-replay blocked a connection to {address!r}: replay runs offline and only "
            "loopback (127.0.0.1, ::1) is allowed. If this request is LLM traffic, it is "
            "missing from the cassette — re-record it (`hermes-replay record …` or "
            "`pytest --replay-mode=auto`); if it is another service, start it on 127.0.0.1 "
            "or run with --replay-mode=passthrough."
        )


@contextmanager
def block_network() -> Iterator[None]:
    """Allow only loopback connections inside the block (re-entrant, thread-safe)."""
    global _DEPTH
    with _LOCK:
        if _DEPTH == 0:
            _ORIGINAL["connect"] = socket.socket.connect
            _ORIGINAL["connect_ex"] = socket.socket.connect_ex

            def connect(self: socket.socket, address: Any) -> None:
                _guard(address)
                return _ORIGINAL["connect"](self, address)

            def connect_ex(self: socket.socket, address: Any) -> int:
                _guard(address)
                return _ORIGINAL["connect_ex"](self, address)

            socket.socket.connect = connect  # type: ignore[method-assign]
            socket.socket.connect_ex = connect_ex  # type: ignore[method-assign]
        _DEPTH += 1
    try:
        yield
    finally:
        with _LOCK:
            _DEPTH -= 1
            if _DEPTH == 0:
                socket.socket.connect = _ORIGINAL.pop("connect")  # type: ignore[method-assign]
                socket.socket.connect_ex = _ORIGINAL.pop("connect_ex")  # type: ignore[method-assign]

"""Refuse outbound sockets to anything but loopback while replaying.

Replay promises "nothing reaches the network"; this makes a leak loud instead of slow.
The seams are ``socket.socket.connect``/``connect_ex`` — every client (httpx, httpx2,
aiohttp, requests, asyncio's ``sock_connect``) ends there — and ``socket.getaddrinfo``, so
a name is not even resolved (a DNS query is already traffic off the machine: a hub
tokenizer name in a recorded argv made the CLI replay resolve ``huggingface.co``). Patched
only inside ``block_network()``; used by the pytest plugin, ``run_cassette`` and the CLI.
"""

from __future__ import annotations

import ipaddress
import socket
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["NetworkBlocked", "block_network"]

_LOCK = threading.Lock()
_DEPTH = 0
_ORIGINAL: dict[str, Any] = {}
# the one endpoint a replay may also reach (``--live-base-url``): names it may resolve, and
# (address, port) pairs it may connect to — counted, so nested blocks each undo their own
_ALLOWED_NAMES: dict[str, int] = {}
_ALLOWED_PORTS: dict[tuple[str, int], int] = {}


class NetworkBlocked(ConnectionRefusedError):
    """A socket tried to reach a non-loopback address during an offline replay."""


def _is_allowed(address: Any) -> bool:
    if not isinstance(address, tuple) or not address:
        return True  # AF_UNIX paths and other local families
    host = str(address[0])
    if len(address) > 1 and (host.split("%", 1)[0].lower(), address[1]) in _ALLOWED_PORTS:
        return True
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
    except ValueError:
        return False  # a hostname: it would need DNS, which is already off-box


_LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost",
                             "ip6-loopback"})


def _resolvable(host: Any) -> bool:
    if host is None:
        return True  # getaddrinfo(None, port): the local wildcard/loopback address
    name = host.decode() if isinstance(host, bytes) else str(host)
    if name.lower().rstrip(".") in _ALLOWED_NAMES:
        return True
    if name.lower().rstrip(".") in _LOOPBACK_NAMES or name == "":
        return True
    try:
        ipaddress.ip_address(name.split("%", 1)[0])
    except ValueError:
        return False  # a name: resolving it asks a DNS server
    return True  # a literal address resolves locally; connect() judges it


def _allow_resolved(host: Any, found: Any) -> None:
    """The addresses an allowed name resolved to may be connected to, on its port only."""
    name = (host.decode() if isinstance(host, bytes) else str(host or "")).lower().rstrip(".")
    if name not in _ALLOWED_NAMES:
        return
    with _LOCK:
        ports = [p for (n, p) in _ALLOWED_PORTS if n == name]
        for entry in found or ():
            address = str(entry[4][0]).split("%", 1)[0].lower()
            for port in ports:
                _ALLOWED_PORTS.setdefault((address, port), 1)


def _guard(address: Any) -> None:
    if not _is_allowed(address):
        raise NetworkBlocked(
            f"hermes-replay blocked a connection to {address!r}: replay runs offline and only "
            "loopback (127.0.0.1, ::1) is allowed. If this request is LLM traffic, it is "
            "missing from the cassette — re-record it (`hermes-replay record …` or "
            "`pytest --replay-mode=auto`); if it is another service, start it on 127.0.0.1 "
            "or run with --replay-mode=passthrough."
        )


def _count(table: dict[Any, int], key: Any, step: int) -> None:
    table[key] = table.get(key, 0) + step
    if table[key] <= 0:
        del table[key]


@contextmanager
def block_network(allow: Iterable[tuple[str, int]] = ()) -> Iterator[None]:
    """Allow only loopback connections inside the block (re-entrant, thread-safe), and those
    to the ``(host, port)`` pairs of ``allow`` — the live endpoint a user named for
    ``replay --llm live=…``: that name resolves, and its addresses on that port connect."""
    global _DEPTH
    allowed = [(h.lower().rstrip("."), int(p)) for h, p in allow]
    with _LOCK:
        for name, port in allowed:
            _count(_ALLOWED_NAMES, name, 1)
            _count(_ALLOWED_PORTS, (name, port), 1)
        if _DEPTH == 0:
            _ORIGINAL["connect"] = socket.socket.connect
            _ORIGINAL["connect_ex"] = socket.socket.connect_ex

            def connect(self: socket.socket, address: Any) -> None:
                _guard(address)
                return _ORIGINAL["connect"](self, address)

            def connect_ex(self: socket.socket, address: Any) -> int:
                _guard(address)
                return _ORIGINAL["connect_ex"](self, address)

            _ORIGINAL["getaddrinfo"] = socket.getaddrinfo

            def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
                if not _resolvable(host):
                    _guard((str(host), args[0] if args else 0))
                found = _ORIGINAL["getaddrinfo"](host, *args, **kwargs)
                _allow_resolved(host, found)
                return found

            socket.socket.connect = connect  # type: ignore[method-assign]
            socket.socket.connect_ex = connect_ex  # type: ignore[method-assign]
            socket.getaddrinfo = getaddrinfo  # type: ignore[assignment]
        _DEPTH += 1
    try:
        yield
    finally:
        with _LOCK:
            for name, port in allowed:
                _count(_ALLOWED_NAMES, name, -1)
                _count(_ALLOWED_PORTS, (name, port), -1)
            _DEPTH -= 1
            if _DEPTH == 0:
                _ALLOWED_NAMES.clear()  # and the addresses its names resolved to
                _ALLOWED_PORTS.clear()
                socket.socket.connect = _ORIGINAL.pop("connect")  # type: ignore[method-assign]
                socket.socket.connect_ex = _ORIGINAL.pop("connect_ex")  # type: ignore[method-assign]
                socket.getaddrinfo = _ORIGINAL.pop("getaddrinfo")  # type: ignore[assignment]

"""The httpx seam: ``HTTPTransport.handle_request`` and ``AsyncHTTPTransport.handle_async_request``.

httpx2 (the openai 3.x SDK's client) has the same transport interface, so one adapter class
serves both; ``_httpx2`` instantiates it for the other module. Only the default transports
are patched: a user's own transport (``MockTransport``, respx) is left alone.
"""

from __future__ import annotations

import importlib
from collections.abc import AsyncIterator, Iterator
from types import ModuleType
from typing import Any

from hermes_replay._session.intercept import Exchange, WireRequest, WireResponse, current

__all__ = ["HttpxAdapter", "install", "uninstall"]

_MARK = "__hermes_replay_patch__"
_DROP = ("content-length", "content-encoding", "transfer-encoding")


_STREAM_END_MARKERS = (b"data: [DONE]", b"response.completed")


def _close_early(ex: Exchange, wire: WireResponse) -> None:
    """The caller closed the stream before it ended. SDKs stop reading at the end marker
    (openai stops at ``[DONE]``), so a stream that carries one is complete; else it failed."""
    tail = b"".join((wire.chunks or [])[-3:])
    if any(marker in tail for marker in _STREAM_END_MARKERS):
        ex.finish(wire)
    else:
        ex.fail(None)


def _is_sse(headers: Any) -> bool:
    return "text/event-stream" in headers.get("content-type", "") and not headers.get(
        "content-encoding")


class HttpxAdapter:
    def __init__(self, module_name: str) -> None:
        self.module_name = module_name
        self.mod: ModuleType | None = None
        self._originals: dict[str, Any] = {}

    # ---------------------------------------------------------------- install

    def install(self) -> bool:
        try:
            mod = importlib.import_module(self.module_name)
        except ImportError:
            return False
        self.mod = mod
        self._streams = _stream_classes(mod)
        sync_cls, async_cls = mod.HTTPTransport, mod.AsyncHTTPTransport
        orig_sync, orig_async = sync_cls.handle_request, async_cls.handle_async_request
        self._originals = {"sync": orig_sync, "async": orig_async}
        adapter = self

        def handle_request(transport: Any, request: Any) -> Any:
            handler = current()
            if handler is None or not handler.wants(request.method, str(request.url)):
                return orig_sync(transport, request)
            body = request.read()
            ex = handler.begin(WireRequest(request.method, str(request.url),
                                           list(request.headers.multi_items()), body))
            if ex.action == "replay":
                return adapter._replayed(ex.response)
            if ex.action == "passthrough":
                return orig_sync(transport, request)
            request = adapter._outgoing(request, ex)
            try:
                response = orig_sync(transport, request)
            except BaseException as exc:
                ex.fail(exc)
                raise
            return adapter._capture_sync(response, ex)

        async def handle_async_request(transport: Any, request: Any) -> Any:
            handler = current()
            if handler is None or not handler.wants(request.method, str(request.url)):
                return await orig_async(transport, request)
            body = await request.aread()
            ex = handler.begin(WireRequest(request.method, str(request.url),
                                           list(request.headers.multi_items()), body))
            if ex.action == "replay":
                return adapter._replayed(ex.response)
            if ex.action == "passthrough":
                return await orig_async(transport, request)
            request = adapter._outgoing(request, ex)
            try:
                response = await orig_async(transport, request)
            except BaseException as exc:
                ex.fail(exc)
                raise
            return await adapter._capture_async(response, ex)

        setattr(handle_request, _MARK, True)
        setattr(handle_async_request, _MARK, True)
        sync_cls.handle_request = handle_request
        async_cls.handle_async_request = handle_async_request
        return True

    def uninstall(self) -> None:
        if self.mod is None or not self._originals:
            return
        sync_cls, async_cls = self.mod.HTTPTransport, self.mod.AsyncHTTPTransport
        # restore only our own patch: if someone patched on top of us, theirs stays in place
        if getattr(sync_cls.handle_request, _MARK, False):
            sync_cls.handle_request = self._originals["sync"]
        if getattr(async_cls.handle_async_request, _MARK, False):
            async_cls.handle_async_request = self._originals["async"]
        self._originals = {}

    def _outgoing(self, request: Any, ex: Exchange) -> Any:
        """The request to send: ``request`` itself, or — for a call the session sends live on
        replay — the one it rewrote (another endpoint, the user's key; ``_session.live_calls``).
        The body was read already; extensions (timeouts) carry over."""
        out = getattr(ex, "outgoing", None)
        if out is None:
            return request
        assert self.mod is not None
        extensions = dict(request.extensions)
        deadline = getattr(ex, "deadline", None)
        if deadline:  # the live call's bound (``_session.live_calls``), never a longer one
            given = extensions.get("timeout") or {}
            extensions["timeout"] = {
                part: min(given[part], deadline) if given.get(part) else deadline
                for part in ("connect", "read", "write", "pool")}
        return self.mod.Request(out.method, out.url, headers=out.headers, content=out.body,
                                extensions=extensions)

    # ---------------------------------------------------------------- responses

    def _build(self, status: int, headers: list[tuple[str, str]], stream: Any,
               extensions: dict | None = None) -> Any:
        assert self.mod is not None
        return self.mod.Response(status_code=status, headers=headers, stream=stream,
                                 extensions=extensions or {})

    def _replayed(self, wire: WireResponse | None) -> Any:
        assert wire is not None
        headers = [(k, v) for k, v in wire.headers if k.lower() not in _DROP]
        extensions: dict[str, Any] = {"http_version": b"HTTP/1.1"}
        if wire.reason:
            extensions["reason_phrase"] = wire.reason.encode("ascii", "replace")
        if wire.chunks is not None:
            return self._build(wire.status, headers, self._streams[0](wire.chunks), extensions)
        body = wire.body or b""
        headers.append(("content-length", str(len(body))))
        # a whole body is handed over already read, as respx and vcrpy do: the SDK's
        # ``aread`` then returns it without an async generator chain per response (tens of
        # microseconds a request); ``aiter_bytes``/``iter_bytes`` still yield it
        assert self.mod is not None
        return self.mod.Response(status_code=wire.status, headers=headers, content=body,
                                 extensions=extensions)

    def _plain(self, response: Any, body: bytes) -> Any:
        headers = [(k, v) for k, v in response.headers.multi_items() if k.lower() not in _DROP]
        headers.append(("content-length", str(len(body))))
        ext = {k: v for k, v in response.extensions.items()
               if k in ("http_version", "reason_phrase")}
        return self._build(response.status_code, headers, self._streams[0]([body]), ext)

    def _wire(self, response: Any, **kw: Any) -> WireResponse:
        return WireResponse(response.status_code, list(response.headers.multi_items()), **kw)

    def _capture_sync(self, response: Any, ex: Exchange) -> Any:
        ex.answering()  # its headers are here: the endpoint answers, however long the body
        if _is_sse(response.headers):
            tee = self._streams[1](response.stream, ex, self._wire(response, chunks=[]))
            return self._build(response.status_code, list(response.headers.multi_items()), tee,
                               response.extensions)
        try:
            body = response.read()
        except BaseException as exc:
            ex.fail(exc)
            raise
        ex.finish(self._wire(response, body=body))
        return self._plain(response, body)

    async def _capture_async(self, response: Any, ex: Exchange) -> Any:
        ex.answering()  # its headers are here: the endpoint answers, however long the body
        if _is_sse(response.headers):
            tee = self._streams[2](response.stream, ex, self._wire(response, chunks=[]))
            return self._build(response.status_code, list(response.headers.multi_items()), tee,
                               response.extensions)
        try:
            body = await response.aread()
        except BaseException as exc:
            ex.fail(exc)
            raise
        ex.finish(self._wire(response, body=body))
        return self._plain(response, body)


def _stream_classes(mod: ModuleType) -> tuple[type, type, type]:
    """Byte streams of this module's types: replayed chunks, and sync/async recording tees.

    A tee passes each chunk through as it arrives (so streaming stays streaming while
    recording) and reports the exchange finished only when the stream ended normally.
    """

    class ReplayStream(mod.SyncByteStream, mod.AsyncByteStream):  # type: ignore[misc,name-defined]
        def __init__(self, chunks: list[bytes]) -> None:
            self._chunks = chunks

        def __iter__(self) -> Iterator[bytes]:
            yield from self._chunks

        async def __aiter__(self) -> AsyncIterator[bytes]:
            for chunk in self._chunks:
                yield chunk

    class SyncTee(mod.SyncByteStream):  # type: ignore[misc,name-defined]
        def __init__(self, inner: Any, ex: Exchange, wire: WireResponse) -> None:
            self._inner, self._ex, self._wire = inner, ex, wire

        def __iter__(self) -> Iterator[bytes]:
            try:
                for part in self._inner:
                    self._wire.chunks.append(part)  # type: ignore[union-attr]
                    yield part
            except BaseException as exc:
                self._ex.fail(exc)
                raise
            self._ex.finish(self._wire)

        def close(self) -> None:
            _close_early(self._ex, self._wire)  # no-op if the stream already finished
            self._inner.close()

    class AsyncTee(mod.AsyncByteStream):  # type: ignore[misc,name-defined]
        def __init__(self, inner: Any, ex: Exchange, wire: WireResponse) -> None:
            self._inner, self._ex, self._wire = inner, ex, wire

        async def __aiter__(self) -> AsyncIterator[bytes]:
            try:
                async for part in self._inner:
                    self._wire.chunks.append(part)  # type: ignore[union-attr]
                    yield part
            except BaseException as exc:
                self._ex.fail(exc)
                raise
            self._ex.finish(self._wire)

        async def aclose(self) -> None:
            _close_early(self._ex, self._wire)
            await self._inner.aclose()

    return ReplayStream, SyncTee, AsyncTee


_ADAPTER = HttpxAdapter("httpx")
install = _ADAPTER.install
uninstall = _ADAPTER.uninstall

"""The aiohttp seam: ``ClientSession._request`` (what ``get``/``post``/``request`` all call).

atroposlib sends vLLM/SGLang ``/generate`` and the trajectory API over aiohttp. A replayed
response is a real ``ClientResponse`` with its body already in place, so ``json()``,
``text()``, ``read()``, ``raise_for_status()``, ``content`` iteration and ``async with`` all
behave as aiohttp's own. While recording, the body is read in full (aiohttp LLM traffic
is not streamed) and a fresh ``content`` stream is put back for the caller.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from http import HTTPStatus
from types import SimpleNamespace
from typing import Any
from urllib.parse import urlencode

from hermes_replay._session.intercept import WireRequest, WireResponse, current

__all__ = ["install", "uninstall"]

_MARK = "__hermes_replay_patch__"
_ORIGINAL: dict[str, Any] = {}


class _NoProtocol:
    """What ``StreamReader`` expects of a connection; a body known up front needs none."""

    _reading_paused = False
    connected = False

    def pause_reading(self) -> None:
        pass

    def resume_reading(self, resume_parser: bool = True) -> None:
        pass


def _stream(body: bytes, loop: asyncio.AbstractEventLoop) -> Any:
    from aiohttp import streams

    reader = streams.StreamReader(_NoProtocol(), max(len(body), 2**16), loop=loop)  # type: ignore[arg-type]
    if body:
        reader.feed_data(body)
    reader.feed_eof()
    return reader


def _request_body(session: Any, kwargs: dict[str, Any]) -> bytes:
    if kwargs.get("json") is not None:
        serialize = getattr(session, "_json_serialize", json.dumps)
        return serialize(kwargs["json"]).encode("utf-8")
    data = kwargs.get("data")
    if data is None:
        return b""
    if isinstance(data, bytes):
        return data
    if isinstance(data, str):
        return data.encode("utf-8")
    if isinstance(data, dict):
        return urlencode(data).encode("utf-8")
    return b""  # form data / streaming payloads: not LLM traffic we can fingerprint


def _replayed(session: Any, method: str, url: Any, headers: Any, wire: WireResponse) -> Any:
    from aiohttp import ClientResponse, RequestInfo
    from aiohttp.http import HttpVersion11
    from multidict import CIMultiDict, CIMultiDictProxy

    loop = asyncio.get_running_loop()
    kwargs: dict[str, Any] = {
        "writer": None, "continue100": None, "timer": None, "traces": [], "loop": loop,
        "session": None,
        "request_info": RequestInfo(url, method, CIMultiDictProxy(CIMultiDict(headers)), url),
    }
    if "stream_writer" in inspect.signature(ClientResponse.__init__).parameters:
        kwargs["stream_writer"] = SimpleNamespace(output_size=0)  # aiohttp >= 3.14
    resp = ClientResponse(method, url, **kwargs)
    body = wire.content
    pairs = [(k, v) for k, v in wire.headers
             if k.lower() not in ("content-length", "content-encoding", "transfer-encoding")]
    pairs.append(("Content-Length", str(len(body))))
    resp.version = HttpVersion11
    resp.status = wire.status
    try:
        resp.reason = wire.reason or HTTPStatus(wire.status).phrase
    except ValueError:
        resp.reason = ""
    resp._headers = CIMultiDictProxy(CIMultiDict(pairs))
    resp._raw_headers = tuple((k.encode("utf-8"), v.encode("utf-8")) for k, v in pairs)
    resp.content = _stream(body, loop)
    if wire.chunks is None:
        resp._body = body
    return resp


def install() -> bool:
    try:
        from aiohttp import ClientSession
    except ImportError:
        return False
    original = ClientSession._request
    _ORIGINAL["_request"] = original

    async def _request(self: Any, method: str, str_or_url: Any, **kwargs: Any) -> Any:
        handler = current()
        if handler is None:
            return await original(self, method, str_or_url, **kwargs)
        url = self._build_url(str_or_url)
        if kwargs.get("params"):
            url = url.extend_query(kwargs["params"])
        if not handler.wants(method, str(url)):
            return await original(self, method, str_or_url, **kwargs)
        headers = list(self._prepare_headers(kwargs.get("headers")).items())
        if kwargs.get("json") is not None:
            headers.append(("Content-Type", "application/json"))
        ex = handler.begin(WireRequest(method.upper(), str(url), headers,
                                       _request_body(self, kwargs)))
        if ex.action == "passthrough":
            return await original(self, method, str_or_url, **kwargs)
        if ex.action == "replay":
            assert ex.response is not None
            resp = _replayed(self, method.upper(), url, headers, ex.response)
            check = kwargs.get("raise_for_status", self._raise_for_status)
            if callable(check):
                await check(resp)
            elif check:
                resp.raise_for_status()
            return resp
        out = getattr(ex, "outgoing", None)
        if out is not None:  # sent live on replay: the rewritten request (``_session.live_calls``)
            kwargs = {k: v for k, v in kwargs.items()
                      if k not in ("json", "data", "headers", "params")}
            method, str_or_url = out.method, out.url
            kwargs.update(headers=dict(out.headers), data=out.body)
            deadline = getattr(ex, "deadline", None)
            if deadline:  # the live call's bound (``_session.live_calls``)
                from aiohttp import ClientTimeout

                kwargs["timeout"] = ClientTimeout(total=deadline)
        try:
            resp = await original(self, method, str_or_url, **kwargs)
            ex.answering()  # its headers are here: the endpoint answers, however long the body
            body = await resp.read()
        except BaseException as exc:
            ex.fail(exc)
            raise
        ex.finish(WireResponse(resp.status, list(resp.headers.items()), body=body,
                               reason=resp.reason or ""))
        resp.content = _stream(body, asyncio.get_running_loop())
        return resp

    setattr(_request, _MARK, True)
    ClientSession._request = _request  # type: ignore[method-assign]
    return True


def uninstall() -> None:
    from aiohttp import ClientSession

    if "_request" in _ORIGINAL and getattr(ClientSession._request, _MARK, False):
        ClientSession._request = _ORIGINAL.pop("_request")  # type: ignore[method-assign]

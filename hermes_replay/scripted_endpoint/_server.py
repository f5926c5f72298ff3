"""``ScriptedEndpoint``: the scripted stand-in served over real HTTP on 127.0.0.1.

The aiohttp server runs on its own event loop in a background thread, so the same object works
from sync tests, async tests (the caller's loop is never blocked by request handling) and the CLI.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
from typing import Any

from aiohttp import web

from hermes_replay.scripted_endpoint import _generate, _openai, _tokens
from hermes_replay.scripted_endpoint._engine import Engine
from hermes_replay.scripted_endpoint._faults import FaultInjector, FaultPlan, check_kinds
from hermes_replay.scripted_endpoint._registry import resolve_script
from hermes_replay.scripted_endpoint._sampling import Sampler
from hermes_replay.scripted_endpoint._script import NoRuleMatched, Script
from hermes_replay.scripted_endpoint._tokens import TokenizerUnavailable

_JSON = web.RequestKey("json", object)  # the parsed body, read once by the middleware

_LOG = logging.getLogger("hermes_replay.scripted_endpoint")


class ScriptedEndpoint:
    """A scripted endpoint — a stand-in for a model, not a model.

    ``script`` is a registered script name, a script file (``docs/scripted-endpoint.md``) or a
    :class:`Script`. ``seed`` fixes every answer (see
    ``_sampling`` for the exact rule). ``latency=(min_s, max_s)`` delays each request uniformly.
    ``faults`` injects 5xx / timeouts / dropped connections. ``raw_tool_format`` is the parser
    format tool calls are written in wherever raw text is returned (completions, ``/generate``).
    ``openai_only`` leaves ``/generate`` and ``/health`` out: the server then stands in for one
    that speaks the OpenAI API alone (a hosted API), which a vLLM/SGLang client must be told.
    """

    def __init__(
        self,
        script: str | os.PathLike[str] | Script = "examples",
        seed: int = 0,
        latency: tuple[float, float] = (0.0, 0.0),
        faults: FaultPlan | None = None,
        raw_tool_format: str = "hermes",
        host: str = "127.0.0.1",
        port: int = 0,
        openai_only: bool = False,
    ) -> None:
        self.script = resolve_script(script)
        self.openai_only = openai_only
        self.seed = seed
        self.host = host
        self.port = port
        self.raw_tool_format = raw_tool_format
        self._sampler = Sampler(seed, latency)
        self._faults = FaultInjector(faults)
        self._engine = Engine(self.script, self._sampler, raw_tool_format)
        self.requests: list[tuple[str, Any]] = []
        self.unmatched: list[str] = []  # why each request no rule matched was answered 422
        #: the Authorization header of each of those requests (None: none sent), so a test
        #: can check which key a client really sent
        self.authorizations: list[str | None] = []
        #: POST requests being answered right now, and the most there ever were at once (how a
        #: test sees that a client really sends in parallel, without timing anything)
        self.in_flight = 0
        self.max_in_flight = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None

    # --- lifecycle -------------------------------------------------------------------------

    @property
    def root_url(self) -> str:
        if self._runner is None:
            raise RuntimeError("scripted endpoint is not started; call .start() or use `with`")
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        return self.root_url + "/v1"

    @property
    def faults_injected(self) -> int:
        return self._faults.injected

    def start(self) -> ScriptedEndpoint:
        if self._thread is not None:
            return self
        # Load the tokenizer (usage counts, /generate) now, not inside the first request: that
        # request then paid transformers' import, 5 s and more on a loaded machine, and timed
        # out in clients with short timeouts (httpx's default is 5 s). Cached per process.
        _tokens.get_tokenizer()
        loop = asyncio.new_event_loop()
        ready = threading.Event()
        errors: list[BaseException] = []

        def serve() -> None:
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self._start_site())
            except BaseException as exc:  # reported to the caller of start()
                errors.append(exc)
                ready.set()
                loop.close()
                return
            ready.set()
            loop.run_forever()
            loop.close()

        self._loop = loop
        self._thread = threading.Thread(target=serve, name="scripted-endpoint", daemon=True)
        self._thread.start()
        ready.wait()
        if errors:
            self._thread.join()
            self._thread = self._loop = None
            raise RuntimeError(
                f"scripted endpoint could not listen on {self.host}:{self.port}: {errors[0]}"
            ) from errors[0]
        return self

    async def _start_site(self) -> None:
        app = web.Application(middlewares=[self._middleware], client_max_size=64 * 2**20)
        if not self.openai_only:
            app.router.add_get("/health", self._health)
        app.router.add_get("/v1/models", self._models)
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_post("/v1/completions", self._completions)
        if not self.openai_only:
            app.router.add_post("/generate", self._generate)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port)
        await site.start()
        self._runner = runner
        self.port = runner.addresses[0][1]

    def stop(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        asyncio.run_coroutine_threadsafe(self._shutdown(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        self._loop = self._thread = self._runner = None

    async def _shutdown(self) -> None:
        assert self._runner is not None
        await self._runner.cleanup()
        # Handlers still sleeping (timeout faults, latency) must not outlive the server.
        current = asyncio.current_task()
        pending = [t for t in asyncio.all_tasks() if t is not current]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    def __enter__(self) -> ScriptedEndpoint:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def __aenter__(self) -> ScriptedEndpoint:
        return await asyncio.to_thread(self.start)

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.to_thread(self.stop)

    # --- control ---------------------------------------------------------------------------

    def fail_next(self, count: int = 1, kind: str = "5xx") -> None:
        """Make the next ``count`` generation requests fail with ``kind`` (before random faults)."""
        check_kinds([kind])
        self._faults.schedule(count, kind)

    def reset(self) -> None:
        """Forget requests, sample counters, latency/fault draws and scheduled faults."""
        self.requests.clear()
        self.unmatched.clear()
        self.authorizations.clear()
        self.max_in_flight = 0
        self._sampler.reset()
        self._faults.reset()

    # --- HTTP ------------------------------------------------------------------------------

    @web.middleware
    async def _middleware(self, request: web.Request, handler: Any) -> web.StreamResponse:
        body: Any = None
        if request.method == "POST":
            try:
                body = await request.json()
            except (json.JSONDecodeError, UnicodeDecodeError):
                return _error(400, f"request body of POST {request.path} is not valid JSON")
            if not isinstance(body, dict):
                return _error(400, f"request body of POST {request.path} must be a JSON object")
        self.requests.append((request.path, body))
        self.authorizations.append(request.headers.get("Authorization"))
        request[_JSON] = body
        if request.method != "POST":
            return await self._answer(request, handler, 0.0)
        self.in_flight += 1  # only ever touched on the endpoint's own event loop
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            return await self._answer(request, handler, self._sampler.next_latency())
        finally:
            self.in_flight -= 1

    async def _answer(self, request: web.Request, handler: Any,
                      delay: float) -> web.StreamResponse:
        if delay:
            await asyncio.sleep(delay)
        fault = self._faults.decide(request.path)
        if fault == "5xx":
            status = 503 if self._faults.injected % 2 == 0 else 500
            return _error(status, f"scripted fault: injected {status} on {request.path}",
                          kind="server_error")
        if fault == "drop":
            if request.transport is not None:
                request.transport.abort()
            raise asyncio.CancelledError  # nothing may be written to a dropped connection
        if fault == "timeout":
            await asyncio.sleep(self._faults.plan.timeout_s)
        try:
            return await handler(request)
        except NoRuleMatched as exc:  # logged too (once each): the env may swallow the 422
            if str(exc) not in self.unmatched:
                _LOG.warning("%s", exc)
            self.unmatched.append(str(exc))
            return _error(422, str(exc), kind="invalid_request_error")
        except TokenizerUnavailable as exc:
            return _error(501, str(exc), kind="server_error")
        except (KeyError, ValueError, TypeError) as exc:
            return _error(400, f"scripted endpoint could not handle {request.path}: {exc!r}",
                          kind="invalid_request_error")

    async def _health(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok", "kind": "scripted endpoint (not a model)"})

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{
            "id": "scripted", "object": "model", "created": 0,
            "owned_by": _openai.SYSTEM_FINGERPRINT,
        }]})

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        body = request[_JSON]
        if not isinstance(body.get("messages"), list):
            return _error(400, "chat completion request needs a 'messages' list")
        conv = _openai.chat_conversation(body)
        samples = self._engine.run(request.path, body, conv, conv.n)
        if body.get("stream"):
            chunks = list(_openai.chat_stream(body, conv, samples))
            return await _send_sse(request, chunks)
        return web.json_response(_openai.chat_response(body, conv, samples, self._sampler))

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        body = request[_JSON]
        prompts = _generate.prompt_texts(body.get("prompt"))
        params = {k: body.get(k) for k in ("temperature", "n", "max_tokens", "model")}
        n = int(body.get("n") or 1)
        per_prompt = []
        for i, prompt in enumerate(prompts):
            conv = _openai.text_conversation(prompt, params, request.path)
            keyed = body if len(prompts) == 1 else {**body, "prompt": prompt, "_i": i}
            per_prompt.append(self._engine.run(request.path, keyed, conv, n))
        response = _openai.completion_response(body, prompts, per_prompt, self._sampler)
        if body.get("stream"):
            return await _send_sse(request, list(_openai.completion_stream(response)))
        return web.json_response(response)

    async def _generate(self, request: web.Request) -> web.Response:
        body = request[_JSON]
        return web.json_response(_generate.handle(self._engine, request.path, body))


async def _send_sse(request: web.Request, chunks: list[dict[str, Any]]) -> web.StreamResponse:
    resp = web.StreamResponse(headers={
        "Content-Type": "text/event-stream", "Cache-Control": "no-cache",
    })
    await resp.prepare(request)
    for chunk in chunks:
        await resp.write(_openai.sse(chunk))
    await resp.write(b"data: [DONE]\n\n")
    await resp.write_eof()
    return resp


def _error(status: int, message: str, kind: str = "invalid_request_error") -> web.Response:
    return web.json_response(
        {"error": {"message": message, "type": kind, "code": status}}, status=status
    )

"""Shared by the reliability tests (verify, hostile cassettes, crash safety, concurrency,
faults): record small but realistic cassettes through the real ``cassette(mode="record")``
against the scripted endpoint. Not a test module."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import openai
from _loopback_app import LoopbackApp
from aiohttp import web

import hermes_replay

FAKE_KEY = "sk-test-not-a-real-key-000000000000"  # redacted on the way in; verify must pass

TOOLS = [{
    "type": "function",
    "function": {
        "name": "terminal",
        "description": "Run a shell command and return its output. " * 12,  # a long blob
        "parameters": {"type": "object", "properties": {"command": {"type": "string"}},
                       "required": ["command"]},
    },
}]


def run_rollouts(base_url: str, *, rollouts: int = 2, turns: int = 2, prefix: str = "r",
                 stream: bool = False, max_retries: int = 0, **client_kw: Any) -> list[str]:
    """Talk to an OpenAI-style endpoint like an agent loop would; returns the replies (JSON)."""
    client = openai.OpenAI(base_url=base_url, api_key=FAKE_KEY, max_retries=max_retries,
                           **client_kw)
    replies = []
    try:
        for r in range(rollouts):
            rid = f"{prefix}{r}"
            with hermes_replay.rollout(rid) as scope:
                messages: list[dict[str, Any]] = [
                    {"role": "system", "content": "You are a careful agent. " * 30},
                    {"role": "user", "content": f"Task {rid}: list the files."}]
                for t in range(turns):
                    if stream:
                        parts = client.chat.completions.create(
                            model="m", messages=messages, stream=True)
                        text = "".join((c.choices[0].delta.content or "") for c in parts
                                       if c.choices)
                        message: dict[str, Any] = {"role": "assistant", "content": text}
                    else:
                        resp = client.chat.completions.create(model="m", messages=messages,
                                                              tools=TOOLS, temperature=1.0)
                        message = resp.choices[0].message.model_dump(exclude_none=True)
                    replies.append(json.dumps(message, sort_keys=True))
                    messages.append(message)
                    for call in message.get("tool_calls") or []:
                        messages.append({"role": "tool", "tool_call_id": call["id"],
                                         "content": f"file_{t}.txt"})
                    if not message.get("tool_calls"):
                        messages.append({"role": "user", "content": f"Go on ({t})."})
                scope.report(reward=0.5, turns_used=turns, finished_naturally=True)
    finally:
        client.close()
    return replies


def record_sample(path: Path, *, rollouts: int = 2, turns: int = 2, stream: bool = False,
                  header: dict[str, Any] | None = None) -> list[str]:
    from hermes_replay.scripted_endpoint import ScriptedEndpoint

    with ScriptedEndpoint(script="generic", seed=0) as ep:
        with hermes_replay.cassette(path, "record", header=header or {"env_name": "sample"}):
            return run_rollouts(ep.base_url, rollouts=rollouts, turns=turns, stream=stream)


def read_records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip()]


def write_records(path: Path, records: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records),
                    encoding="utf-8")


def line_of(records: list[dict[str, Any]], pred: Any) -> int:
    """1-based line number of the first record matching ``pred``."""
    for i, record in enumerate(records, start=1):
        if pred(record):
            return i
    raise AssertionError("no such record")


class EchoServer(LoopbackApp):
    """Loopback OpenAI-ish server; ``plan`` says where the next responses carry the secret."""

    def __init__(self, latency: float = 0.0) -> None:
        super().__init__()
        self.latency = latency
        self.plan: tuple[str, str] = ("", "")

    def routes(self, app: web.Application) -> None:
        app.router.add_route("*", "/{tail:.*}", self._handle)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        await request.read()
        if self.latency:
            await asyncio.sleep(self.latency)
        where, secret = self.plan
        headers: dict[str, str] = {}
        if where == "resp set-cookie":
            headers["Set-Cookie"] = f"session={secret}; Path=/"
        elif where == "resp header x-api-key":
            headers["x-api-key"] = secret
        elif where == "resp custom header":
            headers["x-debug-trace"] = f"key={secret}"
        message: dict[str, Any] = {"role": "assistant", "content": "ok"}
        reply: dict[str, Any] = {"id": "c1", "object": "chat.completion", "created": 0,
                                 "model": "m", "choices": [{"index": 0, "message": message,
                                                            "finish_reason": "stop"}]}
        if where == "resp body api_key":
            reply["api_key"] = secret
        elif where == "resp body nested secret":
            reply["debug"] = {"client_secret": secret}
        elif where == "resp body content":
            message["content"] = f"Your key is {secret}, keep it safe."
        elif where == "resp text body":
            return web.Response(text=f"upstream said: token {secret} rejected?", status=200,
                                headers=headers, content_type="text/plain")
        elif where in ("resp raw 200", "resp raw 401"):  # the secret is the body, as sent
            return web.Response(text=secret, status=int(where[-3:]), headers=headers,
                                content_type="application/json")
        elif where == "resp sse split":  # the secret is the text, \x00 where a chunk ends
            resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await resp.prepare(request)
            for piece in secret.split("\x00"):
                chunk = {"id": "c1", "object": "chat.completion.chunk", "created": 0,
                         "model": "m", "choices": [{"index": 0, "delta": {"content": piece},
                                                    "finish_reason": None}]}
                await resp.write(f"data: {json.dumps(chunk)}\n\n".encode())
            await resp.write(b"data: [DONE]\n\n")
            await resp.write_eof()
            return resp
        elif where == "resp sse chunk":
            resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await resp.prepare(request)
            for piece in ("Your key: ", secret, " done"):
                chunk = {"id": "c1", "object": "chat.completion.chunk", "created": 0,
                         "model": "m", "choices": [{"index": 0, "delta": {"content": piece},
                                                    "finish_reason": None}]}
                await resp.write(f"data: {json.dumps(chunk)}\n\n".encode())
            await resp.write(b"data: [DONE]\n\n")
            await resp.write_eof()
            return resp
        if request.path.endswith("/generate"):
            reply = {"text": [message["content"]], "meta_info": {}}
        return web.json_response(reply, headers=headers)

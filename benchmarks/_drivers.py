"""Drive the same traffic through the openai SDK in every mode the benchmark compares.

One driver (``drive``) runs every rollout of the synthetic traffic through
``AsyncOpenAI.chat.completions.create``: GRPO groups one after another, the rollouts of a group
concurrently, each inside ``hermes_replay.rollout(id)``. Only what answers the SDK changes:

- the floor: an in-memory ``httpx2`` transport answering from a dict keyed by
  (rollout, turn) — the SDK's own cost and nothing else;
- hermes_replay: the default transport, intercepted by an active replay cassette;
- vcrpy: the default transport, intercepted by a vcrpy cassette (``record_mode="none"``);
- loopback: the scripted endpoint over real HTTP, with or without a recording cassette.
"""

from __future__ import annotations

import asyncio
import gc
import json
import time
from collections.abc import Callable

import httpx2
import openai

import hermes_replay
from benchmarks._synthetic import Rollout, groups

API_KEY = "sk-benchmark-not-a-real-key"
BASE_URL = "http://127.0.0.1:9/v1"  # never dialled: every mode but loopback answers in-process
# What an OpenAI-compatible server (vLLM behind uvicorn) answers with; every mode sends these.
RESPONSE_HEADERS = [("content-type", "application/json"), ("server", "uvicorn"),
                    ("date", "Sun, 29 Nov 2026 20:00:00 GMT")]


def response_bytes(rollouts: list[Rollout]) -> dict[tuple[str, int], bytes]:
    """Response bodies as vLLM's server writes them (compact JSON, UTF-8)."""
    return {(ro.id, seq): json.dumps(resp, ensure_ascii=False, separators=(",", ":")).encode()
            for ro in rollouts for seq, resp in enumerate(ro.responses)}


class DictTransport(httpx2.AsyncBaseTransport):
    """The floor: answer each request from a dict by (rollout, turn); optionally keep requests."""

    def __init__(self, answers: dict[tuple[str, int], bytes], capture: bool = False) -> None:
        self.answers = answers
        self.captured: dict[tuple[str, int], httpx2.Request] | None = {} if capture else None
        self.issued: dict[str, int] = {}  # requests made per rollout so far

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        scope = hermes_replay.current_rollout()
        assert scope is not None, "the driver runs every request inside a rollout scope"
        seq = self.issued.get(scope.id, 0)
        self.issued[scope.id] = seq + 1
        key = (scope.id, seq)
        if self.captured is not None:
            await request.aread()
            self.captured[key] = request
        body = self.answers[key]
        return httpx2.Response(200, headers=[*RESPONSE_HEADERS,
                                             ("content-length", str(len(body)))], content=body)


def client(transport: httpx2.AsyncBaseTransport | None = None,
           base_url: str = BASE_URL) -> openai.AsyncOpenAI:
    """An SDK client as an env builds one; ``transport=None`` keeps the SDK's default."""
    http = httpx2.AsyncClient(transport=transport) if transport is not None else None
    return openai.AsyncOpenAI(api_key=API_KEY, base_url=base_url, max_retries=0,
                              http_client=http)


async def _rollout(sdk: openai.AsyncOpenAI, ro: Rollout, check: bool) -> None:
    with hermes_replay.rollout(ro.id):
        for seq, body in enumerate(ro.requests):
            resp = await sdk.chat.completions.create(**body)
            if check and resp.id != ro.responses[seq]["id"]:
                raise AssertionError(f"{ro.id} turn {seq}: got response {resp.id}, expected "
                                     f"{ro.responses[seq]['id']}")


async def drive(sdk: openai.AsyncOpenAI, rollouts: list[Rollout], check: bool = True) -> None:
    """All rollouts through ``sdk``: groups in order, each group's rollouts concurrently."""
    for group in groups(rollouts):
        await asyncio.gather(*(_rollout(sdk, ro, check) for ro in group))


def run(rollouts: list[Rollout], transport: httpx2.AsyncBaseTransport | None = None,
        base_url: str = BASE_URL, check: bool = True) -> tuple[float, float]:
    """Drive ``rollouts`` with a fresh client on a fresh loop; returns (wall s, CPU s)."""

    async def main() -> None:
        async with client(transport, base_url) as sdk:
            await drive(sdk, rollouts, check)

    w0, c0 = time.perf_counter(), time.process_time()
    asyncio.run(main())
    return time.perf_counter() - w0, time.process_time() - c0


def capture_requests(rollouts: list[Rollout]) -> dict[tuple[str, int], httpx2.Request]:
    """The exact ``httpx2.Request`` the SDK sends for every (rollout, turn) of the traffic."""
    transport = DictTransport(response_bytes(rollouts), capture=True)
    run(rollouts, transport)
    assert transport.captured is not None
    return transport.captured


class GcClock:
    """CPU seconds the cyclic garbage collector has spent so far in this process, and its
    full (generation 2) collections, from ``gc.callbacks``.

    Why: in a paired run a collection is paid by whichever mode happens to allocate when a
    threshold is crossed, while the objects it walks are mostly the replay's (the decoded
    recordings a replay keeps). The benchmark reads this clock per slice to say which
    mode's slices paid for collections, and charges them to the replay."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.full = 0
        self._started = 0.0

    def __call__(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._started = time.process_time()
        else:
            self.seconds += time.process_time() - self._started
            self.full += info.get("generation") == 2


GC = GcClock()
gc.callbacks.append(GC)


async def paired(clients: dict[str, openai.AsyncOpenAI], rollouts: list[Rollout],
                 check: bool = True, meter: Callable[[], float] | None = None,
                 ) -> dict[str, tuple[float, float, float, float, int]]:
    """Two modes side by side, one GRPO group at a time, in ABBA order.

    Both clients are built before timing and live in one event loop, so each mode's time
    is its requests and nothing else, and a burst of load on the shared machine hits both
    within the same second instead of one whole run. Returns (wall s, CPU s, ``meter``
    delta, garbage-collector CPU s, full collections) per mode; ``meter`` reads some other
    clock (an endpoint process's CPU).
    """
    first, second = clients
    totals = {mode: [0.0, 0.0, 0.0, 0.0, 0] for mode in clients}
    read = meter or (lambda: 0.0)
    for i, group in enumerate(groups(rollouts)):
        for mode in ((first, second) if i % 2 == 0 else (second, first)):
            w0, c0, m0 = time.perf_counter(), time.process_time(), read()
            g0, f0 = GC.seconds, GC.full
            await asyncio.gather(*(_rollout(clients[mode], ro, check) for ro in group))
            t = totals[mode]
            t[0] += time.perf_counter() - w0
            t[1] += time.process_time() - c0
            t[2] += read() - m0
            t[3] += GC.seconds - g0
            t[4] += GC.full - f0
    return {mode: (t[0], t[1], t[2], t[3], int(t[4])) for mode, t in totals.items()}

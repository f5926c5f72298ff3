"""hermes_replay side: the real cassette for the synthetic traffic, and its replay.

The cassette is built from the exact requests the SDK sends (captured by the floor transport)
with the core's own conversion (``stored_request`` / ``stored_response`` — redaction, kept
headers, JSON bodies), fingerprints from the core's ``Matcher`` and written by the core's
``write_cassette`` — the same path a recording session takes on a clean close.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import httpx2

import hermes_replay
from benchmarks import _drivers
from benchmarks._synthetic import MODEL, Rollout
from hermes_replay._cassette import CassetteHeader, Interaction, write_cassette
from hermes_replay._cassette.matching import Matcher
from hermes_replay._session.convert import stored_request, stored_response
from hermes_replay._session.intercept import WireRequest, WireResponse


def _template(captured: dict[tuple[str, int], httpx2.Request]) -> tuple[str, dict, Matcher]:
    """URL and stored headers of the SDK's requests, after checking on the captured sample
    that the stored form is exactly ``stored_request``'s (redaction is the identity here)."""
    first = next(iter(captured.values()))
    url = str(first.url)
    headers = stored_request(WireRequest(first.method, url, list(first.headers.multi_items()),
                                         first.content))["headers"]
    return url, headers, Matcher.build()


def write(path: Path, rollouts: list[Rollout],
          captured: dict[tuple[str, int], httpx2.Request]) -> int:
    """Write the hermes_replay cassette for ``rollouts``; returns its size in bytes.

    ``captured`` holds the SDK's real requests for (at least) some of the rollouts: every one
    of them is converted with ``stored_request`` and must equal the form built here from the
    rollout's body, which is then used for all (converting 10,000 requests one by one would
    make the setup, not the benchmark, the slow part).
    """
    url, headers, matcher = _template(captured)
    # the SDK writes the body's keys in its own order, and a recording keeps that order
    order = list(json.loads(next(iter(captured.values())).content))

    def sdk_body(body: dict) -> dict:
        return {k: body[k] for k in order if k in body} | body

    by_key = {(ro.id, seq): (ro, seq) for ro in rollouts for seq in range(len(ro.requests))}
    for key, real in captured.items():
        ro, seq = by_key[key]
        stored = stored_request(WireRequest(real.method, str(real.url),
                                            list(real.headers.multi_items()), real.content))
        mine = {"method": "POST", "url": url, "headers": headers,
                "body": sdk_body(ro.requests[seq])}
        if json.dumps(stored) != json.dumps(mine):  # key order included
            raise AssertionError(f"{key}: the stored request differs from the SDK's request")
    answers = _drivers.response_bytes(rollouts)
    interactions = []
    for ro in rollouts:
        for seq, body in enumerate(ro.requests):
            request = {"method": "POST", "url": url, "headers": headers,
                       "body": sdk_body(body)}
            raw = answers[(ro.id, seq)]
            response = stored_response(WireResponse(
                200, [*_drivers.RESPONSE_HEADERS, ("content-length", str(len(raw)))], body=raw))
            interactions.append(Interaction(
                rollout=ro.id, seq=seq, kind="chat", request=request, response=response,
                fingerprint=matcher.fingerprint(request), duration_ms=850.0))
    outcomes = {ro.id: {"reward": 1.0, "turns_used": len(ro.requests),
                        "finished_naturally": True, "tool_errors": 0,
                        "group": f"item-{ro.group}", "phase": "train"} for ro in rollouts}
    # as a real recording does: the header names the matcher that made the fingerprints
    header = CassetteHeader(env_name="synthetic_bench", model=MODEL, endpoint_type="openai",
                            base_url=_drivers.BASE_URL, command=["process"],
                            extra={"matcher": matcher.signature()})
    write_cassette(path, header, interactions, outcomes)
    return path.stat().st_size


def replay(path: Path, rollouts: list[Rollout]) -> tuple[float, float, float]:
    """Replay ``rollouts`` through the SDK: (session start s, drive wall s, drive CPU s)."""
    t0 = time.perf_counter()
    session = hermes_replay.cassette(path, mode="replay", strict=True)
    session.start()
    start = time.perf_counter() - t0
    try:
        wall, cpu = _drivers.run(rollouts)
    except BaseException as exc:
        session.stop(exc)
        raise
    session.stop()
    summary = session.summary()
    assert not summary.misses and summary.interactions == sum(len(r.requests) for r in rollouts)
    return start, wall, cpu


def replay_paired(path: Path, rollouts: list[Rollout]) -> tuple[float, dict[str, tuple]]:
    """Open a replay session on ``path``, then drive the floor and the replay group by group
    (``_drivers.paired``): (session start s, {"floor"|"replay": (wall s, CPU s, 0, GC CPU s,
    full collections)})."""
    answers = _drivers.response_bytes(rollouts)
    t0 = time.perf_counter()
    session = hermes_replay.cassette(path, mode="replay", strict=True)
    session.start()
    start = time.perf_counter() - t0

    async def main() -> dict[str, tuple]:
        async with _drivers.client(_drivers.DictTransport(answers)) as floor, \
                _drivers.client() as replay:
            return await _drivers.paired({"floor": floor, "replay": replay}, rollouts)

    try:
        times = asyncio.run(main())
    except BaseException as exc:
        session.stop(exc)
        raise
    session.stop()
    summary = session.summary()
    assert not summary.misses and summary.interactions == sum(len(r.requests) for r in rollouts)
    return start, times

"""vcrpy side of the comparison: the equivalent YAML cassette, and its replay.

The YAML is what vcrpy itself records for this traffic: the exact request the SDK sends
(method, url, every header, body bytes — captured from the SDK by the floor transport) and the
response in vcrpy's httpx-stub shape, serialised with vcrpy's own serializer. (Recording it
through vcrpy would give the same file but costs O(n²): vcrpy looks every new request up in
the cassette first.) The ``authorization`` header is filtered, as any user of vcrpy does.
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx2

from benchmarks import _drivers
from benchmarks._synthetic import Rollout

MATCH_ON = ("method", "scheme", "host", "port", "path", "query", "body")


def write_yaml(path: Path, rollouts: list[Rollout],
               captured: dict[tuple[str, int], httpx2.Request]) -> int:
    """Write vcrpy's YAML cassette for ``rollouts`` (in request order); returns its size."""
    from vcr.request import Request as VcrRequest
    from vcr.serialize import serialize
    from vcr.serializers import yamlserializer

    answers = _drivers.response_bytes(rollouts)
    requests, responses = [], []
    for key, real in captured.items():
        headers = {k: v for k, v in real.headers.items() if k.lower() != "authorization"}
        requests.append(VcrRequest(real.method, str(real.url), real.content, headers))
        body = answers[key]
        responses.append({"status": {"code": 200, "message": "OK"},
                          "headers": {k: [v] for k, v in [*_drivers.RESPONSE_HEADERS,
                                                             ("content-length", str(len(body)))]},
                          "body": {"string": body}})
    text = serialize({"requests": requests, "responses": responses}, yamlserializer)
    path.write_text(text, encoding="utf-8")
    return path.stat().st_size


def replay(path: Path, rollouts: list[Rollout]) -> tuple[float, float, float]:
    """Replay ``rollouts`` from the YAML: (cassette load s, drive wall s, drive CPU s)."""
    import vcr

    recorder = vcr.VCR(record_mode="none", match_on=MATCH_ON)
    t0 = time.perf_counter()
    with recorder.use_cassette(str(path)) as cassette:
        load = time.perf_counter() - t0
        # no response check: the rollouts of a group open with the same request, and vcrpy,
        # which knows no rollout identity, answers identical requests in recording order
        wall, cpu = _drivers.run(rollouts, check=False)
        assert cassette.all_played, "vcrpy left recorded interactions unplayed"
    return load, wall, cpu

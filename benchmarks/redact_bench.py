"""What recording's secret work costs per request: ``stored_request`` + ``stored_response``
(parse, redaction, the known-secret search) over synthetic traffic, with the known secrets a
recorder typically holds (its API key and five credential variables of its environment).

Why a bench of its own: each known value is searched in its raw, percent- and JSON-escaped,
hex and base64/base64url forms and by its anchors (``_secrets/known.py``), and that search
runs on every new string of every recorded request. Run it in two checkouts to compare:

    PYTHONPATH=. .venv/bin/python benchmarks/redact_bench.py 2000
"""

from __future__ import annotations

import json
import sys
import time

from benchmarks._synthetic import build_traffic
from hermes_replay._secrets import redact
from hermes_replay._secrets.known import KNOWN
from hermes_replay._secrets.redact import CleanBodies
from hermes_replay._session.convert import stored_request, stored_response
from hermes_replay._session.intercept import WireRequest, WireResponse

API_KEY = "sk-proj-Qz7aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5bC7"
ENVIRON = {"OPENAI_API_KEY": API_KEY, "HF_TOKEN": "hf_Qz7aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1",
           "WANDB_API_KEY": "0123456789abcdef0123456789abcdef01234567",
           "GITHUB_TOKEN": "ghp_Qz7aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY",
           "ANTHROPIC_API_KEY": "sk-ant-api03-Qz7aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5"}


def _dumps(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def main(n: int) -> None:
    KNOWN.add_environ(ENVIRON)
    traffic = []
    for number, rollout in enumerate(build_traffic(n)):
        for body, reply in zip(rollout.requests, rollout.responses, strict=True):
            traffic.append((number, WireRequest(
                "POST", "http://127.0.0.1:8000/v1/chat/completions",
                [("authorization", f"Bearer {API_KEY}"), ("content-type", "application/json")],
                _dumps(body)), WireResponse(200, [("content-type", "application/json")],
                                            body=_dumps(reply))))
    runs = []
    for _ in range(5):
        clean = CleanBodies()
        redact._CLEAN.clear()  # each run starts as a recorder does: nothing found clean yet
        redact._clean_state[:] = [0, -1]
        started = time.process_time()
        for key, request, response in traffic:
            stored_request(request, clean=clean, key=key)
            stored_response(response)
        runs.append((time.process_time() - started) / len(traffic) * 1e3)
    print(f"{len(traffic)} requests, CPU ms per request in 5 runs: "
          + " ".join(f"{r:.3f}" for r in runs) + f"; best {min(runs):.3f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2000)

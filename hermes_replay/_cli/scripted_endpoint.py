"""``hermes-replay scripted-endpoint``: serve the scripted stand-in for a model until Ctrl-C."""

from __future__ import annotations

import argparse
import signal
import sys
import threading

HELP = "serve the scripted endpoint — a stand-in for a model, not a model — on 127.0.0.1"
DESCRIPTION = (
    "Serve the scripted endpoint: a stand-in for a model, not a model. It answers OpenAI "
    "/v1/chat/completions (tools, streaming), /v1/completions, vLLM/SGLang /generate and "
    "/health from a script of rules, seeded and reproducible, with optional latency and "
    "fault injection. Point an environment at the printed base URL to exercise it without "
    "weights or keys. Nothing it says is model output."
)


def _latency(text: str) -> tuple[float, float]:
    """``"A"`` or ``"A-B"`` milliseconds → (min_s, max_s)."""
    try:
        low, _, high = text.partition("-")
        lo_ms = float(low)
        hi_ms = float(high) if high else lo_ms
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--latency-ms expects A or A-B in milliseconds (e.g. 50-200), got {text!r}"
        ) from None
    if lo_ms < 0 or hi_ms < lo_ms:
        raise argparse.ArgumentTypeError(f"--latency-ms needs 0 <= A <= B, got {text!r}")
    return lo_ms / 1000.0, hi_ms / 1000.0


def _kinds(text: str) -> tuple[str, ...]:
    from hermes_replay.scripted_endpoint import FAULT_KINDS

    kinds = tuple(k.strip() for k in text.split(",") if k.strip())
    bad = [k for k in kinds if k not in FAULT_KINDS]
    if bad or not kinds:
        raise argparse.ArgumentTypeError(
            f"--fault-kinds: unknown {bad or text!r}; choose from {','.join(FAULT_KINDS)}"
        )
    return kinds


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("scripted-endpoint", help=HELP, description=DESCRIPTION)
    p.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0 = pick a free one)")
    p.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1)")
    p.add_argument("--script", default="examples", metavar="NAME_OR_PATH",
                   help="a registered script name (default: examples; 'generic' always "
                   "exists) or your own script file, TOML or JSON: rules matched on the "
                   "conversation, replies with text or tool calls (docs/scripted-endpoint.md)")
    p.add_argument("--seed", type=int, default=0, help="seed for every answer (default 0)")
    p.add_argument("--latency-ms", type=_latency, default=(0.0, 0.0), metavar="A[-B]",
                   help="per-request delay, uniform in [A, B] ms (default 0)")
    p.add_argument("--fault-rate", type=float, default=0.0,
                   help="probability that a generation request fails (default 0)")
    p.add_argument("--fault-kinds", type=_kinds, default=("5xx", "timeout", "drop"),
                   metavar="KINDS", help="comma-separated subset of 5xx,timeout,drop")
    p.add_argument("--fault-timeout-s", type=float, default=30.0,
                   help="how long a 'timeout' fault holds the request (default 30)")
    p.add_argument("--raw-tool-format", default="hermes",
                   help="tool-call format for raw text (completions, /generate); default hermes")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from hermes_replay.scripted_endpoint import FaultPlan, ScriptedEndpoint

    try:
        faults = FaultPlan(rate=args.fault_rate, kinds=args.fault_kinds, seed=args.seed,
                           timeout_s=args.fault_timeout_s)
        endpoint = ScriptedEndpoint(script=args.script, seed=args.seed, latency=args.latency_ms,
                                    faults=faults, raw_tool_format=args.raw_tool_format,
                                    host=args.host, port=args.port)
        endpoint.start()
    except (KeyError, ValueError, RuntimeError) as exc:
        message = str(exc.args[0] if isinstance(exc, KeyError) and exc.args else exc)
        print(f"hermes-replay scripted-endpoint: {message.removeprefix('scripted endpoint: ')}",
              file=sys.stderr)  # (the endpoint's own errors begin with its name too)
        return 2
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    print(
        f"scripted endpoint (a stand-in for a model, not a model) script={endpoint.script.name}"
        f"{f' (from {endpoint.script.source})' if endpoint.script.source else ''} "
        f"seed={args.seed}\n  base_url {endpoint.base_url}\n  health   {endpoint.root_url}/health",
        flush=True,
    )
    try:
        while not stop.wait(0.5):  # short waits keep signal handling prompt everywhere
            pass
    finally:
        endpoint.stop()
    return 0

"""``replay DIR --executor local|ray [--ray-address ADDR] [--ray-upload]``: where the
cassettes of a folder run.

``local`` (the default) is this machine: one process, or ``-j N`` worker processes
(``_corpus.processes``). ``ray`` hands each cassette to warm actors of a Ray cluster
(``_corpus.on_ray``; the ``ray`` extra). The flags are parsed here so ``replay`` stays about
what to replay.
"""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["add_executor_args", "check_executor_args", "executor_options"]

RAY_HINT = "pip install 'hermes-replay[ray]'"


def add_executor_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--executor", choices=("local", "ray"), default="local",
        help="local: this machine (-j N processes); ray: each cassette a task on warm actors "
        f"of a Ray cluster (needs the 'ray' extra: {RAY_HINT})")
    p.add_argument(
        "--ray-address", metavar="ADDR", default=None,
        help="with --executor ray: the cluster to join (default: auto — the cluster this "
        "machine is part of, from RAY_ADDRESS or a running `ray start`, else a local one; "
        "local: always a new local one)")
    p.add_argument(
        "--ray-upload", action="store_true",
        help="with --executor ray: ship the project and the cassettes to the workers in "
        "Ray's runtime environment (working_dir) and each cassette's outputs back, for "
        "nodes that do not share this filesystem (default: a shared filesystem — the "
        "paths given here are the paths the workers read and write)")


def check_executor_args(args: argparse.Namespace) -> str | None:
    """Why the executor flags cannot be used together, or None."""
    if args.executor != "ray" and (args.ray_address or args.ray_upload):
        return "--ray-address and --ray-upload go with --executor ray"
    if args.executor == "ray":
        from importlib.util import find_spec

        if find_spec("ray") is None:
            return f"--executor ray needs Ray, which is not installed: {RAY_HINT}"
    return None


def executor_options(args: argparse.Namespace) -> dict[str, Any]:
    """The executor keywords of ``replay_corpus`` the flags give."""
    if args.executor != "ray":
        return {"executor": "local"}
    return {"executor": "ray", "ray_address": args.ray_address, "ray_upload": args.ray_upload}

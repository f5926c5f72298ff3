"""atroposlib's real trajectory API (``run-api``) on 127.0.0.1, with a trainer registered.

``serve`` tests need the trainer side of an Atropos deployment: the API process itself and a
client that registers as a trainer and polls ``/batch`` (the first poll starts the run). This
module starts both the way a deployment does; nothing here stands in for atroposlib.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_http(url: str, deadline: float) -> None:
    while time.monotonic() < deadline:
        try:
            httpx.get(url, timeout=1.0)
            return
        except httpx.HTTPError:
            time.sleep(0.2)
    raise AssertionError(f"{url} did not come up")


def child_env(**extra: str) -> dict[str, str]:
    """This process's environment without keys or endpoints, offline, wandb disabled."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENAI_API_KEY", "OPENROUTER_API_KEY", "HERMES_BASE_URL")}
    env.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
                "WANDB_MODE": "disabled", "WANDB_SILENT": "true",
                "TOKENIZERS_PARALLELISM": "false", "PYTHONUNBUFFERED": "1", **extra})
    return env


def stop(proc: subprocess.Popen | None) -> None:
    if proc is None:
        return
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()


@contextmanager
def trajectory_api(tmp_path: Path, batch_size: int = 8, num_steps: int = 2) -> Iterator[str]:
    """A fresh ``run-api`` with a registered trainer whose run has started; yields its URL."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    api = subprocess.Popen([str(BIN / "run-api"), "--host", "127.0.0.1", "--port", str(port)],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_http(url + "/", time.monotonic() + 30)
        reg = httpx.post(url + "/register", json={
            "wandb_group": "test", "wandb_project": "test", "batch_size": batch_size,
            "max_token_len": 16384, "checkpoint_dir": str(tmp_path / "ckpt"),
            "save_checkpoint_interval": -1, "starting_step": 0, "num_steps": num_steps}).json()
        assert "uuid" in reg, reg
        assert httpx.get(url + "/batch").json()["batch"] is None  # starts the run
        yield url
    finally:
        stop(api)


def pull_batches(url: str, env_proc: subprocess.Popen, count: int = 2,
                 within: float = 120.0) -> list[list[dict]]:
    """Poll ``/batch`` as a trainer does until ``count`` batches came; the env must stay up."""
    batches: list[list[dict]] = []
    deadline = time.monotonic() + within
    while len(batches) < count and time.monotonic() < deadline:
        batch = httpx.get(url + "/batch", timeout=10).json()["batch"]
        if batch:
            batches.append(batch)
        else:
            assert env_proc.poll() is None, env_proc.stdout.read()[-5000:]  # type: ignore[union-attr]
            time.sleep(0.3)
    assert len(batches) == count, "the trainer got no batches in time"
    return batches

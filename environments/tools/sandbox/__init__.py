"""Sandbox backends: where a rollout's tools run. See ``base`` for the interface."""

from .base import (
    BackendNotAvailableError,
    RunResult,
    SandboxBackend,
    active_sandboxes,
    available_backends,
    cleanup_all_sandboxes,
    cleanup_sandbox,
    get_sandbox,
    register_backend,
)
from .docker import DockerSandbox
from .local import LocalSandbox, sandbox_root

__all__ = [
    "BackendNotAvailableError",
    "DockerSandbox",
    "LocalSandbox",
    "RunResult",
    "SandboxBackend",
    "active_sandboxes",
    "available_backends",
    "cleanup_all_sandboxes",
    "cleanup_sandbox",
    "get_sandbox",
    "register_backend",
    "sandbox_root",
]

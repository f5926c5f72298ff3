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
from .isolation import (
    ISOLATION_VAR,
    IsolationUnavailableError,
    SandboxLimits,
    isolation_mode,
)
from .local import IsolatedSandbox, LocalSandbox, sandbox_root

__all__ = [
    "ISOLATION_VAR",
    "BackendNotAvailableError",
    "DockerSandbox",
    "IsolatedSandbox",
    "IsolationUnavailableError",
    "LocalSandbox",
    "RunResult",
    "SandboxBackend",
    "SandboxLimits",
    "active_sandboxes",
    "available_backends",
    "cleanup_all_sandboxes",
    "cleanup_sandbox",
    "get_sandbox",
    "isolation_mode",
    "register_backend",
    "sandbox_root",
]

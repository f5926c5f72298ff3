"""``docker``: a registered name without an implementation in this installation.

``terminal_backend="docker"`` is what configs written for the former layer say, so the name
exists and fails with a message that says what to do instead of a bare "unknown backend".
A real container backend subclasses ``SandboxBackend`` the same way ``LocalSandbox`` does
(one container per task id — never a shared default container) and registers under this name.
"""

from __future__ import annotations

from typing import NoReturn

from .base import BackendNotAvailableError, RunResult, SandboxBackend, register_backend

__all__ = ["DockerSandbox"]


@register_backend
class DockerSandbox(SandboxBackend):
    name = "docker"

    @classmethod
    def create(cls, task_id: str) -> SandboxBackend:
        raise BackendNotAvailableError(
            f"terminal backend 'docker' is not available in this installation (task {task_id!r}). "
            "Use terminal_backend='local', or register a container backend class with "
            "environments.tools.sandbox.register_backend."
        )

    def _never(self) -> NoReturn:  # create() refuses, so no instance ever exists
        raise BackendNotAvailableError("terminal backend 'docker' is not available")

    def run(self, cmd, timeout=None, cwd=None, env=None) -> RunResult:
        self._never()

    def read_file(self, path: str) -> str:
        self._never()

    def write_file(self, path: str, content: str) -> str:
        self._never()

    def upload(self, local_path: str, remote_path: str) -> None:
        self._never()

    def download(self, remote_path: str, local_path: str) -> None:
        self._never()

    def resolve(self, path: str) -> str:
        self._never()

    def cleanup(self) -> None:
        pass

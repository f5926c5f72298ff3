"""The sandbox-backend interface and the per-task sandbox cache.

A sandbox is where one rollout's tools act: a working directory, the processes the agent
started, and their environment. Every task id gets its own sandbox and nothing is shared
between task ids (DESIGN section 4: the former layer mapped all tasks without overrides to one
shared "default" container, so rollouts of a group saw each other's files).

Backends are plain classes registered by name (``register_backend``); ``local`` is the one
that ships, ``docker`` is a registered name that explains it is not available here. A remote
or container backend implements the same handful of methods.

``get_sandbox(task_id)`` creates on first use and then returns the same object, so the agent
loop (during the rollout) and ``ToolContext`` (during scoring) reach the same files and
processes as long as they use the same task id. ``cleanup_sandbox(task_id)`` removes it; a
later ``get_sandbox`` with that id starts from an empty sandbox.
"""

from __future__ import annotations

import abc
import threading
from dataclasses import dataclass
from typing import ClassVar

from environments._definition import definition_of

__all__ = [
    "BackendNotAvailableError",
    "RunResult",
    "SandboxBackend",
    "active_sandboxes",
    "available_backends",
    "cleanup_all_sandboxes",
    "cleanup_sandbox",
    "get_sandbox",
    "register_backend",
]


class BackendNotAvailableError(NotImplementedError):
    """A terminal backend name is known but cannot run in this installation."""


@dataclass(frozen=True)
class RunResult:
    """What one shell command produced.

    ``output`` is stdout and stderr interleaved, already capped (``truncated`` says whether
    anything was cut). A command killed for exceeding its timeout has ``timed_out=True`` and
    exit code 124 (the code coreutils ``timeout`` uses, so shell-savvy models recognise it).
    """

    output: str
    exit_code: int
    timed_out: bool = False
    truncated: bool = False


class SandboxBackend(abc.ABC):
    """One task's sandbox. Subclasses implement the abstract methods for one kind of isolation.

    All methods are blocking and thread-safe enough to be called from the tool thread pool;
    callers on an event loop go through ``run_in_executor`` (the agent loop and
    ``ToolContext.a*`` do). Paths given to the file methods are sandbox paths: relative to
    the working directory, or absolute inside it; anything resolving outside is refused with
    ``PermissionError``.
    """

    #: registry name, e.g. "local"
    name: ClassVar[str] = ""
    #: default per-command timeout in seconds (the agent loop sets ``terminal_timeout`` here)
    default_timeout: float = 120.0

    def __init__(self, task_id: str) -> None:
        self.task_id = task_id

    @classmethod
    def create(cls, task_id: str) -> SandboxBackend:
        """Make a fresh sandbox for ``task_id`` (directories, containers …)."""
        return cls(task_id)

    @abc.abstractmethod
    def run(
        self,
        cmd: str,
        timeout: float | None = None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
    ) -> RunResult:
        """Run a shell command; on timeout kill everything it started and return code 124."""

    @abc.abstractmethod
    def read_file(self, path: str) -> str: ...

    def read_bytes(self, path: str, limit: int | None = None) -> bytes:
        """A file's bytes; backends that read host-side override this to stay bounded and
        never follow links or block (``local``)."""
        return self.read_file(path).encode()

    def read_head(self, path: str, limit: int) -> tuple[bytes, int]:
        """The first ``limit`` bytes of a file and its size in bytes: what a tool that shows
        only the start of a file needs, without holding the rest (``local`` reads no more;
        this default reads the file whole)."""
        data = self.read_file(path).encode()
        return data[:limit], len(data)

    @abc.abstractmethod
    def write_file(self, path: str, content: str) -> str:
        """Write text (creating parent directories); return the sandbox path written."""

    @abc.abstractmethod
    def upload(self, local_path: str, remote_path: str) -> None:
        """Copy a host file or directory into the sandbox."""

    @abc.abstractmethod
    def download(self, remote_path: str, local_path: str) -> None:
        """Copy a sandbox file or directory out to the host."""

    @abc.abstractmethod
    def resolve(self, path: str) -> str:
        """Host path of a sandbox path; ``PermissionError`` if it escapes the sandbox."""

    @abc.abstractmethod
    def cleanup(self) -> None:
        """Kill every process of this sandbox and remove its files. Idempotent."""


_BACKENDS: dict[str, type[SandboxBackend]] = {}
_SANDBOXES: dict[str, SandboxBackend] = {}
_LOCK = threading.Lock()


def register_backend(cls: type[SandboxBackend]) -> type[SandboxBackend]:
    """Class decorator: make a backend available under ``cls.name``. Duplicates are refused."""
    if not cls.name:
        raise ValueError(f"{cls.__qualname__} has no `name`; set the class attribute first")
    old = _BACKENDS.get(cls.name)
    # the same class definition again (its module run twice in one process) replaces the old
    if old is not None and old is not cls and definition_of(old).key != definition_of(cls).key:
        raise ValueError(
            f"terminal backend {cls.name!r} is already registered by "
            f"{definition_of(old).location}; refusing {definition_of(cls).location}. Next step: "
            "give one of them another `name`.")
    _BACKENDS[cls.name] = cls
    return cls


def available_backends() -> list[str]:
    return sorted(_BACKENDS)


def get_sandbox(task_id: str, backend: str | None = None) -> SandboxBackend:
    """The sandbox of ``task_id``, created on first use.

    ``backend=None`` means "whatever this task already has, else local". Asking for a
    different backend than the task already uses is an error: two sandboxes for one task
    would split its files between them.
    """
    if not task_id:
        raise ValueError("task_id must be a non-empty string")
    with _LOCK:
        existing = _SANDBOXES.get(task_id)
        if existing is not None:
            if backend is not None and backend != existing.name:
                raise ValueError(
                    f"task {task_id!r} already has a {existing.name!r} sandbox; it cannot also "
                    f"use {backend!r}. Pass the same terminal_backend to the agent loop and "
                    f"ToolContext."
                )
            return existing
        name = backend or "local"
        cls = _BACKENDS.get(name)
        if cls is None:
            raise ValueError(
                f"unknown terminal backend {name!r}; available: {', '.join(available_backends())}"
            )
        sandbox = cls.create(task_id)
        _SANDBOXES[task_id] = sandbox
        return sandbox


def cleanup_sandbox(task_id: str) -> bool:
    """Remove the sandbox of ``task_id`` if there is one; True if something was removed."""
    with _LOCK:
        sandbox = _SANDBOXES.pop(task_id, None)
    if sandbox is None:
        return False
    sandbox.cleanup()
    return True


def active_sandboxes() -> list[str]:
    """Task ids with a live sandbox (for tests and leak checks)."""
    with _LOCK:
        return sorted(_SANDBOXES)


def cleanup_all_sandboxes() -> None:
    """Remove every sandbox of this process (registered with ``atexit`` by the local backend)."""
    for task_id in active_sandboxes():
        cleanup_sandbox(task_id)

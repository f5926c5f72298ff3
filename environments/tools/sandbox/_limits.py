"""Resource limits of one isolated command."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SandboxLimits"]


@dataclass(frozen=True)
class SandboxLimits:
    """Resource limits of one isolated command (``setrlimit`` inside the sandbox).

    Limits are per process, as rlimits are, except ``processes`` (all processes of the
    sandbox's user) and ``workspace_bytes`` (the whole working directory, checked while the
    command runs). None of them replaces the wall-clock timeout, which kills everything.
    """

    #: CPU seconds per process (SIGXCPU, then SIGKILL one second later)
    cpu_seconds: int = 300
    #: address space per process, bytes
    memory_bytes: int = 4 * 1024**3
    #: processes and threads the sandbox may have at once (a fork bomb stops here)
    processes: int = 256
    #: largest file a process may write, bytes
    file_bytes: int = 512 * 1024**2
    #: open files per process
    open_files: int = 1024
    #: total size of the working directory; past it the command is killed
    workspace_bytes: int = 2 * 1024**3
    #: size of the private ``/tmp`` and ``/dev/shm`` (memory-backed), bytes each
    tmpfs_bytes: int = 64 * 1024**2

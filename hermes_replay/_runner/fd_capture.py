"""The env's file descriptors 1 and 2, captured for a run: scrubbed, and into its log.

Redirecting ``sys.stdout``/``sys.stderr`` catches what an environment prints from Python, but
not what is written below them: ``os.write(1, …)``, ``os.system('echo $OPENAI_API_KEY')``, a
child process, a C library. That output went straight to the terminal, unscrubbed, and was
missing from the env log. While :func:`captured_fds` is active, fds 1 and 2 point at a pipe;
a reader thread scrubs what arrives line by line (the rules of ``_secrets.redact``, the same
``ScrubbingStream`` the Python-level streams use) and hands it to ``write`` (the env log).

The harness's own display must still reach the terminal while the env's fds are captured:
:func:`terminal_stream` wraps a stream (the CLI's progress line writes to ``sys.stderr``,
i.e. fd 2) so that, during a capture, it writes to a duplicate of the fd the process started
with instead of into the env's log.
"""

from __future__ import annotations

import codecs
import io
import os
import select
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TextIO

from hermes_replay._secrets.stream import ScrubbingStream

__all__ = ["captured_fds", "terminal_stream"]

_FDS = (1, 2)
_CHUNK = 1 << 16
_IDLE = 0.05  # seconds without data after the run ended: the pipe is drained
_DRAIN_LIMIT = 2.0  # a child still writing after the run cannot hold the run open longer

# fd -> a text stream on a duplicate of what that fd was before the outermost capture
_TERMINALS: dict[int, TextIO] = {}


def _flush_python_streams() -> None:
    """Text buffered in Python's own streams belongs on the side of the switch it was
    written on (the terminal before the capture, the log during it)."""
    for stream in {id(s): s for s in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__)
                   if s is not None}.values():
        try:
            stream.flush()
        except (OSError, ValueError):  # closed, or a stream that cannot flush
            pass


class _Reader(threading.Thread):
    """Reads the pipe until the run is over and the pipe stays quiet (or ends), passing
    scrubbed text on. It never writes to fds 1/2 itself (that would feed its own pipe)."""

    def __init__(self, fd: int, write: Callable[[str], Any]) -> None:
        super().__init__(name="hermes-replay-fd-capture", daemon=True)
        self.fd = fd
        self.stopping = threading.Event()
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._out = ScrubbingStream(_Writer(write))

    def run(self) -> None:
        poller = select.poll()
        poller.register(self.fd, select.POLLIN | select.POLLHUP | select.POLLERR)
        deadline: float | None = None
        try:
            while True:
                if self.stopping.is_set() and deadline is None:
                    deadline = _now() + _DRAIN_LIMIT
                if deadline is not None and _now() > deadline:
                    break
                if not poller.poll(_IDLE * 1000):
                    if self.stopping.is_set():
                        break  # run over, nothing more in the pipe
                    continue
                data = os.read(self.fd, _CHUNK)
                if not data:
                    break  # every writer is gone
                self._out.write(self._decoder.decode(data))
            self._out.write(self._decoder.decode(b"", final=True))
            self._out.drain()
        except Exception:  # losing log text must never break or hang a run
            pass


class _Writer(io.TextIOBase):
    def __init__(self, write: Callable[[str], Any]) -> None:
        super().__init__()
        self._write = write

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self._write(text)
        return len(text)


def _now() -> float:
    import time

    return time.monotonic()


@contextmanager
def captured_fds(write: Callable[[str], Any]) -> Iterator[None]:
    """Inside the block fds 1 and 2 (inherited by child processes) go to a pipe whose text,
    scrubbed, goes to ``write``; after it they are what they were. If the fds cannot be
    duplicated (closed in a daemon), the block runs uncaptured."""
    try:
        saved = {fd: os.dup(fd) for fd in _FDS}  # non-inheritable: children never get them
    except OSError:
        yield
        return
    read_end, write_end = os.pipe()
    reader = _Reader(read_end, write)
    added: list[int] = []
    for fd in _FDS:
        if fd not in _TERMINALS:  # nested: the outer capture's terminal stays the terminal
            _TERMINALS[fd] = open(  # closed when this capture ends
                saved[fd], "w", encoding="utf-8", errors="backslashreplace", closefd=False,
                buffering=1)
            added.append(fd)
    _flush_python_streams()
    try:
        for fd in _FDS:
            os.dup2(write_end, fd)
        os.close(write_end)
        reader.start()
        yield
    finally:
        _flush_python_streams()
        for fd in _FDS:
            os.dup2(saved[fd], fd)
        reader.stopping.set()
        if reader.is_alive():
            reader.join(_DRAIN_LIMIT + 1)
        for fd in added:
            _TERMINALS.pop(fd).close()
        for fd in saved.values():
            os.close(fd)
        if not reader.is_alive():  # else it still polls it: leave it to the process' end
            os.close(read_end)


class _TerminalStream(io.TextIOBase):
    """``stream``, except that during a capture of its fd it writes to the fd's duplicate."""

    def __init__(self, stream: TextIO) -> None:
        super().__init__()
        self._stream = stream
        try:
            self._fd: int | None = stream.fileno()
        except (AttributeError, OSError, ValueError):  # a StringIO, a pytest capture
            self._fd = None

    def _target(self) -> TextIO:
        if self._fd is not None and self._fd in _TERMINALS:
            return _TERMINALS[self._fd]
        return self._stream

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        return self._target().write(text)

    def flush(self) -> None:
        self._target().flush()

    def isatty(self) -> bool:
        return self._target().isatty()

    def fileno(self) -> int:
        return self._target().fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self._stream, "encoding", None) or "utf-8"


def terminal_stream(stream: TextIO) -> TextIO:
    """``stream`` as the harness's display uses it: still the terminal while a run's fds 1
    and 2 are captured (``captured_fds``)."""
    return _TerminalStream(stream)  # type: ignore[return-value]

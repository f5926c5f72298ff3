"""A text stream that scrubs what passes through it, a line at a time.

Used wherever a live run's text goes somewhere a person or a disk sees it: the env's Python
streams (``_runner.scrub_outputs.scrubbed_streams``) and its captured file descriptors
(``_runner.fd_capture``). It lives with the rules, below every room that writes output.
"""

from __future__ import annotations

import io
from typing import Any

from hermes_replay._secrets.redact import redact_text

__all__ = ["ScrubbingStream"]

_MAX_BUFFER = 1 << 16


class ScrubbingStream(io.TextIOBase):
    """A text stream that scrubs each line before passing it on.

    Text is held until a line ends (``\\n`` or ``\\r``) so a key written in two ``write``
    calls is still seen whole; ``flush`` does not emit a partial line (it could end inside
    a key) unless the line grows past 64 KB.
    """

    def __init__(self, target: Any) -> None:
        super().__init__()
        self.target = target
        self._pending = ""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self._pending += text
        cut = max(self._pending.rfind("\n"), self._pending.rfind("\r"))
        if cut >= 0:
            self._emit(self._pending[: cut + 1])
            self._pending = self._pending[cut + 1:]
        elif len(self._pending) > _MAX_BUFFER:
            self._emit(self._pending)
            self._pending = ""
        return len(text)

    def _emit(self, text: str) -> None:
        self.target.write(redact_text(text))

    def flush(self) -> None:
        self.target.flush()

    def drain(self) -> None:
        if self._pending:
            self._emit(self._pending)
            self._pending = ""
        self.target.flush()

    def isatty(self) -> bool:
        return bool(getattr(self.target, "isatty", lambda: False)())

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.target, "encoding", "utf-8")

    def fileno(self) -> int:
        return int(self.target.fileno())

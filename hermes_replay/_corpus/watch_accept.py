"""``watch``'s accept key: the current rewards become the baseline, so the next save shows
only what is new.

Each verdict compares with the accepted baseline (``_corpus/baseline.py``): the project's
reward snapshot of the cassette, else the recording. Pressing ``a`` accepts every reward the
last verdicts showed as moved:

* where the baseline is a snapshot file, the file is rewritten with the last run's snapshot
  text (what ``pytest --snapshot-update`` would write for the same replay), only when it holds
  the same rollouts — anything else is left to pytest, and said;
* where it is the recording, the rewards are accepted for the rest of this watch (a cassette
  is the recorded truth and is never rewritten); the line says how to keep them: a snapshot.

Keys are read on a thread, one byte at a time: on a terminal in cbreak mode (no Enter
needed; the terminal's mode is restored when the watch ends), from a pipe as written.
"""

from __future__ import annotations

import os
import queue
import sys
import threading
from contextlib import suppress
from pathlib import Path
from typing import Any

from hermes_replay._corpus.baseline import Baseline, changes
from hermes_replay._runner.snapshot_text import snapshot_table

__all__ = ["ACCEPT_KEY", "Acceptance", "KeyReader"]

ACCEPT_KEY = "a"
IN_THIS_WATCH = "rewards of this watch"


class Acceptance:
    """The last verdict of each cassette, and rewards accepted in this watch."""

    def __init__(self) -> None:
        self.latest: dict[Path, Any] = {}  # cassette -> its last Replayed
        self.accepted: dict[Path, dict[str, float | None]] = {}

    def seen(self, cassette: Path, replayed: Any) -> None:
        """Note a verdict; where this watch accepted rewards (and no snapshot is the
        baseline), its ``changed`` is against them."""
        summary = replayed.summary
        mine = self.accepted.get(cassette)
        if mine is not None and not summary.baseline and replayed.rewards:
            summary.changed = changes(Baseline(mine, IN_THIS_WATCH), replayed.rewards)
            summary.baseline = IN_THIS_WATCH
        self.latest[cassette] = replayed

    def accept(self, name: Any) -> list[str]:
        """Accept the moved rewards of the last verdicts; one line per cassette."""
        out: list[str] = []
        for cassette, replayed in self.latest.items():
            summary = replayed.summary
            if not summary.changed:
                continue
            shown = name(cassette)
            if summary.baseline_file:
                out.append(_rewrite(Path(summary.baseline_file), replayed, shown))
            elif replayed.rewards:
                self.accepted[cassette] = dict(replayed.rewards)
                summary.changed = {}
                out.append(f"accepted {shown}: {len(replayed.rewards)} reward(s) for the rest "
                           "of this watch (the cassette keeps its recorded ones; a reward "
                           "snapshot test keeps them: docs/pytest.md)")
        return out or ["nothing to accept: no reward moved in the last verdicts"]


def _rewrite(path: Path, replayed: Any, shown: str) -> str:
    """The snapshot file rewritten from the last run, when it holds the same rollouts."""
    text = replayed.snapshot
    try:
        old = path.read_text(encoding="utf-8")
    except OSError as exc:
        return f"not accepted {shown}: cannot read {path} ({exc})"
    if text is None or set(snapshot_table(old)[0]) != set(snapshot_table(text)[0]):
        return (f"not accepted {shown}: {path} holds other rollouts than this run; accept with "
                "`pytest --snapshot-update` (it re-runs the test that wrote it)")
    tmp = path.with_name(f".{path.name}.accepting")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    replayed.summary.changed = {}
    return f"accepted {shown}: {path} rewritten with this run's rewards (commit it)"


class KeyReader:
    """Keys typed while the watch runs, on a thread (see the module docstring)."""

    def __init__(self, stream: Any = None) -> None:
        self.keys: queue.Queue[str] = queue.Queue()
        self._stream = stream if stream is not None else sys.stdin
        self._saved: Any = None
        self._fd: int | None = None

    def start(self) -> None:
        try:
            fd = self._stream.fileno()
        except (AttributeError, OSError, ValueError):
            return  # no stdin (a service, a closed stream): no keys
        self._fd = fd
        if os.isatty(fd):
            import termios
            import tty

            with suppress(termios.error):
                self._saved = termios.tcgetattr(fd)
                tty.setcbreak(fd)
        threading.Thread(target=self._read, name="hermes-replay-watch-keys",
                         daemon=True).start()

    def _read(self) -> None:
        assert self._fd is not None
        while True:
            try:
                data = os.read(self._fd, 1)
            except OSError:
                return
            if not data:
                return
            self.keys.put(data.decode("latin-1"))

    def pressed(self, key: str) -> bool:
        """Whether ``key`` was typed since the last look (other keys are dropped)."""
        hit = False
        while True:
            try:
                hit = self.keys.get_nowait().lower() == key or hit
            except queue.Empty:
                return hit

    def close(self) -> None:
        if self._saved is not None and self._fd is not None:
            import termios

            with suppress(termios.error):
                termios.tcsetattr(self._fd, termios.TCSADRAIN, self._saved)
            self._saved = None

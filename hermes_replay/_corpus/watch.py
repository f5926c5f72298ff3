"""``hermes-replay watch``'s engine: one warm process imports the environment stack once
(``_runner.warm``), the project's folders are watched (``watchfiles``), and each save replays
the cassettes it affects (``watch_plan``) in forks of the warm process (``watch_run``), each
with the verdict ``hermes-replay replay CASSETTE`` would give.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hermes_replay._corpus.summary import status
from hermes_replay._corpus.watch_accept import ACCEPT_KEY, Acceptance, KeyReader
from hermes_replay._runner.options import RunOptions
from hermes_replay._terminal.render import Style

__all__ = ["Watcher", "heaviest_first"]


class Watcher:
    """The watch loop: a warm process, the project's folders watched, and the cassettes a
    save affects replayed in forks of it (``jobs`` at once); ``say`` hears each line."""

    def __init__(self, plan: Any, out: Path, jobs: int, options: RunOptions, *, poll: bool,
                 style: Style, say: Callable[[str], None] | None = None) -> None:
        from hermes_replay._corpus.watch_run import STACK, warm_up
        from hermes_replay._runner.warm import WarmProcess

        self.plan, self.out, self.jobs, self.options = plan, out, jobs, options
        self.poll, self.style = poll, style
        self._say = say or (lambda text: print(text, flush=True))
        self.warm = WarmProcess(STACK, user_roots=[plan.root], warmup=(warm_up, ()))
        self.acceptance = Acceptance()
        self.keys = KeyReader()
        self.costs: dict[Path, float] = {}  # each cassette's CPU seconds in its last run

    def close(self) -> None:
        self.keys.close()
        self.warm.close()

    def accept(self) -> None:
        """The accept key: the moved rewards of the last verdicts become the baseline."""
        for line in self.acceptance.accept(self.plan.name):
            self.say(self.style(line, "bold"))

    def say(self, text: str = "") -> None:
        self._say(text)

    def loop(self) -> None:
        self.warm.start()
        n = len(self.plan.cassettes)
        self.say(f"hermes-replay watch: {n} cassette(s) from {self._shown(self.plan.target)}; "
                 f"watching the Python files and cassettes under {self.plan.root}")
        started = time.perf_counter()
        self.warm.wait_ready()
        self.say(self.style(f"environment stack imported once in "
                            f"{time.perf_counter() - started:.1f} s; `{ACCEPT_KEY}` accepts the "
                            "rewards that moved, Ctrl-C stops", "dim"))
        self.keys.start()
        first = True
        while True:  # a new folder (say a new cassette's) restarts the watch to include it
            if not self._watch_until_new_folder(first):
                return
            first = False

    def _watch_until_new_folder(self, first: bool) -> bool:
        """Watch until Ctrl-C (False) or a new folder appears (True). The watcher is made
        before the first run and kept between runs, so a save while a run goes is not lost."""
        from watchfiles import Change
        from watchfiles.main import RustNotify  # watch()'s own engine, made before any run

        from hermes_replay._corpus.watch_plan import watched_dirs

        dirs = [str(d) for d in watched_dirs(self.plan.root, [self.plan.folder], skip=[self.out])]
        with RustNotify(dirs, False, self.poll, 100, False, True) as notify:
            if first:
                self.replay(self.plan.cassettes, time.perf_counter(), "for the first run")
            while True:
                raw = notify.watch(1600, 50, 1000, None)  # a save's events, 50 ms apart
                if raw == "signal":
                    raise KeyboardInterrupt
                if raw == "stop":
                    return False
                if self.keys.pressed(ACCEPT_KEY):
                    self.accept()
                if raw == "timeout":
                    continue
                seen = time.perf_counter()
                changes = {(Change(c), p) for c, p in raw if _relevant(Change(c), p)}
                new_dir = any(c == Change.added and Path(p).is_dir() for c, p in changes)
                # by what is on disk now: an editor's atomic save deletes and re-adds a file
                files = {Path(p) for _, p in changes if not Path(p).is_dir()}
                saved = sorted(p for p in files if p.exists())
                removed = sorted(p for p in files if not p.exists())
                self.on_change(saved, removed, seen)
                if new_dir:
                    return True

    def on_change(self, saved: list[Path], removed: list[Path], seen: float) -> None:
        from hermes_replay._corpus.watch_plan import syntax_error

        if not saved and not removed:
            return
        names = ", ".join(self._shown(p) for p in [*saved, *removed][:4])
        more = len(saved) + len(removed) - 4
        self.say()
        self.say(self.style(f"{time.strftime('%H:%M:%S')} changed: {names}"
                            + (f" and {more} more" if more > 0 else ""), "bold"))
        broken = [e for p in saved if p.suffix == ".py" and (e := syntax_error(p))]
        if broken:
            for text in broken:
                self.say(f"{self.style('SYNTAX', 'red')}  {self._indent(text)}")
            self.say(self.style("nothing replayed; waiting for the next save", "dim"))
            return
        affected = self.plan.affected(saved, removed)
        if not affected:
            self.say(self.style("no watched cassette's run imports it; nothing to replay",
                                "dim"))
            return
        self.replay(affected, seen, None)

    def replay(self, cassettes: list[Path], seen: float, label: str | None) -> None:
        from hermes_replay._corpus.watch_run import died_lines, replay_in_child, verdict_lines
        from hermes_replay._runner.warm import WarmProcessDied

        here, environ = str(Path.cwd()), dict(os.environ)
        calls = [(c, replay_in_child,
                  (str(c), str(self.out / self._slug(c)), here, environ, [str(self.plan.root)],
                   self.options)) for c in heaviest_first(cassettes, self.costs)]
        tally: dict[str, int] = {}
        cpu = 0.0
        try:
            for done in self.warm.run(calls, parallel=self.jobs):
                name = self.plan.name(done.key)
                if done.error is not None:
                    lines, word = died_lines(name, done.error, self.style), "error"
                else:
                    self.plan.ran(done.key, done.value.imported)
                    self.acceptance.seen(done.key, done.value)
                    lines = verdict_lines(name, done.value, done.seconds, self.style)
                    word = _WORDS[status(done.value.summary)]
                tally[word] = tally.get(word, 0) + 1
                cpu += done.cpu
                self.costs[done.key] = done.cpu
                self.say("\n".join(lines))
        except WarmProcessDied as exc:  # out of memory, killed: start a new one for next time
            self.say(f"{self.style('ERROR', 'red')}   {exc}; starting a new warm process")
            self.warm.close()
            self.warm.start()
            return
        counts = ", ".join(f"{v} {k}" for k, v in sorted(tally.items()))
        what = label or "after the save"
        self.say(self.style(f"{len(cassettes)} cassette(s): {counts} · "
                            f"{time.perf_counter() - seen:.2f} s {what} · {cpu:.2f} s CPU · "
                            "waiting for changes",
                            "dim"))

    def _slug(self, cassette: Path) -> str:
        return self.plan.name(cassette).replace("/", "__")

    def _shown(self, path: Path) -> str:
        try:
            return path.resolve().relative_to(Path.cwd().resolve()).as_posix() or "."
        except ValueError:
            return str(path)

    @staticmethod
    def _indent(text: str) -> str:
        return text.replace("\n", "\n        ")


# the tally's word for each status (``summary.status``: the one judge of a row)
_WORDS = {"skip": "skipped", "MISS": "missed", "ERROR": "error", "CHANGED": "changed",
          "ok": "ok"}


def _relevant(change: Any, path: str) -> bool:
    """Python files, cassettes and new folders worth watching; never editors' temp files,
    bytecode or a run's ``__pycache__``."""
    from hermes_replay._corpus.watch_plan import is_cassette_name, worth_watching

    name = Path(path).name
    if name.startswith((".", "#")) or name.endswith("~"):
        return False
    if Path(path).is_dir():
        return worth_watching(Path(path))
    return path.endswith(".py") or is_cassette_name(path)


def heaviest_first(cassettes: list[Path], costs: dict[Path, float]) -> list[Path]:
    """The order to hand a save's cassettes out in: the costliest first. Workers take the next
    cassette as they free up and the save waits for the last one, so a heavy one handed out
    last keeps one worker busy while the others sit idle (longest first bounds that wait by the
    lightest). The cost is a cassette's CPU seconds in its last run (``costs``); one never run
    yet goes first, the biggest on disk first (a cassette's size grows with its requests)."""
    def size(cassette: Path) -> int:
        try:
            return cassette.stat().st_size
        except OSError:
            return 0

    unknown = [c for c in cassettes if c not in costs]
    known = [c for c in cassettes if c in costs]
    return sorted(unknown, key=lambda c: -size(c)) + sorted(known, key=lambda c: -costs[c])

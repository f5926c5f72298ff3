"""Which folders' code a cassette may choose to run: the folders the user trusts.

A cassette's header names the env file its replay re-runs. The cassette is data from outside
(a pull request, a download, an edit by hand), so the name alone never decides what runs:
the file is looked for only inside a folder the user has trusted, by one of these acts —

- ``hermes-replay trust DIR`` (kept in ``trusted-projects`` under the config folder:
  ``$HERMES_REPLAY_HOME``, else ``$XDG_CONFIG_HOME/hermes-replay``, else
  ``~/.config/hermes-replay``), like ``direnv allow`` or git's ``safe.directory``;
- ``HERMES_REPLAY_TRUST`` (folders joined by ``os.pathsep``), for CI: one line;
- recording there: ``hermes-replay record`` trusts the project it ran the user's code in;
- installing it: the source folder of a distribution installed from a local folder into
  this Python (``pip install -e .``, read from PEP 610's ``direct_url.json``) — the user has
  already run its build; a fresh clone that is installed replays with no extra step;
- running its tests: the pytest plugin trusts the session's rootdir (its ``conftest.py``
  runs anyway).

A folder in the trust list is the folder that was trusted, not its name (issue 46): each
entry, one JSON object a line (never a bare path, so no name can hold a second entry), keeps
its owner and identity (``st_dev``, ``st_ino``); a folder no longer owned by the user, or
deleted and made again since, is not trusted until ``hermes-replay trust DIR`` is run again.
A folder owned by another user is never added, and a path holding a control character never
is. Entries of the old format (one path a line) are read with the owner check and rewritten
with their identity the next time the list is written.

Nothing here looks at neighbouring folders: what else lies above a project (a stray cassette
in ``/tmp``, a marker file) never changes the answer. Trust is by folder, exactly: a folder
inside a trusted one is not trusted itself as a *root* (``plan.find_env_file`` looks a name
up from each trusted root, so a downloaded folder inside a trusted project, with its own
marker, is not a root a cassette can resolve from).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from urllib.parse import unquote, urlparse

__all__ = ["TRUST_VARIABLE", "TrustRefused", "add_trusted", "config_dir", "listing",
           "stale_reason", "trust_for_process", "trust_reason", "trust_recorded",
           "trusted_roots", "vouched_since", "with_trusted_roots"]

TRUST_VARIABLE = "HERMES_REPLAY_TRUST"
HOME_VARIABLE = "HERMES_REPLAY_HOME"
_FILE_NAME = "trusted-projects"
_MAX_ENTRIES = 10_000  # the file is the user's own; still, reading it stays bounded
_process_roots: dict[Path, str] = {}
_process_vouched: dict[Path, int] = {}  # folder -> when this process vouched for its files


class TrustRefused(OSError):
    """A folder that is not trusted by an act of the user's: owned by another user, a path
    holding a control character, the home folder or ``/`` taken implicitly, or no place to
    keep the list. An ``OSError``, so a recording that cannot trust its project says so and
    goes on; ``strerror`` is the whole message, next step included."""

    def __init__(self, message: str) -> None:
        super().__init__(errno.EPERM, message)


def _home() -> Path | None:
    """The user's home folder, or None: ``HOME`` unset and a uid with no passwd entry (an
    arbitrary-uid container, ``env -i``) has none, and replay needs none."""
    try:
        return Path.home()
    except (RuntimeError, KeyError, OSError):
        return None


def config_dir() -> Path | None:
    """Where hermes-replay keeps the user's settings (only the trust list, so far); None
    when no folder is named and there is no home folder to keep it in."""
    home = os.environ.get(HOME_VARIABLE)
    if home:
        return Path(home)
    xdg = os.environ.get("XDG_CONFIG_HOME")
    if xdg and Path(xdg).is_absolute():
        return Path(xdg) / "hermes-replay"
    user_home = _home()
    return None if user_home is None else user_home / ".config" / "hermes-replay"


def _trust_file() -> Path | None:
    where = config_dir()
    return None if where is None else where / _FILE_NAME


def _control_character(text: str) -> str | None:
    return next((ch for ch in text if ord(ch) < 32 or ord(ch) == 127), None)


@dataclass(frozen=True)
class _Entry:
    """One folder of the trust list: its path, and who owned it and which folder it was
    when it was trusted (None for an entry of the old one-path-a-line format)."""

    path: Path
    uid: int | None = None
    dev: int | None = None
    ino: int | None = None
    # when ``hermes-replay trust`` vouched for the files the folder held (ns; None: trusted
    # by a recording, which vouches only for the cassettes it seals: ``_runner/vouch.py``)
    since: int | None = None

    def to_json(self) -> str:
        return json.dumps({"path": str(self.path), "uid": self.uid, "dev": self.dev,
                           "ino": self.ino, "since": self.since}, ensure_ascii=True)

    def same_folder(self, other: _Entry) -> bool:
        return (self.path, self.uid, self.dev, self.ino) == \
            (other.path, other.uid, other.dev, other.ino)

    def problem(self) -> str | None:
        """Why this entry no longer trusts its folder, or None."""
        try:
            st = os.stat(self.path)
        except OSError:
            return "it no longer exists"
        if st.st_uid != os.geteuid():
            return f"it is now owned by uid {st.st_uid}, not by you (uid {os.geteuid()})"
        if self.uid is not None and (st.st_dev, st.st_ino) != (self.dev, self.ino):
            return "it was deleted and made again since you trusted it"
        return None


def _entry_of(folder: Path, since: int | None = None) -> _Entry:
    st = os.stat(folder)
    return _Entry(folder, st.st_uid, st.st_dev, st.st_ino, since)


def _parse(line: str) -> _Entry | None:
    """One line of the trust file: a JSON object (this format), or a path (the old one:
    only its line end taken off — never other whitespace, which is part of a name)."""
    if line.startswith("{"):
        try:
            raw = json.loads(line)
        except ValueError:
            return None
        if not isinstance(raw, dict) or not isinstance(raw.get("path"), str):
            return None
        ids = [raw.get(k) for k in ("uid", "dev", "ino")]
        if not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
            return None
        text, (uid, dev, ino) = raw["path"], ids
        since = raw.get("since") if isinstance(raw.get("since"), int) else None
    else:
        text, uid, dev, ino, since = line.rstrip("\r\n"), None, None, None, None
    if not text or text.startswith("#") or _control_character(text) \
            or not Path(text).is_absolute():
        return None
    return _Entry(Path(text), uid, dev, ino, since)


def _read_file(path: Path | None) -> list[_Entry]:
    if path is None:
        return []
    try:
        with path.open(encoding="utf-8", errors="replace", newline="") as handle:
            lines = [line for _, line in zip(range(_MAX_ENTRIES), handle, strict=False)]
    except OSError:
        return []
    return [e for e in map(_parse, lines) if e is not None]


def _from_variable() -> list[Path]:
    raw = os.environ.get(TRUST_VARIABLE, "")
    return [Path(part).resolve() for part in raw.split(os.pathsep) if part.strip()]


@lru_cache(maxsize=1)
def _installed_sources() -> tuple[Path, ...]:
    """Source folders of distributions installed from a local folder (editable or not).
    Asked once per process: what is installed does not change during a run."""
    from importlib import metadata

    found: list[Path] = []
    for dist in metadata.distributions():
        try:
            raw = dist.read_text("direct_url.json")
        except Exception:  # a broken dist-info must not stop a replay
            continue
        if not raw:
            continue
        try:
            info = json.loads(raw)
        except ValueError:
            continue
        url = info.get("url") if isinstance(info, dict) else None
        if not isinstance(url, str) or "dir_info" not in info:
            continue
        parsed = urlparse(url)
        if parsed.scheme == "file" and parsed.path:
            found.append(Path(unquote(parsed.path)).resolve())
    return tuple(found)


def _sources() -> Iterator[tuple[Path, str]]:
    for path in _from_variable():
        yield path, f"listed in ${TRUST_VARIABLE}"
    for path, why in _process_roots.items():
        yield path, why
    trust_file = _trust_file()
    for entry in _read_file(trust_file):
        if entry.problem() is None:
            yield entry.path, f"trusted in {trust_file}"
    for path in _installed_sources():
        yield path, "installed into this Python from this folder (pip install -e)"


def trusted_roots() -> list[Path]:
    """Every folder whose environment files a cassette may name, each once."""
    seen: dict[Path, None] = {}
    for path, _ in _sources():
        seen.setdefault(path, None)
    return list(seen)


def with_trusted_roots(environ: dict[str, str]) -> dict[str, str]:
    """``environ`` for a worker (a ``-j`` process, a Ray actor) with what this process trusts
    as its one list: a worker has neither this process's own roots (the pytest plugin's) nor,
    on another node, this user's trust file or this Python's installs."""
    return {**environ, TRUST_VARIABLE: os.pathsep.join(str(p) for p in trusted_roots())}


def trust_reason(folder: Path) -> str | None:
    """Why ``folder`` (exactly) is trusted, or None if it is not."""
    folder = folder.resolve()
    return next((why for path, why in _sources() if path == folder), None)


def stale_reason(folder: Path) -> str | None:
    """Why ``folder``, listed in the trust file, is no longer trusted by it (with the next
    step), or None."""
    folder = folder.resolve()
    for entry in _read_file(_trust_file()):
        problem = entry.problem() if entry.path == folder else None
        if problem is not None:
            return (f"{folder} was trusted, but {problem}; if it is still your project, "
                    f"trust it again: hermes-replay trust {folder}")
    return None


def listing() -> list[str]:
    """``trust --list``: each trusted folder and why, then each listed one no longer
    trusted and why not."""
    lines = [f"{folder}  ({trust_reason(folder)})" for folder in trusted_roots()]
    for entry in _read_file(_trust_file()):
        problem = entry.problem()
        if problem is not None:
            lines.append(f"{entry.path}  (NOT trusted: {problem}; hermes-replay trust "
                         f"{entry.path} to trust it again)")
    return lines


def trust_for_process(folder: Path, why: str, vouch: bool = False) -> None:
    """Trust ``folder`` for this process only (the pytest plugin: its rootdir); ``vouch``:
    for the files it holds now, too (``_runner/vouch.py``), as ``hermes-replay trust``."""
    import time

    folder = folder.resolve()
    _process_roots.setdefault(folder, why)
    if vouch:
        _process_vouched[folder] = time.time_ns()  # each session: what it holds now


def _refusal(folder: Path) -> str | None:
    """Why ``folder`` may not be added to the trust list, or None."""
    bad = _control_character(str(folder))
    if bad is not None:
        return (f"the path {str(folder).encode('unicode_escape').decode('ascii')} holds a "
                f"control character ({bad!r}); no project folder is named so. Next step: "
                "rename the folder")
    owner = os.stat(folder).st_uid
    if owner != os.geteuid():
        return (f"{folder} is owned by uid {owner}, not by you (uid {os.geteuid()}): its files "
                "may change without you. Next step: copy the project into a folder of your "
                f"own, or, for this run only: HERMES_REPLAY_TRUST={folder}")
    return None


def vouched_since(folder: Path) -> int | None:
    """When ``hermes-replay trust`` last vouched for the files ``folder`` holds (ns since the
    epoch), if the list still trusts it; else None."""
    folder = folder.resolve()
    if folder in _process_vouched:
        return _process_vouched[folder]
    return next((e.since for e in _read_file(_trust_file())
                 if e.path == folder and e.since is not None and e.problem() is None), None)


def add_trusted(folder: Path, vouch: bool = True) -> tuple[Path, bool]:
    """Keep ``folder`` in the user's trust list; returns (the file, whether it was new or
    trusted again). ``vouch``: the user's own ``trust`` vouches for the files the folder
    holds now (``_runner/vouch.py``); a recording does not. Written whole to a temporary
    file and renamed, under a lock, so two recordings at once never lose an entry and a
    crash never leaves half a list. Raises
    ``TrustRefused`` for a folder that may not be trusted or when there is no config folder,
    ``OSError`` when the list cannot be written."""
    import fcntl
    import tempfile

    folder = folder.resolve()
    refused = _refusal(folder)
    if refused is not None:
        raise TrustRefused(refused)
    path = _trust_file()
    if path is None:
        raise TrustRefused(
            "there is no folder to keep the trust list in: HOME is not set and this user "
            f"(uid {os.geteuid()}) has no home folder. Next step: set {HOME_VARIABLE}=DIR (a "
            f"folder of yours), or list the project in {TRUST_VARIABLE}")
    import time

    entry = _entry_of(folder, time.time_ns() if vouch else None)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.parent / f".{_FILE_NAME}.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        current = _read_file(path)
        known = next((e for e in current if e.same_folder(entry)), None)
        if known is not None and not vouch:
            return path, False  # a recording in a folder already trusted changes nothing
        new = known is None
        # the same folder again (made again, or an old-format entry): its identity now
        kept = [e for e in current if e.path != folder]
        # an old-format entry gains the identity of the folder it names now, if it may
        kept = [_entry_of(e.path) if e.uid is None and e.problem() is None else e
                for e in kept]
        text = "".join(f"{e.to_json()}\n" for e in [*kept, entry])
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{_FILE_NAME}.")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write("# folders whose environment files cassettes may run "
                             "(hermes-replay trust), one JSON object a line\n" + text)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    return path, new


def trust_recorded(env_file: Path, recorded_name: str) -> str | None:
    """A recording (``record``, ``probe``) runs the user's code in its project, so replays of
    its cassettes may run it again: the folder the header's ``env_file`` name is relative to
    (the project root, as ``recorded_env_fields`` names it) becomes trusted — never the home
    folder or ``/`` (a recording run from there, of a file in no project, trusts nothing).
    Returns what to tell the user (None: nothing new). Never raises: a trust list that
    cannot be written costs a warning, never the recording."""
    rel = Path(recorded_name)
    if rel.is_absolute() or ".." in rel.parts or not rel.parts:
        return None
    base = env_file.resolve().parents[len(rel.parts) - 1]
    home = _home()
    what = "the filesystem root" if base == Path(base.anchor) else \
        "your home folder" if home is not None and base == home.resolve() else None
    if what is not None:
        return (f"warning: {base} was not trusted: it is {what}, not a project. Replays of "
                "this cassette will ask you to trust the project once: keep the "
                "environment in a project folder (with a pyproject.toml or a .git) and "
                "record from there, or run hermes-replay trust DIR")
    try:
        trust_file, new = add_trusted(base, vouch=False)
    except OSError as exc:
        return (f"warning: could not keep {base} in the trust list ({exc.strerror or exc}); "
                "replays of its cassettes will ask you to run `hermes-replay trust DIR` once")
    if not new:
        return None
    return (f"trusted {base}: cassettes may name its environment files (kept in "
            f"{trust_file}; see `hermes-replay trust --list`)")

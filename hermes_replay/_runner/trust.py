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

Nothing here looks at neighbouring folders: what else lies above a project (a stray cassette
in ``/tmp``, a marker file) never changes the answer. Trust is by folder, exactly: a folder
inside a trusted one is not trusted itself as a *root* (``plan.find_env_file`` looks a name
up from each trusted root, so a downloaded folder inside a trusted project, with its own
marker, is not a root a cassette can resolve from).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path
from urllib.parse import unquote, urlparse

__all__ = ["TRUST_VARIABLE", "add_trusted", "config_dir", "trust_for_process",
           "trust_reason", "trust_recorded", "trusted_roots", "with_trusted_roots"]

TRUST_VARIABLE = "HERMES_REPLAY_TRUST"
HOME_VARIABLE = "HERMES_REPLAY_HOME"
_FILE_NAME = "trusted-projects"
_MAX_ENTRIES = 10_000  # the file is the user's own; still, reading it stays bounded
_process_roots: dict[Path, str] = {}


def config_dir() -> Path:
    """Where hermes-replay keeps the user's settings (only the trust list, so far)."""
    home = os.environ.get(HOME_VARIABLE)
    if home:
        return Path(home)
    xdg = os.environ.get("XDG_CONFIG_HOME")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".config"
    return base / "hermes-replay"


def _trust_file() -> Path:
    return config_dir() / _FILE_NAME


def _read_file(path: Path) -> list[Path]:
    try:
        with path.open(encoding="utf-8", errors="replace") as handle:
            lines = [line.strip() for _, line in zip(range(_MAX_ENTRIES), handle, strict=False)]
    except OSError:
        return []
    # resolved as the folders they are compared with are (a hand-written entry may hold a
    # link or a trailing slash)
    return [Path(line).resolve() for line in lines
            if line and not line.startswith("#") and Path(line).is_absolute()]


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
    for path in _read_file(trust_file):
        yield path, f"trusted in {trust_file}"
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


def trust_for_process(folder: Path, why: str) -> None:
    """Trust ``folder`` for this process only (the pytest plugin: its rootdir)."""
    _process_roots.setdefault(folder.resolve(), why)


def add_trusted(folder: Path) -> tuple[Path, bool]:
    """Keep ``folder`` in the user's trust list; returns (the file, whether it was new).
    Written whole to a temporary file and renamed, under a lock, so two recordings at
    once never lose an entry and a crash never leaves half a list."""
    import fcntl
    import tempfile

    folder = folder.resolve()
    path = _trust_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.parent / f".{_FILE_NAME}.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        current = _read_file(path)
        if folder in current:
            return path, False
        text = "".join(f"{p}\n" for p in [*current, folder])
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{_FILE_NAME}.")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write("# folders whose environment files cassettes may run "
                             "(hermes-replay trust)\n" + text)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    return path, True


def trust_recorded(env_file: Path, recorded_name: str) -> tuple[Path, Path, bool] | None:
    """A recording (``record``, ``probe``) runs the user's code in its project, so replays of
    its cassettes may run it again: the folder the header's ``env_file`` name is relative to
    becomes trusted. Returns (that folder, the trust file, whether it was new), or None for a
    name that does not resolve below a folder (recorded from outside the project). Raises
    ``OSError`` when the trust file cannot be written."""
    rel = Path(recorded_name)
    if rel.is_absolute() or ".." in rel.parts or not rel.parts:
        return None
    base = env_file.resolve().parents[len(rel.parts) - 1]
    trust_file, new = add_trusted(base)
    return base, trust_file, new

"""Where the env's own output goes when a live run (``record``, ``passthrough``, ``replay
ENV_FILE -- MODE``) has no output folder of its own: a new private file per run, in
``$HERMES_REPLAY_LOG_DIR`` if set, else in a private per-user folder under the system's temp
folder — never beside the cassette, which is committed.
"""

from __future__ import annotations

import os
import secrets
import time
from pathlib import Path

from hermes_replay._errors import HermesReplayError

__all__ = ["LOG_DAYS", "LOG_DIR_VARIABLE", "LogFolderError", "default_log_folder",
           "env_log_path", "groups_beside_log"]

LOG_DIR_VARIABLE = "HERMES_REPLAY_LOG_DIR"  # where env logs of record/passthrough go
LOG_DAYS = 7  # env logs in the default (temp) folder older than this are removed


def env_log_path(prog: str, env_file: Path, env_mode: str) -> Path:
    """A new file for the env's own output of a run with no output folder (``record``,
    ``passthrough``, ``replay ENV_FILE -- MODE``): in ``$HERMES_REPLAY_LOG_DIR`` if set (a
    CI job keeps it as an artifact), else in a private per-user folder under the system's
    temp folder (``default_log_folder``) — never beside the cassette, which is committed.
    Created private (0600) with ``O_EXCL|O_NOFOLLOW``: a live run's output is scrubbed of
    known secrets, but it stays the user's, and a planted link is never written through."""
    from datetime import datetime, timezone

    chosen = os.environ.get(LOG_DIR_VARIABLE, "").strip()
    if chosen:
        folder = Path(chosen)
        folder.mkdir(parents=True, exist_ok=True)
    else:
        folder = default_log_folder()
        _prune_logs(folder)  # a folder the user chose is theirs to keep (a CI artifact, say)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        path = folder / f"{prog}-{env_file.stem}-{env_mode}-{stamp}-{secrets.token_hex(4)}.log"
        try:
            os.close(os.open(path, flags, 0o600))
        except FileExistsError:
            continue
        return path
    raise FileExistsError(f"hermes-replay: could not make a new log file in {folder}")


class LogFolderError(HermesReplayError):
    """The default log folder is not this user's private folder (see ``default_log_folder``)."""


def default_log_folder() -> Path:
    """``<temp>/hermes-replay-logs-<uid>``, made 0700 and checked on every use: a real folder
    (not a link), owned by this user, closed to others. The temp folder is shared; another
    local user could plant the folder first and swap a log for a link, so a root ``record``
    would overwrite the link's target. Anything else found there is refused, naming the way
    out, rather than trusted as found."""
    import stat
    import tempfile

    folder = Path(tempfile.gettempdir()) / f"hermes-replay-logs-{os.getuid()}"
    try:
        os.mkdir(folder, 0o700)
    except FileExistsError:
        pass
    info = os.lstat(folder)
    problem = None
    if not stat.S_ISDIR(info.st_mode):
        problem = "is not a folder (a link or a file)"
    elif info.st_uid != os.getuid():
        problem = f"belongs to another user (uid {info.st_uid})"
    elif info.st_mode & 0o077:
        problem = f"is open to other users (mode {stat.S_IMODE(info.st_mode):o})"
    if problem:
        raise LogFolderError(
            f"hermes-replay: the log folder {folder} {problem}, so it is not used. Next step: "
            f"remove it if it is not yours to keep, or set {LOG_DIR_VARIABLE} to a folder of "
            "your own")
    return folder


def _prune_logs(folder: Path) -> None:
    """Remove env logs older than ``LOG_DAYS`` from the default log folder: one file per live
    run would otherwise pile up there forever. Another user's files are left alone."""
    cutoff = time.time() - LOG_DAYS * 86400
    for old in folder.glob("*.log"):
        try:
            if old.is_file() and old.stat().st_mtime < cutoff:
                old.unlink()
        except OSError:  # not ours to remove, or gone meanwhile
            continue


def groups_beside_log(env_args: list[str], env_file: Path, log: Path | None) -> list[str]:
    """``process`` writes its scored groups to atroposlib's default ``data/<name>.jsonl`` in
    the working directory — the user's repository — when no path is given. A recording is
    after the cassette: unasked, those files go beside the env log instead (and the header's
    command stays as the user typed it, so a replay puts them in its own output folder).
    The flags that say so, or none."""
    from datetime import datetime, timezone

    from hermes_replay._runner.plan import flag_value

    if not env_args or env_args[0] != "process" or \
            flag_value(env_args, "--env.data_path_to_save_groups") is not None:
        return []
    chosen = os.environ.get(LOG_DIR_VARIABLE, "").strip()
    folder = log.parent if log is not None else (Path(chosen) if chosen else
                                                  default_log_folder())
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    groups = folder / f"record-{env_file.stem}-groups-{stamp}.jsonl"
    return ["--env.data_path_to_save_groups", str(groups)]

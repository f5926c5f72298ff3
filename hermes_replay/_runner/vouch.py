"""Which env file in a trusted project a cassette may run: one shown to be the project's own,
never one that arrived with the cassette (issue 46, finding 02).

A trusted folder is where names are looked up (``_runner/trust.py``); being found there is
not enough. A download unpacked inside the user's project brings its cassette and its own
``.py`` together, and where either lies (beside, one folder deeper, anywhere) proves
nothing. So the file a cassette names runs only when one of these shows it belongs:

- **the cassette was recorded here**: ``record`` and ``probe`` seal each header they write,
  an HMAC of its ``env_file`` (and ``env_module``) under a key of the user's own (a file of
  32 random bytes, mode 0600, beside the trust list). A cassette from elsewhere carries no
  seal this user made, and an edited name breaks it. A seal says nothing about the file's
  content: the user edits their env and replays, as always;
- **the file is in the project's history**: tracked by git in the repository that holds the
  trusted folder (a clone's shipped cassettes, in CI or anywhere);
- **the user vouched for the folder's files**: ``hermes-replay trust DIR`` vouches for what
  DIR holds when it is run — a file whose inode changed later (``st_ctime``: unpacked,
  copied, moved in or written since, which an archive cannot set) needs ``trust`` again.

A file shown none of these is refused, naming the three ways and the one that always works:
naming the env yourself (``hermes-replay replay ENV_FILE --cassette C -- MODE``).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import shutil
import subprocess
from pathlib import Path

__all__ = ["SEAL_FIELD", "seal", "unvouched"]

SEAL_FIELD = "env_seal"
_KEY_NAME = "record-key"
_KEY_BYTES = 32


def _key(create: bool) -> bytes | None:
    """This user's sealing key (made on first use when ``create``); None when there is no
    config folder, or the file is not this user's own private 32 bytes."""
    from hermes_replay._runner.trust import config_dir

    where = config_dir()
    if where is None:
        return None
    path = where / _KEY_NAME
    flags = os.O_RDONLY | os.O_NOFOLLOW
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        if not create:
            return None
        try:
            where.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "wb") as handle:
                handle.write(os.urandom(_KEY_BYTES))
            fd = os.open(path, flags)
        except FileExistsError:  # another recording made it first
            fd = os.open(path, flags)
        except OSError:
            return None
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        st = os.fstat(handle.fileno())
        key = handle.read(_KEY_BYTES + 1)
    if st.st_uid != os.geteuid() or st.st_mode & 0o077 or len(key) != _KEY_BYTES:
        return None
    return key


def _mac(key: bytes, env_file: str, module: str | None) -> str:
    message = f"hermes-replay env seal v1\0{env_file}\0{module or ''}".encode()
    return "v1:" + hmac.new(key, message, hashlib.sha256).hexdigest()


def seal(env_file: str, module: str | None) -> str | None:
    """The seal ``record``/``probe`` put in a header naming ``env_file`` (None: no place for
    a key; the cassette then replays where git or ``trust`` vouches for the file)."""
    key = _key(create=True)
    return None if key is None else _mac(key, env_file, module)


def _sealed(cassette: Path, env_file: str) -> bool:
    from hermes_replay._cassette.files import first_line

    try:
        header = json.loads(first_line(cassette) or b"{}")
    except (OSError, ValueError):
        return False
    extra = header.get("extra") if isinstance(header, dict) else None
    if not isinstance(extra, dict) or header.get("env_file") != env_file:
        return False
    got, module = extra.get(SEAL_FIELD), extra.get("env_module")
    key = _key(create=False)
    return (key is not None and isinstance(got, str)
            and (module is None or isinstance(module, str))
            and hmac.compare_digest(got, _mac(key, env_file, module)))


def _tracked(root: Path, rel: Path) -> bool:
    """``rel`` is tracked by git in the repository holding ``root`` (no hooks or fsmonitor
    of that repository run: ``ls-files`` reads the index)."""
    git = shutil.which("git")
    if git is None:
        return False
    try:
        done = subprocess.run(
            [git, "-c", "core.fsmonitor=false", "ls-files", "--error-unmatch", "--",
             rel.as_posix()], cwd=root, capture_output=True, timeout=20,
            stdin=subprocess.DEVNULL, env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"})
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def _vouched_by_trust(root: Path, candidate: Path) -> bool:
    from hermes_replay._runner.trust import vouched_since

    since = vouched_since(root)
    if since is None:
        return False
    try:
        return os.stat(candidate).st_ctime_ns < since
    except OSError:
        return False


def unvouched(candidate: Path, root: Path, env_file: str, cassette: Path) -> str | None:
    """Why ``candidate`` (``env_file`` as found under the trusted ``root``) may not run for
    ``cassette``, with the next steps; None when something shows it is the project's."""
    if _sealed(cassette, env_file) or _vouched_by_trust(root, candidate) \
            or _tracked(root, Path(env_file)):
        return None
    return (f"{candidate} lies in {root}, a folder you trust, but nothing shows it is that "
            "project's own file rather than one that arrived with the cassette: the cassette "
            "was not recorded here (it holds no seal of your `hermes-replay record`), git "
            "does not track the file, and it was added or changed after you last ran "
            f"`hermes-replay trust {root}`. Next step: if you know this file, name it "
            f"yourself: hermes-replay replay {candidate} --cassette {cassette} -- MODE …; or "
            f"run hermes-replay trust {root} again (it vouches for what the folder holds "
            "now), git add it, or record the cassette again here")

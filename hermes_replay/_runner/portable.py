"""A recorded command that travels: no path of the recording machine decides a replay.

A cassette is replayed by colleagues and CI, in other venvs, at other paths. The command in
its header is the recording's argv, and an absolute path in it (the bundled tokenizer inside
one venv's site-packages, a dataset in someone's home) names a file of one machine.

* Record (:func:`portable_command`): the bundled tokenizer is written by its name
  (``hermes-replay/tiny-chatml-bpe``); a path inside the project becomes relative to the folder
  the recording ran in (where a replay runs: ``extra.env_cwd``); any other path is kept, and a
  replay checks it.
* Replay (:func:`local_command`): the bundled tokenizer's name is this install's folder; a
  tokenizer folder this machine does not have is served from the copy stored with the
  cassette, or from the bundled tokenizer, whichever has the recorded fingerprint; any other
  absolute path this machine does not have stops the replay before anything runs, naming the
  flag and the fix (a miss or a hub error later would hide the cause).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hermes_replay._errors import CassetteError

__all__ = ["local_command", "portable_command", "replay_command"]


def _split(arg: str) -> tuple[str, str]:
    """``--flag=value`` → (``--flag=``, value); any other element is a value of its own."""
    if arg.startswith("--") and "=" in arg:
        flag, _, value = arg.partition("=")
        return flag + "=", value
    return "", arg


def _flag_of(argv: Sequence[str], i: int) -> str:
    """The flag an argv element is the value of (``--x=v`` or ``--x v``), or ``""``."""
    arg = argv[i]
    if arg.startswith("--") and "=" in arg:
        return arg.partition("=")[0]
    if i > 0 and argv[i - 1].startswith("--") and "=" not in argv[i - 1]:
        return argv[i - 1]
    return ""


def portable_command(argv: Sequence[str], cwd: Path, root: Path | None) -> list[str]:
    """``argv`` as the header keeps it: the bundled tokenizer by name, paths inside ``root``
    (the project; ``cwd`` must lie in it) relative to ``cwd``, other values as they are."""
    from hermes_replay._tokenizers.bundled import TOKENIZER_NAME, tokenizer_path

    bundled = Path(tokenizer_path()).resolve()
    out: list[str] = []
    for arg in argv:
        prefix, value = _split(arg)
        if value.startswith("/"):
            real = Path(os.path.realpath(value))
            if real == bundled:
                value = TOKENIZER_NAME
            elif root is not None and real.is_relative_to(root) and cwd.is_relative_to(root):
                value = Path(os.path.relpath(real, cwd)).as_posix()
        out.append(prefix + value)
    return out


def _is_tokenizer_flag(flag: str) -> bool:
    return flag.endswith("tokenizer_name")


def local_command(argv: Sequence[str], tokenizer: dict[str, Any] | None, cassette: Path,
                  base: Path, *, skip: Sequence[str] = ()) -> list[str]:
    """``argv`` (a replay's, the recorded command under the user's) with this machine's
    paths: see the module docstring. ``base`` is the folder the replay runs in (relative
    values start there); flags in ``skip`` (outputs, moved into the run's folder) are left
    alone. Raises :class:`CassetteError` for a path this machine lacks."""
    from hermes_replay._tokenizers.bundled import TOKENIZER_NAME, tokenizer_path

    out = list(argv)
    for i, arg in enumerate(argv):
        flag = _flag_of(argv, i)
        prefix, value = _split(arg)
        if flag in skip or (not prefix and arg.startswith("-")):
            continue
        if _is_tokenizer_flag(flag):
            if value == TOKENIZER_NAME:
                out[i] = prefix + tokenizer_path()
            elif _path_like(value) and not (base / value).is_dir():
                out[i] = prefix + _tokenizer_here(flag, value, tokenizer, cassette)
        elif value.startswith("/") and not os.path.exists(value):
            raise CassetteError(
                f"the command names {_named(flag, value)}, which is not on this machine (a path "
                "of the machine it was recorded on)", path=cassette, line=1,
                hint=f"give the path on this machine: hermes-replay replay ENV_FILE --cassette "
                     f"{cassette} -- MODE … {flag or 'VALUE'} PATH; or keep the file inside the "
                     "project and re-record from there (paths inside the project are recorded "
                     "relative to it)")
    return out


def _path_like(value: str) -> bool:
    """A tokenizer value that names a folder rather than a hub id (``org/model``)."""
    return value.startswith(("/", "./", "../", "~"))


def _named(flag: str, value: str) -> str:
    return f"{flag} {value}" if flag else value


def _tokenizer_here(flag: str, value: str, recorded: dict[str, Any] | None,
                    cassette: Path) -> str:
    """A tokenizer folder this machine lacks, from the copy with the recorded fingerprint."""
    from hermes_replay._tokenizers.bundled import tokenizer_fingerprint, tokenizer_path
    from hermes_replay._tokenizers.store import stored_dir

    want = (recorded or {}).get("fingerprint")
    candidates = [stored_dir(cassette, recorded), Path(tokenizer_path())]
    for folder in candidates:
        if want and folder is not None:
            try:
                if tokenizer_fingerprint(folder) == want:
                    return str(folder)
            except OSError:
                continue
    have = f"fingerprint {want}" if want else "no fingerprint"
    raise CassetteError(
        f"the command names tokenizer {_named(flag, value)}, which is not on this machine, and "
        f"no copy of it is stored with the cassette (recorded with {have})", path=cassette,
        line=1,
        hint=f"give this machine's copy: hermes-replay replay ENV_FILE --cassette {cassette} "
             f"-- MODE … {flag} PATH; or re-record (a recording stores the tokenizer it used "
             "beside the cassettes, in .tokenizers/)")


def replay_command(cassette: Path, user: list[str]) -> list[str]:
    """``replay ENV_FILE --cassette C -- MODE …``'s argv: the user's flags over the recorded
    command, with this machine's paths (a cassette that cannot be read gives the user's
    flags alone: the run then reports what is wrong with it)."""
    from hermes_replay._cassette.load import load_cassette
    from hermes_replay._runner.plan import OUTPUT_FLAGS, replay_argv

    try:
        header = load_cassette(cassette).header
    except Exception:
        return replay_argv([], user)
    return local_command(replay_argv(list(header.command or []), user), header.tokenizer,
                         cassette, Path.cwd(), skip=OUTPUT_FLAGS)

"""What to re-run for a cassette: finding cassettes and env files, rewriting the recorded
argv for an offline replay, and comparing rewards with the recorded ones."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hermes_replay._errors import CassetteError

__all__ = [
    "UnsafeEnvFile",
    "changed_rewards",
    "find_cassettes",
    "find_env_file",
    "recorded_rewards",
    "redirect_outputs",
    "replay_argv",
]

# Flags whose values are recording-time endpoint facts: taken from the cassette when the user
# leaves them out, so the replayed requests name the same model.
_ENDPOINT_FLAGS = (
    "--openai.base_url",
    "--openai.model_name",
    "--openai.server_type",
    "--openai.health_check",
)
# Replay needs no key, but openai 3.x refuses to build a client with an empty one.
_PLACEHOLDER_KEY = "--openai.api_key=hermes-replay-offline"
_OUTPUT_FLAGS = {
    "process": ("--env.data_path_to_save_groups", "groups.jsonl"),
    "evaluate": ("--env.data_dir_to_save_evals", "evals"),
}


def flag_value(args: Sequence[str], name: str) -> str | None:
    """The value of ``--name V`` or ``--name=V`` in an env-CLI argv (last one wins), else None."""
    value: str | None = None
    for i, arg in enumerate(args):
        if arg == name and i + 1 < len(args):
            value = args[i + 1]
        elif arg.startswith(name + "="):
            value = arg[len(name) + 1 :]
    return value


def recorded_rewards(cassette: Path) -> dict[str, float | None]:
    """Reward per rollout as recorded (``{}`` if the cassette cannot be read)."""
    from hermes_replay import load_cassette

    try:
        c = load_cassette(cassette)
    except Exception:
        return {}
    out: dict[str, float | None] = {}
    for rid, rec in c.rollouts.items():
        reward = (rec.outcome or {}).get("reward")
        out[rid] = float(reward) if isinstance(reward, (int, float)) else None
    return out


def changed_rewards(
    recorded: dict[str, float | None], replayed: dict[str, float | None], tol: float = 1e-9
) -> dict[str, tuple[float | None, float | None]]:
    """Rollouts replayed with a reward different from the recorded one."""
    changed: dict[str, tuple[float | None, float | None]] = {}
    for rid, new in replayed.items():
        if rid not in recorded:
            continue
        old = recorded[rid]
        if (old is None) != (new is None) or (
            old is not None and new is not None and abs(old - new) > tol
        ):
            changed[rid] = (old, new)
    return changed


def replay_argv(recorded: list[str], user: list[str] | None = None) -> list[str]:
    """The argv to replay: the user's (or the recorded) command, the recorded endpoint flags the
    user left out, and a placeholder key unless one is given."""
    argv = list(user if user is not None else recorded)
    for flag in _ENDPOINT_FLAGS:
        value = flag_value(recorded, flag)
        if value is not None and flag_value(argv, flag) is None:
            argv += [flag, value]
    argv = _drop_flag([a for a in argv if not a.startswith("--openai.api_key=")],
                      "--openai.api_key")
    # Only where --openai.* overrides are already in use: atroposlib rejects them outright for
    # envs with several servers.
    if any(a.startswith("--openai.") for a in argv):
        argv.append(_PLACEHOLDER_KEY)
        # a health check pings the endpoint every second; offline there is none to ping
        # (pings that still come, from a config_init, are answered by the session)
        argv = _drop_flag([a for a in argv if not a.startswith("--openai.health_check=")],
                          "--openai.health_check")
        argv += ["--openai.health_check", "false"]
    return argv


def _drop_flag(argv: list[str], flag: str) -> list[str]:
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
            continue
        if arg == flag:
            skip = True
            continue
        out.append(arg)
    return out


def redirect_outputs(argv: list[str], out_dir: Path) -> list[str]:
    """Point the env's output flags into ``out_dir`` (added when the recording had none)."""
    mode = argv[0] if argv else ""
    result = list(argv)
    for flag, default_name in _OUTPUT_FLAGS.values():
        old = flag_value(result, flag)
        if old is None and _OUTPUT_FLAGS.get(mode, ("",))[0] != flag:
            continue
        name = Path(old).name if old else default_name
        if name in ("", ".", ".."):  # `evals/..`: a file name of its own, inside out_dir
            name = default_name
        result = _drop_flag([a for a in result if not a.startswith(flag + "=")], flag)
        result += [flag, str(out_dir / name)]
    return result


def special_file_problem(target: Path) -> str | None:
    """Why ``target`` cannot hold cassettes when it exists but is neither a regular file nor a
    folder (a FIFO, a socket, a device): reading one would block or never end, and finding
    "no cassettes" there must not pass as an empty project."""
    import stat

    try:
        mode = target.stat().st_mode
    except OSError:
        return None
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    kind = ("a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode)
            else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a regular file")
    return (f"{target} is {kind}, not a cassette file or a folder of cassettes. Next step: "
            "pass a .jsonl / .jsonl.zst cassette or the folder that holds them")


def find_cassettes(target: Path) -> list[Path]:
    """Cassettes at ``target``: the file itself, or every ``*.jsonl`` / ``*.jsonl.zst`` under
    it with a header."""
    from hermes_replay._cassette.files import cassette_files, within

    if target.is_file():
        return [target]
    if not target.is_dir():
        return []
    found = []
    for path in cassette_files(target):
        if any(part.startswith(".") for part in path.relative_to(target).parts):
            continue
        if not within(path, target):  # linked in from elsewhere: not this folder's (verify
            continue                  # flags such links; listing and replay skip them)
        if _looks_like_cassette(path):
            found.append(path)
    return found


HEAD_LIMIT = 1 << 20  # bytes of a first line read to decide (a header is a few KB)


def _looks_like_cassette(path: Path) -> bool:
    """First line is a JSON header (a data file of an env is not a cassette)."""
    from hermes_replay._cassette.files import first_line

    try:
        line = first_line(path, limit=HEAD_LIMIT)
    except OSError:
        return True  # let load_cassette report what is wrong with it
    try:
        first = json.loads(line or b"null")
    except ValueError:
        # A broken cassette is load_cassette's to report; but a first line longer than any
        # header whose start names no schema is an env's data (the scored group of a 1 MB
        # reply, in a replay's output folder), not a cassette cut short.
        return len(line) < HEAD_LIMIT or b'"schema_version"' in line[:4096]
    return isinstance(first, dict) and "schema_version" in first


_PROJECT_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", ".git")
_CASSETTE_SUFFIXES = (".jsonl", ".jsonl.zst")


def project_root(path: Path) -> Path | None:
    """The nearest folder at or above ``path`` with a project marker, or None."""
    where = path.resolve()
    for parent in (where, *where.parents):
        if parent.is_dir() and any((parent / m).exists() for m in _PROJECT_MARKERS):
            return parent
    return None


def recorded_env_fields(env_file: Path) -> dict[str, Any]:
    """How a recording names its env file: relative to the project root (so replay finds it
    from any folder of the project), with the folder it ran in (``extra.env_cwd``, where the
    command's other relative paths start) and, for a package env, the module it ran as
    (``extra.env_module``: ``python -m pkg.env``). Outside any project, or recorded from
    outside the env's project: relative to the working directory, as before."""
    from hermes_replay._runner.envrun import module_of

    where, cwd = env_file.resolve(), Path.cwd().resolve()
    root = project_root(where.parent)
    extra: dict[str, Any] = {}
    module = module_of(where)
    if module is not None:
        extra["env_module"] = module[0]
    if root is None or not cwd.is_relative_to(root):
        fields: dict[str, Any] = {"env_file": Path(os.path.relpath(where, cwd)).as_posix()}
    else:
        fields = {"env_file": where.relative_to(root).as_posix()}
        if cwd != root:
            extra["env_cwd"] = cwd.relative_to(root).as_posix()
    if extra:
        fields["extra"] = extra
    return fields


def recorded_cwd(base: Path, extra: dict[str, Any]) -> Path:
    """The folder a recording ran in, under ``base`` (the project root its env file is
    relative to); ``base`` itself when the header says nothing usable (a cassette is data:
    an absolute path or ``..`` is ignored, never followed)."""
    raw = extra.get("env_cwd") if isinstance(extra, dict) else None
    if not isinstance(raw, str) or not raw or Path(raw).is_absolute() or ".." in Path(raw).parts:
        return base
    folder = base / raw
    return folder if folder.is_dir() and folder.resolve().is_relative_to(base.resolve()) \
        else base


def _holds_cassettes(folder: Path) -> bool:
    """``folder`` is (under) one named ``cassettes``, or directly holds a cassette or a shards
    folder: what lies there arrived with recordings, so it is neither code nor a project root."""
    if "cassettes" in folder.parts:
        return True
    try:
        entries = list(folder.iterdir())
    except OSError:
        return False
    return any(e.name.endswith(".shards") or (e.name.endswith(_CASSETTE_SUFFIXES)
                                              and e.is_file() and _looks_like_cassette(e))
               for e in entries)


def _project_root(cassette: Path) -> Path | None:
    """The real project root for ``cassette``: the nearest folder with a marker file
    (pyproject.toml, setup file, .git), looked for from the working directory when the
    cassette is inside it (the user stands in their project), else from the cassette. A
    marker in a folder that holds cassettes counts only when no marker lies above it (a
    project that keeps a cassette at its top), so a ``setup.cfg`` or ``.git`` planted beside
    a recording inside a real project changes nothing."""
    where = cassette.resolve()
    cwd = Path.cwd().resolve()
    return _root_from(cwd if where.is_relative_to(cwd) else where.parent)


def _root_from(start: Path) -> Path | None:
    """The nearest folder at or above ``start`` with a marker, by ``_project_root``'s rules."""
    fallback: Path | None = None
    for folder in (start, *start.parents):
        if not any((folder / marker).exists() for marker in _PROJECT_MARKERS):
            continue
        if not _holds_cassettes(folder):
            return folder
        if fallback is None and "cassettes" not in folder.parts:
            fallback = folder
    return fallback


def _cassette_area(cassette: Path, top: Path | None) -> list[Path]:
    """Folders no env file may come from: the cassette's own folder (unless it is the
    project root ``top``), any ``cassettes`` folder above it, and every folder between it and
    ``top`` that directly holds a cassette. (``envs/cassettes/x.jsonl`` leaves ``envs/`` the
    project's code.)"""
    where = cassette.resolve()
    area = [] if where.parent == top else [where.parent]
    for folder in where.parents:
        if top is not None and (folder == top or not folder.is_relative_to(top)):
            break
        if folder.name == "cassettes" or _holds_cassettes(folder):
            area.append(folder)
    return area


class UnsafeEnvFile(CassetteError):
    """``header.env_file`` points outside the project, or into a folder holding cassettes; a
    cassette is data and must not choose which file on the machine gets executed."""


def find_env_file(env_file: str, cassette: Path) -> Path | None:
    """Where ``header.env_file`` (relative to where it was recorded) is now: looked up from the
    working directory, then from the project root (so replay works from anywhere in the
    repository). For a cassette kept outside the working directory (a download, a shared
    folder), its own project is searched only if its root is a real one (a marker in the
    folder that holds the recordings counts not), then the project the user stands in — the
    working directory and its real root. Absolute
    paths, ``..``, symlinks leading out of that folder, files inside a folder that holds
    cassettes and files that define no real atroposlib environment are refused with
    ``UnsafeEnvFile``: replaying cassettes from a pull request must not run code that arrived
    with them."""
    rel = Path(env_file)
    if rel.is_absolute() or ".." in rel.parts:
        raise UnsafeEnvFile(
            f"the cassette {cassette} names env file {env_file}, outside the project; replay "
            "of a folder only runs env files inside it. Next step: re-record from the project "
            "root, or choose the file yourself: hermes-replay replay ENV_FILE --cassette "
            f"{cassette} -- MODE …"
        )
    from hermes_replay._runner.env_guard import NotAnEnvFile, check_env_file

    root = _project_root(cassette)
    area = _cassette_area(cassette, root)
    cwd = Path.cwd().resolve()
    inside = cassette.resolve().is_relative_to(cwd)
    bases = [cwd] if inside else []
    here: Path | None = None
    # The cassette's own project — for one kept outside the working directory, only when its
    # root is a real one: a marker beside the recordings themselves (a folder that holds
    # cassettes) is what a downloaded folder plants to pose as a project, so it counts not.
    if root is not None and root not in bases and (inside or not _holds_cassettes(root)):
        bases.append(root)
    if not inside:
        # A cassette kept elsewhere (a download, a shared folder, a CI artifact) with no
        # project of its own, replayed from the project: the file is looked for in the project
        # the user stands in — the working directory and its real root.
        here = _root_from(cwd)
        if (here is None or cwd.is_relative_to(here)) and cwd not in bases:
            bases.append(cwd)
        if here is not None and here not in bases:
            bases.append(here)
    for base in bases:
        candidate = base / rel
        if not candidate.is_file():
            continue
        real = candidate.resolve()
        if not real.is_relative_to(base):
            raise UnsafeEnvFile(
                f"the cassette {cassette} names env file {env_file}: under {base} it is a link "
                f"to {real}, outside the project; replay refuses to run it"
            )
        # (a folder above the whole base — the cassette's, when the project lies below it —
        # holds none of the project's files as recordings)
        from_here = not inside and base != root  # the working directory's project
        holder = next((f for f in area if real.is_relative_to(f)
                       and not (from_here and base.is_relative_to(f))), None)
        if holder is not None:
            raise UnsafeEnvFile(
                f"the cassette {cassette} names env file {env_file}, which lies in {holder}, a "
                "folder that holds cassettes: replay runs only the project's own environment "
                "files, never a file that arrived with recordings. Next step: keep the "
                "environment outside the cassette folders (e.g. environments/) and re-record, "
                f"or choose it yourself: hermes-replay replay ENV_FILE --cassette {cassette} "
                "-- MODE …"
            )
        try:
            check_env_file(candidate, (here or base) if from_here else (root or base))
        except NotAnEnvFile as exc:
            raise UnsafeEnvFile(f"the cassette {cassette} names {exc}") from None
        return candidate
    return None

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
    # the tokenizer the recording ran with (a local copy, often): the cassette's stored one
    # answers for it, where the env's own default would be a hub name (offline: an error)
    "--env.tokenizer_name",
)
# Replay needs no key, but openai 3.x refuses to build a client with an empty one.
PLACEHOLDER_KEY = _PLACEHOLDER_KEY = "--openai.api_key=hermes-replay-offline"
_OUTPUT_FLAGS = {
    "process": ("--env.data_path_to_save_groups", "groups.jsonl"),
    "evaluate": ("--env.data_dir_to_save_evals", "evals"),
}
OUTPUT_FLAGS = tuple(flag for flag, _ in _OUTPUT_FLAGS.values())


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
    """The argv to replay: the user's (or the recorded) command, the recorded endpoint and
    tokenizer flags the user left out, and a placeholder key unless one is given."""
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


def without_flag(argv: list[str], flag: str) -> list[str]:
    """``argv`` less ``flag``, in both its ``--flag V`` and ``--flag=V`` forms."""
    return _drop_flag([a for a in argv if not a.startswith(flag + "=")], flag)


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


def recorded_env_fields(env_file: Path, module: str | None = None) -> dict[str, Any]:
    """How a recording names its env file: relative to the project root (so replay finds it
    from any folder of the project), with the folder it ran in (``extra.env_cwd``, where the
    command's other relative paths start) and, for an env run as a module (``module`` given,
    or a package env that imports relatively), the module it ran as (``extra.env_module``:
    ``python -m pkg.env``). Recorded from outside the env's project: relative to its root,
    with no ``env_cwd``. Outside any project: relative to the working directory."""
    from hermes_replay._runner.envrun import module_of

    where, cwd = env_file.resolve(), Path.cwd().resolve()
    root = project_root(where.parent)
    extra: dict[str, Any] = {}
    found = module_of(where, root=cwd if where.is_relative_to(cwd) else root)
    module = module or (found[0] if found else None)
    if module is not None:
        extra["env_module"] = module
    if root is None:
        fields: dict[str, Any] = {"env_file": Path(os.path.relpath(where, cwd)).as_posix()}
    elif not cwd.is_relative_to(root):
        # recorded from outside the project ($HOME, `/`, a sibling): named from its root, the
        # folder recording trusts — never the folder above it (issue 46, finding 03); a
        # replay runs in that root
        fields = {"env_file": where.relative_to(root).as_posix()}
    else:
        fields = {"env_file": where.relative_to(root).as_posix()}
        # always, "." included: `check` and `replay` then run where `record` ran, whatever
        # folder they are started from (an env reading a relative config.yaml needs that)
        extra["env_cwd"] = cwd.relative_to(root).as_posix()
    from hermes_replay._runner.vouch import SEAL_FIELD, seal

    # the proof a replay asks for that this cassette was recorded here (``_runner/vouch``)
    sealed = seal(fields["env_file"], extra.get("env_module"))
    if sealed is not None:
        extra[SEAL_FIELD] = sealed
    if extra:
        fields["extra"] = extra
    return fields


def recorded_module(env_file: Path, root: Path, extra: Any) -> tuple[str, Path] | None:
    """The module a recording ran its env as (``extra.env_module``), and the folder ``python
    -m`` runs it from — only when the name is exactly the env file's own path below a folder
    above it (a cassette is data: it names no other module than the file it may run)."""
    from hermes_replay._runner.envrun import module_below

    name = extra.get("env_module") if isinstance(extra, dict) else None
    if not isinstance(name, str) or not name:
        return None
    parts = name.split(".")
    where = env_file.resolve()
    if len(parts) > len(where.parts) - 1:
        return None
    folder = where.parents[len(parts) - 1]
    if not folder.is_relative_to(root.resolve()):
        return None
    found = module_below(where, folder)
    return found if found is not None and found[0] == name else None


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


def replay_folder(env_file: Path, recorded: str | None, extra: Any) -> Path | None:
    """Where a replay of a recording runs ``env_file``: the recorded ``env_cwd`` under the
    root its header's ``env_file`` (``recorded``) is relative to, as ``run_cassette`` does;
    None when ``env_file`` is not at that recorded path (the caller then chooses)."""
    parts = Path(recorded).parts if recorded else ()
    where = env_file.resolve()
    if not parts or ".." in parts or len(parts) >= len(where.parts) \
            or where.parts[-len(parts):] != parts:
        return None
    return recorded_cwd(where.parents[len(parts) - 1], extra if isinstance(extra, dict) else {})


class UnsafeEnvFile(CassetteError):
    """``header.env_file`` points outside the project, or into a folder holding cassettes; a
    cassette is data and must not choose which file on the machine gets executed."""


def find_env_file(env_file: str, cassette: Path) -> Path | None:
    """Where ``header.env_file`` is now, by the trust rule (``_runner/trust.py``, written out
    in docs/reliability.md): the name is looked up from each folder the user trusts that
    holds the cassette, then from each that holds the working directory, nearest first. A
    name that is absolute or climbs (``..``), a link leading out of the trusted folder, a file
    in a folder that arrived with recordings (one named ``cassettes`` or holding a cassette,
    between the trusted folder and the file) and a file that defines no real atroposlib
    environment are refused with ``UnsafeEnvFile``; so is a file found only in a folder
    nobody trusted (a download), naming the one-time step that trusts it. Nothing is
    imported to decide. None when the file is nowhere."""
    from hermes_replay._runner.env_guard import NotAnEnvFile, check_env_file
    from hermes_replay._runner.trust import stale_reason, trusted_roots
    from hermes_replay._runner.vouch import unvouched

    rel = Path(env_file)
    if rel.is_absolute() or ".." in rel.parts or len(env_file) > _MAX_ENV_NAME \
            or "\x00" in env_file:
        raise UnsafeEnvFile(
            f"the cassette {cassette} names env file {_shown(env_file)}, outside the project; "
            "replay only runs env files inside a project you trust. Next step: re-record "
            "from the project root, or choose the file yourself: hermes-replay replay "
            f"ENV_FILE --cassette {cassette} -- MODE …"
        )
    cwd, where = Path.cwd().resolve(), cassette.resolve()
    roots = trusted_roots()
    bases: list[Path] = []
    for start in (where, cwd):  # the cassette's own project first, then the user's
        for root in sorted((r for r in roots if start.is_relative_to(r)),
                           key=lambda r: len(r.parts), reverse=True):
            if root not in bases:
                bases.append(root)
    for base in bases:
        candidate = base / rel
        try:
            if not candidate.is_file():
                continue
        except OSError:  # a name too long for this filesystem, say
            continue
        real = candidate.resolve()
        if not real.is_relative_to(base):
            raise UnsafeEnvFile(
                f"the cassette {cassette} names env file {_shown(env_file)}: under {base} it "
                f"is a link to {real}, outside the project; replay refuses to run it"
            )
        holder = _arrived_with_recordings(real, base)
        if holder is not None:
            raise UnsafeEnvFile(
                f"the cassette {cassette} names env file {_shown(env_file)}, which lies in "
                f"{holder}, a folder that holds cassettes: replay runs only the project's own "
                "environment files, never a file that arrived with recordings. Next step: "
                "keep the environment outside the cassette folders (e.g. environments/) and "
                "re-record, or choose it yourself: hermes-replay replay ENV_FILE --cassette "
                f"{cassette} -- MODE …"
            )
        try:
            check_env_file(candidate, base)
        except NotAnEnvFile as exc:
            raise UnsafeEnvFile(f"the cassette {cassette} names {exc}") from None
        why_not = unvouched(candidate, base, env_file, cassette)
        if why_not is not None:  # found in a trusted folder, but not shown to be its own
            raise UnsafeEnvFile(f"the cassette {cassette} names env file {_shown(env_file)}: "
                                f"{why_not}")
        return candidate
    untrusted = _untrusted_copy(rel, cwd, where)
    if untrusted is not None:
        folder, found = untrusted
        stale = stale_reason(folder)
        if stale is not None:  # trusted once, but not this folder any more (issue 46, 11)
            raise UntrustedProject(f"the cassette {cassette} names env file "
                                   f"{_shown(env_file)}; {found} exists, but {stale}")
        raise UntrustedProject(
            f"the cassette {cassette} names env file {_shown(env_file)}; {found} exists, but "
            f"{folder} is not a folder you trust, and a cassette (data from outside) never "
            "chooses which code runs on its own. Next step: if this is your project, trust "
            f"it once: hermes-replay trust {folder}  (in CI: export "
            f"HERMES_REPLAY_TRUST=\"$PWD\", or pip install -e the project); or name the "
            f"environment yourself: hermes-replay replay {found} --cassette {cassette} "
            "-- MODE …"
        )
    return None


_MAX_ENV_NAME = 1024


def _shown(name: str) -> str:
    """A header's name as it may reach a terminal: escapes made visible, length bounded."""
    text = name.encode("unicode_escape", "backslashreplace").decode("ascii")
    return text if len(text) <= 200 else text[:200] + "…"


def _arrived_with_recordings(real: Path, base: Path) -> Path | None:
    """The first folder between ``base`` (excluded: a project may keep a cassette at its
    top) and ``real`` that holds recordings: named ``cassettes``, or directly holding a
    cassette or a shards folder. Only the file's own path is looked at, never what lies
    beside or above the project."""
    folder = real.parent
    chain: list[Path] = []
    while folder != base and folder.is_relative_to(base):
        chain.append(folder)
        folder = folder.parent
    for folder in reversed(chain):
        if folder.name == "cassettes" or _holds_recordings(folder):
            return folder
    return None


def _holds_recordings(folder: Path) -> bool:
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return False
    for entry in entries:
        try:
            if entry.name.endswith(".shards") and entry.is_dir(follow_symlinks=False):
                return True
            if entry.name.endswith(_CASSETTE_SUFFIXES) and entry.is_file() \
                    and _looks_like_cassette(Path(entry.path)):
                return True
        except OSError:
            continue
    return False


def _untrusted_copy(rel: Path, cwd: Path, where: Path) -> tuple[Path, Path] | None:
    """Where the named file lies in a folder nobody trusted — the working directory, the
    cassette's folder or the nearest project root above either — to say so instead of
    "not found". Only looked up, never read or run."""
    starts = [cwd, where.parent]
    starts += [r for r in (project_root(cwd), project_root(where.parent)) if r is not None]
    for folder in starts:
        candidate = folder / rel
        try:
            if candidate.is_file():
                return folder, candidate
        except OSError:
            continue
    return None


class UntrustedProject(UnsafeEnvFile):
    """The file a cassette names lies only in a folder the user has not trusted."""

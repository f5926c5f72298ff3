"""What ``check`` runs: the folder and flags of each mode's run, the same as ``replay``'s.

Offline, a mode replays its cassette in the folder ``record`` ran in (the header's
``extra.env_cwd``, under the root its ``env_file`` is relative to) — an env that reads a
relative ``config.yaml`` loads the same file as under ``record`` and ``replay``. Live, the flags
the user gives after ``--`` go to both modes (``--env.tokenizer_name`` for an offline machine,
…), before the few ``check`` adds to keep the run small — and only those the env accepts:
``--env.eval_size`` is the Hermes layer's field, which a plain ``BaseEnvConfig`` refuses.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["LIVE_FLAGS", "env_flags_problem", "live_argv", "run_folder"]

#: what a live check adds to keep each run small (unless the user's flags set it)
LIVE_FLAGS = {
    "process": ["--env.total_steps", "1", "--env.group_size", "2"],
    "evaluate": ["--env.eval_size", "2"],  # a Hermes env's field only (see ``live_argv``)
}


def run_folder(env_file: Path, header: dict[str, Any]) -> Path | None:
    """Where ``replay`` runs ``env_file`` for a cassette with this ``header`` (None: no
    recording, or one made of another path; the caller's default folder then)."""
    from hermes_replay._runner.plan import replay_folder

    if not header:
        return None
    return replay_folder(env_file, header.get("env_file"), header.get("extra"))


def _given(argv: Sequence[str], flag: str) -> bool:
    return any(a == flag or a.startswith(flag + "=") for a in argv)


def live_argv(mode: str, env_file: Path, user_flags: Sequence[str]) -> list[str]:
    """``mode``, the user's flags, then check's own small-run flags the user did not set and
    the env accepts."""
    from hermes_replay._check._source import is_plain_env

    plain = is_plain_env(env_file)
    own = LIVE_FLAGS[mode]
    added: list[str] = []
    for flag, value in zip(own[::2], own[1::2], strict=True):
        if _given(user_flags, flag) or (plain and flag == "--env.eval_size"):
            continue
        added += [flag, value]
    return [mode, *user_flags, *added]


def env_flags_problem(env_flags: Sequence[str], live: bool) -> str | None:
    """Why ``check … -- FLAGS`` cannot take these flags (a usage message), or None."""
    if env_flags and not live:
        return ("flags after -- go to the env's live runs (with --endpoint and --model); "
                "offline, check replays the recorded command as `replay` does")
    if env_flags and env_flags[0] in ("serve", "process", "evaluate"):
        return ("give only the env's flags after -- (check runs both process and evaluate "
                f"itself), e.g. -- {' '.join(env_flags[1:]) or '--env.X V'}")
    return None

"""``hermes-replay replay ENV_FILE -- MODE …``: the user's own command against one cassette,
with the outputs of the main job's replay — a folder of its own and the recorded rewards to
compare with.

Run as plain ``run_env``, this form wrote atroposlib's default outputs (``data/<env>.jsonl``
and its HTML page) into the project, kept no ``result.json`` for ``diff`` or ``report``, and
showed no reward changes, while ``replay CASSETTE`` did all three.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hermes_replay._runner.result import RunResult, recorded_rewards

__all__ = ["run_env_form", "with_default_outputs"]


def with_default_outputs(argv: list[str], out: Path) -> list[str]:
    """``argv`` with the mode's output flag pointed into ``out`` when the user gave none (a
    flag the user gave is their choice and stays)."""
    from hermes_replay._runner.plan import _OUTPUT_FLAGS, flag_value

    mode = argv[0] if argv else ""
    flag, name = _OUTPUT_FLAGS.get(mode, ("", ""))
    if not flag or flag_value(argv, flag) is not None:
        return list(argv)
    return [*argv, flag, str(out / name)]


def run_env_form(env_file: Path, argv: list[str], *, cassette: Path, out: Path,
                 raise_errors: bool = False, **kwargs: Any) -> RunResult:
    """Run ``env_file`` with ``argv`` against ``cassette`` (``run_env``'s other arguments in
    ``kwargs``); its outputs, ``result.json`` (written even when the run failed, so ``diff
    CASSETTE OUT`` shows why) and the recorded rewards it is compared with go with it."""
    from hermes_replay._runner.out_dir import fresh_out_dir
    from hermes_replay._runner.result_io import write_run_result
    from hermes_replay._runner.run import run_env

    argv = with_default_outputs(argv, out)
    fresh_out_dir(out, argv)
    result = run_env(env_file, argv, cassette=cassette, raise_errors=False, **kwargs)
    result.out_dir = out
    from hermes_replay._cassette.load import load_cassette

    result.recorded_rewards = recorded_rewards(load_cassette(cassette))
    write_run_result(result, out)
    if raise_errors and result.error is not None:
        raise result.error
    return result

"""Run a recorded environment command again under a cassette and collect a ``RunResult``.

This is what the pytest plugin's ``replay_run`` fixture and ``hermes-replay replay`` share:
the cassette header names the env file and its CLI argv; output flags are pointed into a
fresh folder; wandb is captured; rewards come from the rollout scopes the base env reports.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from contextlib import ExitStack, redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

from hermes_replay._plan import flag_value
from hermes_replay._result import RolloutOutcome, RunResult

__all__ = ["run_cassette"]


def run_cassette(
    path: str | Path,
    *,
    out_dir: str | Path,
    mode: str = "replay",
    command: Sequence[str] | None = None,
    strict: bool = False,
    block_network: bool | None = None,
    max_misses: int = 25,
    **options: Any,
) -> RunResult:
    """Re-run the command recorded in cassette ``path`` (or ``command``) in ``mode``.

    Misses raise ``CassetteMiss`` when the run ends (with a diff per request). In replay
    mode non-loopback sockets and DNS are refused unless ``block_network=False``, and a run
    that misses ``max_misses`` times without progress stops with ``ReplayStalled``. The env's own
    output goes to ``out_dir/env.log``.
    """
    import hermes_replay
    from hermes_replay._envrun import OutcomeCollector, run_env_file
    from hermes_replay._netblock import block_network as _block
    from hermes_replay._plan import find_env_file, redirect_outputs, replay_argv
    from hermes_replay._stall import stall_guard
    from hermes_replay._wandb import capture_wandb

    cassette_path = Path(path)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    recorded = hermes_replay.load_cassette(cassette_path)
    header = recorded.header
    if not header.env_file:
        raise hermes_replay.CassetteError(
            f"{cassette_path}:1: the header names no env_file, so there is no command to re-run. "
            "Next step: record it with `hermes-replay record ENV_FILE … -- process …`, or use "
            "hermes_replay.cassette() around your own code."
        )
    env_file = find_env_file(header.env_file, cassette_path)
    if env_file is None:
        raise hermes_replay.CassetteError(
            f"{cassette_path}:1: env_file {header.env_file!r} was not found from the working "
            "directory or any folder above the cassette. Next step: run from the repository "
            "root, or re-record from where the environment lives."
        )
    argv = redirect_outputs(replay_argv(list(header.command or []),
                                        None if command is None else list(command)), out)
    collector = OutcomeCollector()
    with ExitStack() as stack:
        if block_network if block_network is not None else mode == "replay":
            stack.enter_context(_block())
        captured = stack.enter_context(capture_wandb())
        stack.enter_context(collector.listening())
        session = stack.enter_context(
            hermes_replay.cassette(cassette_path, mode=mode, strict=strict, **options)  # type: ignore[arg-type]
        )
        stack.enter_context(stall_guard(session, max_misses=max_misses))
        log = stack.enter_context((out / "env.log").open("w", encoding="utf-8"))
        with redirect_stdout(log), redirect_stderr(log):
            code = run_env_file(env_file, argv)
    summary = session.summary()
    return RunResult(
        command=argv,
        exit_code=code,
        env_name=header.env_name or collector.annotations.get("env_name"),
        cassette=cassette_path,
        rollouts=[RolloutOutcome.from_outcome(rid, o) for rid, o in collector.outcomes.items()],
        groups=read_groups(argv),
        eval_metrics=read_eval_metrics(argv),
        wandb=captured.latest(),
        misses=[str(m) for m in getattr(summary, "misses", []) or []],
        unused=[f"{r}#{s}" for r, s in getattr(summary, "unused", []) or []],
        recorded_rewards={
            rid: (None if rec.outcome.get("reward") is None else float(rec.outcome["reward"]))
            for rid, rec in recorded.rollouts.items()
            if rec.outcome
        },
        out_dir=out,
    )


def read_groups(argv: Sequence[str]) -> list[dict[str, Any]]:
    path = flag_value(argv, "--env.data_path_to_save_groups")
    if not path or not Path(path).is_file():
        return []
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def read_eval_metrics(argv: Sequence[str]) -> dict[str, Any]:
    folder = flag_value(argv, "--env.data_dir_to_save_evals")
    metrics = Path(folder) / "metrics.json" if folder else None
    if metrics is None or not metrics.is_file():
        return {}
    data = json.loads(metrics.read_text(encoding="utf-8"))
    return dict(data.get("results", {}).get("all", {}))

"""One replay of ``hermes-replay watch``, as it runs in a fork of the warm process, and the
verdict it prints: ``ok``, ``CHANGED`` with one line per rollout whose reward moved (recorded →
now), ``MISS`` with each request's diff, ``ERROR`` with the environment's last words.

The replay is the main job's own (``job.replay_job``: the recorded command, outputs in the
watch's output folder, the env's output in its ``env.log``), so a verdict here is the one
``hermes-replay replay CASSETTE`` would give.
"""

from __future__ import annotations

import io
import os
import shutil
from contextlib import redirect_stderr
from dataclasses import dataclass, field
from pathlib import Path

from hermes_replay._cassette.labels import named
from hermes_replay._corpus.summary import RunSummary
from hermes_replay._runner.options import RunOptions
from hermes_replay._runner.snapshot_text import render_run
from hermes_replay._terminal.render import Style, fmt_reward, sanitize

__all__ = ["STACK", "WARMUP_CASSETTE", "Replayed", "replay_in_child", "verdict_lines", "warm_up"]

# What a replay imports that is worth importing once: atroposlib's base env pulls in openai,
# transformers, wandb, numpy, aiohttp and jinja2; the rest is the replay path itself. What an
# environment imports beyond this is learned after its first run (see ``_runner.warm``).
STACK = (
    "atroposlib.envs.base",
    "atroposlib.envs.server_handling.server_manager",
    "openai",
    "httpx2",
    "aiohttp",
    "transformers",
    "transformers.models.auto.tokenization_auto",
    "tokenizers",
    "wandb",
    "numpy",
    "pydantic",
    "hermes_replay._runner.run",
    "hermes_replay._cassette.load",
    "hermes_replay._session.session",
    "hermes_replay._session.intercept",
    "hermes_replay._corpus.job",
)

_PROGRESS_PREFIX = "[hermes-replay] "  # a non-TTY run's periodic progress lines

# The package's own small recording (two rollouts of the layer's multi_signal_env example),
# replayed by each spare worker before it takes a job: ``warm_up``.
WARMUP_CASSETTE = Path(__file__).resolve().parents[1] / "assets" / "warmup" / "process.jsonl"


@dataclass
class Replayed:
    """What a child sends back: the summary, what it printed (a miss's diff, an error), and
    the project files it imported (what a later save must replay it for)."""

    summary: RunSummary
    mode: str
    printed: str = ""
    imported: list[str] = field(default_factory=list)
    rewards: dict[str, float | None] = field(default_factory=dict)  # this run's, per rollout
    snapshot: str | None = None  # this run as a reward snapshot (what accepting writes)


def replay_in_child(cassette: str, out_dir: str, cwd: str, environ: dict[str, str],
                    roots: list[str], options: RunOptions) -> Replayed:
    """Replay ``cassette`` into ``out_dir`` (emptied first) as the main job would."""
    from hermes_replay._corpus.job import Job, replay_job
    from hermes_replay._runner.warm import user_module_files

    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(environ)
    out = Path(out_dir)
    shutil.rmtree(out, ignore_errors=True)  # atroposlib appends to an existing groups file
    err = io.StringIO()
    with redirect_stderr(err):
        result = replay_job(Job(0, Path(cassette), out, options))
    printed = "".join(line for line in (err.getvalue() + result.message + "\n")
                      .splitlines(keepends=True) if not line.startswith(_PROGRESS_PREFIX))
    run = result.run if result.run is not None and result.run.error is None else None
    return Replayed(result.summary, result.mode, printed.rstrip("\n") + "\n" if printed.strip()
                    else "", user_module_files([Path(r) for r in roots]),
                    rewards=dict(run.rewards) if run is not None else {},
                    snapshot=render_run(run) if run is not None and run.rollouts else None)


def warm_up() -> list[str]:
    """A spare worker's warm-up: replay the package's own cassette with the layer's example
    env (``WARMUP_CASSETTE``), as a cassette of the user's would be replayed, into a folder
    removed after. Why: the first run in a fork pays for every page it touches being copied
    from the warm process and for the libraries' lazy set-up (the SDK's request transforms,
    pydantic's validators, the chat template's compile: about 0.1 s of CPU for a shipped
    cassette); spares pay it while the user edits, so the next save's first replays run at
    the speed of the later ones. Never the user's code: a spare is forked before the save it
    serves, and the user's modules are read only when its job comes. Returns the ids of the
    rollouts it replayed; raises on any failure (a miss, an error): the warm process then
    stops warming up."""
    import tempfile

    from hermes_replay._cassette.load import load_cassette
    from hermes_replay._layer import LAYER_DIR
    from hermes_replay._runner.plan import OUTPUT_FLAGS, redirect_outputs, replay_argv
    from hermes_replay._runner.portable import local_command
    from hermes_replay._runner.run import run_env

    header = load_cassette(WARMUP_CASSETTE).header
    here = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="hermes-replay-warmup-") as tmp:
        out = Path(tmp)
        argv = redirect_outputs(local_command(replay_argv(list(header.command or [])),
                                              header.tokenizer, WARMUP_CASSETTE, out,
                                              skip=OUTPUT_FLAGS), out)
        os.chdir(out)
        try:
            run = run_env(LAYER_DIR / "multi_signal_env.py", argv, cassette=WARMUP_CASSETTE,
                          options=RunOptions(), log_path=out / "env.log",
                          env_name=header.env_name, raise_errors=True, as_recorded=True)
        finally:
            os.chdir(here)
    return sorted(run.rewards)


def verdict_lines(name: str, replayed: Replayed, seconds: float, style: Style) -> list[str]:
    """The verdict of one cassette: a status word, the cassette, what moved or broke."""
    s = replayed.summary
    took = style(f"({seconds:.2f} s)", "dim")
    if s.skipped:
        return [f"{style('skip', 'yellow')}    {name}: {sanitize(s.skipped)}"]
    if s.misses:
        head = [f"{style('MISS', 'red')}    {name}: {s.misses} request(s) not in the cassette "
                f"{took}"]
        return head + _indented(replayed.printed)
    if s.error or s.exit_code:
        why = s.error or f"the environment exited with code {s.exit_code}"
        head = [f"{style('ERROR', 'red')}   {name}: {sanitize(why.splitlines()[0])} {took}"]
        return head + _indented(replayed.printed)
    against = f"the accepted {s.baseline}" if s.baseline else "the recording"
    if s.changed:
        out = [f"{style('CHANGED', 'yellow')} {name}: {len(s.changed)} of {s.rollouts} "
               f"reward(s) moved from {sanitize(against)} {took}"]
        for rid, (old, new) in sorted(s.changed.items()):
            out.append(f"    {sanitize(named(rid, s.labels.get(rid)))}: {fmt_reward(old)} -> "
                       f"{fmt_reward(new)}")
        return out
    same = f", as in {sanitize(against)}" if s.baseline else ""
    return [f"{style('ok', 'green')}      {name}: {s.rollouts} rollouts, {s.turns} turns, "
            f"mean reward {fmt_reward(s.mean_reward)}{same} {took}"]


def _indented(text: str, limit: int = 60) -> list[str]:
    lines = [sanitize(line) for line in text.rstrip().splitlines()]
    if len(lines) > limit:
        lines = [*lines[:limit], f"… {len(lines) - limit} more lines"]
    return ["    " + line for line in lines]


def died_lines(name: str, error: str, style: Style) -> list[str]:
    """A run whose process died or raised outside the replay (an error of ours)."""
    return [f"{style('ERROR', 'red')}   {name}: the replay process failed", *_indented(error)]

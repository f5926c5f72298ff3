"""Running a fork: the parent's recorded command, re-run with a live endpoint, under a session
in fork mode (``_session.forking``) on a copy of the parent that becomes the branch.

Why the whole recorded command and not the one rollout alone: a rollout's identity (its item,
its occurrence, its group slot) and its env's state come from the run that made it, and only
the same command makes them again. Every other rollout of the run replays exactly from the
parent — nothing is sent or executed for it — so the cost of a fork is the live part of one
rollout, and the branch holds the whole run: it replays offline like any cassette.
"""

from __future__ import annotations

import contextlib
import shutil
import statistics
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hermes_replay._cassette.load import load_cassette
from hermes_replay._cassette.toolcalls import ToolCall
from hermes_replay._cassette.write import write_cassette
from hermes_replay._errors import CassetteError, ForkError
from hermes_replay._fork.plan import ForkPlan, agent_turns, fork_link, plan_fork
from hermes_replay._runner.endpoint import Endpoint
from hermes_replay._runner.plan import _ENDPOINT_FLAGS

__all__ = ["Branch", "ForkResult", "fork_rollout"]


@dataclass
class Branch:
    """One continuation: its cassette, its reward, the turns it added, the drift found."""

    path: Path
    reward: float | None
    turns: int  # the rollout's agent turns in the branch (prefix included)
    drift: list[str] = field(default_factory=list)  # one line per re-run call that differed
    rebuilt: int = 0  # recorded tool calls re-run to rebuild the sandbox
    #: the agent's tool calls from the fork's turn on (what a test asserts: "it calls pytest")
    calls: list[ToolCall] = field(default_factory=list)

    def commands(self) -> list[str]:
        """The ``command`` argument of each of ``calls`` that has one (terminal calls)."""
        return [str(c.arguments["command"]) for c in self.calls
                if isinstance(c.arguments, dict) and "command" in c.arguments]


@dataclass
class ForkResult:
    """What ``fork_rollout`` made: the parent's rollout and reward, and each branch."""

    parent: Path
    rollout: str
    turn: int
    parent_reward: float | None
    branches: list[Branch]

    @property
    def rewards(self) -> list[float]:
        return [b.reward for b in self.branches if b.reward is not None]

    def spread(self) -> dict[str, float]:
        """mean, stdev (0 for one), min and max of the branches' rewards ({} if none)."""
        rewards = self.rewards
        if not rewards:
            return {}
        return {"mean": statistics.fmean(rewards),
                "stdev": statistics.pstdev(rewards) if len(rewards) > 1 else 0.0,
                "min": min(rewards), "max": max(rewards)}


def fork_rollout(cassette: str | Path, rollout: str, turn: int, *, base_url: str,
                 model: str | None = None,
                 server_type: str = "openai", api_key_env: str | None = None,
                 samples: int = 1, replace: tuple[int, str] | None = None,
                 strict: bool = False, branch: str | Path | None = None,
                 out_dir: str | Path | None = None, first_answer_timeout: float = 120.0,
                 on_event: Callable[[Any], None] | None = None) -> ForkResult:
    """Fork ``rollout`` of ``cassette`` at ``turn`` and continue it live against ``base_url``
    (serving ``model``: by default the recorded one, which the replayed turns name).

    Turns before ``turn`` replay from the recording (the env's own code, the model's recorded
    replies); at ``turn`` the sandbox is rebuilt by re-running the recorded agent tool calls in
    a fresh bubblewrap sandbox (drift is reported per call; ``strict`` stops at the first); the
    agent loop then goes on live, the reward runs live, and the branch — a new cassette whose
    header's ``fork`` names the parent, rollout, turn and the parent rollout's fingerprint — is
    written to ``branch`` (default: beside the parent, ``<stem>.fork-<rollout>-t<turn>.jsonl``).
    ``samples`` > 1 continues that many times from the same prefix (one branch each, ``-sN``
    appended); ``replace=(turn, text)`` gives the model ``text`` as the tool result it sees
    last at ``turn``. Raises ``ForkError`` where a fork cannot work, naming why.
    """
    from hermes_replay._runner.endpoint import endpoint_from_args

    if not isinstance(samples, int) or isinstance(samples, bool) or samples < 1:
        raise ValueError(f"samples must be a whole number ≥ 1, not {samples!r}")
    parent_path = Path(cassette)
    parent = load_cassette(parent_path)
    plan = plan_fork(parent, rollout, turn, replace)
    model = model or parent.header.model
    endpoint = endpoint_from_args(endpoint=base_url, model=model, server_type=server_type,
                                  api_key_env=api_key_env, env_args=[])
    assert endpoint is not None
    if parent.header.model and parent.header.model != model:
        raise ForkError(
            f"the recording's requests name model {parent.header.model!r}, not {model!r}: "
            "the replayed turns would not match their recordings",
            cassette=parent_path, rollout=rollout, turn=turn,
            hint=f"pass --model {parent.header.model} (the endpoint may serve any model "
            "under that name)")
    first = Path(branch) if branch is not None else _default_branch(parent_path, plan)
    paths = [first] if samples == 1 else [
        first.with_name(f"{_stem(first)}-s{i}{_suffix(first)}") for i in range(1, samples + 1)]
    # the env's own outputs (groups.jsonl, its log): never beside the cassettes
    out_root = Path(out_dir) if out_dir is not None else Path(
        tempfile.mkdtemp(prefix="hermes-replay-fork-"))
    branches = []
    for i, path in enumerate(paths, start=1):
        link = fork_link(plan, path, sample=i, samples=samples)
        branches.append(_one_branch(parent, plan, path, link, endpoint, strict,
                                    out_root / path.name.split(".")[0],
                                    first_answer_timeout, on_event))
    if out_dir is None:  # ours, and nothing failed: a failure's message names its env.log
        shutil.rmtree(out_root, ignore_errors=True)
    reward = parent.rollouts[rollout].outcome.get("reward")
    return ForkResult(parent_path, rollout, turn,
                      None if reward is None else float(reward), branches)


def _one_branch(parent: Any, plan: ForkPlan, path: Path, link: dict[str, Any],
                endpoint: Endpoint, strict: bool, out: Path, first_answer_timeout: float,
                on_event: Callable[[Any], None] | None) -> Branch:
    from hermes_replay._runner.run import run_env

    if path.resolve() == plan.cassette.resolve():
        raise ForkError("the branch would replace its parent", cassette=plan.cassette,
                        rollout=plan.rollout, turn=plan.turn, hint="give another --branch PATH")
    env_file, argv, base, module = _command(parent, path, endpoint, out)
    # the branch starts as the parent's copy: the session replays from it and writes over it
    write_cassette(path, parent.header, parent.interactions, parent.outcomes, parent.tool_calls)
    with contextlib.chdir(base):
        result = run_env(env_file, argv, cassette=path, mode="auto", module=module,
                         log_path=out / "env.log", on_event=on_event,
                         first_answer_timeout=first_answer_timeout,
                         session={"drop_unrun": True, "fork": plan.session_fork(strict),
                                  "header": {"fork": link}})
    if result.error is not None or result.exit_code != 0:
        _discard(path)
        error = result.error
        if isinstance(error, ForkError):
            raise error
        raise ForkError(f"the forked run failed: {error or f'exit code {result.exit_code}'}",
                        cassette=plan.cassette, rollout=plan.rollout, turn=plan.turn,
                        hint=f"the env's output is in {out / 'env.log'}; fix what it says "
                        "and fork again") from error
    written = load_cassette(path).rollouts[plan.rollout]
    summary = result.summary
    drift = [d.describe().strip() for d in (summary.tool_drift if summary else [])
             if d.rollout == plan.rollout]
    reward = written.outcome.get("reward")
    agent = sorted((c for c in written.tool_calls if c.source == "agent"), key=lambda c: c.seq)
    rebuilt = len([c for c in agent if c.turn < plan.turn - 1])
    return Branch(path, None if reward is None else float(reward), len(agent_turns(written)),
                  drift, rebuilt, [c for c in agent if c.turn >= plan.turn - 1])


def _command(parent: Any, branch: Path, endpoint: Endpoint, out: Path
             ) -> tuple[Path, list[str], Path, tuple[str, Path] | None]:
    """The parent's recorded command as this fork runs it: the env file the header names
    (found under the trust rule, as replay finds it), the recorded flags with the fork's
    endpoint instead of the recorded one, outputs moved into ``out``."""
    from hermes_replay._runner.out_dir import fresh_out_dir
    from hermes_replay._runner.plan import (
        OUTPUT_FLAGS,
        find_env_file,
        recorded_cwd,
        recorded_module,
        redirect_outputs,
    )
    from hermes_replay._runner.portable import local_command
    from hermes_replay._secrets.redact import redact_argv

    header = parent.header
    path = parent.path
    if not header.env_file or not header.command:
        raise ForkError("the header names no env file and command to re-run", cassette=path,
                        hint="record the parent with `hermes-replay record ENV -- process …`")
    env_file = find_env_file(header.env_file, Path(path))
    if env_file is None:
        raise ForkError(f"the recorded env file {header.env_file} was not found in a folder "
                        "you trust", cassette=path,
                        hint="run from the project the env lives in, once trusted "
                        "(`hermes-replay trust DIR`)")
    root = env_file.resolve().parents[len(Path(header.env_file).parts) - 1]
    base = recorded_cwd(root, header.extra)
    module = recorded_module(env_file, root, header.extra)
    argv = _without_endpoint(list(header.command))
    import os

    secret = endpoint.secret_flags(os.environ)
    redact_argv(secret)  # the key becomes a known secret: scrubbed from all the fork writes
    argv += [*endpoint.env_flags(), *secret]
    try:
        # paths the header names (a stored tokenizer) lie beside the parent
        argv = local_command(argv, header.tokenizer, Path(path).resolve(), base,
                             skip=OUTPUT_FLAGS)
    except CassetteError as exc:
        raise ForkError(str(exc), cassette=path, hint="record the parent on this machine, "
                        "or fork where it was recorded") from None
    argv = redirect_outputs(argv, out.resolve())
    out.mkdir(parents=True, exist_ok=True)
    fresh_out_dir(out.resolve(), argv)
    return env_file.resolve(), argv, base, module


def _without_endpoint(argv: Sequence[str]) -> list[str]:
    """``argv`` less the recorded endpoint's flags (``--flag V`` and ``--flag=V``)."""
    from hermes_replay._runner.plan import without_flag

    out = list(argv)
    for flag in (*_ENDPOINT_FLAGS, "--openai.api_key"):
        out = without_flag(out, flag)
    return out


def _default_branch(parent: Path, plan: ForkPlan) -> Path:
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in plan.rollout)
    return parent.with_name(f"{_stem(parent)}.fork-{safe}-t{plan.turn}.jsonl")


def _stem(path: Path) -> str:
    name = path.name
    for suffix in (".jsonl.zst", ".jsonl"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return path.stem


def _suffix(path: Path) -> str:
    return ".jsonl.zst" if path.name.endswith(".jsonl.zst") else ".jsonl"


def _discard(path: Path) -> None:
    """A failed fork leaves no branch behind (the copy it started from, its journal)."""
    from hermes_replay._cassette import partial_path

    for leftover in (path, partial_path(path)):
        with contextlib.suppress(OSError):
            leftover.unlink(missing_ok=True)

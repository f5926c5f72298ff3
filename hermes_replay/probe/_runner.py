"""Run one probe through an environment's real ``process`` path, twice.

1. **Record**: the env file's own CLI runs in this process (``process`` with ``group_size`` 1 on
   N items) against a scripted endpoint that plays the probe; the traffic is recorded to
   ``cassettes/<env>/probe-<name>.jsonl`` (replacing an older one only when the run succeeded).
   Agent loop, tool calls, sandbox and ``compute_reward`` are the environment's own.
2. **Replay**: the cassette is replayed (same replies; tools executed again, not answered from
   the recording) and each rollout's reward is compared with the first run's: a difference, or
   a request the recording does not hold, is the environment's nondeterminism.

``env_args`` (the env's own flags, e.g. ``--env.terminal_backend local`` for a file whose
default backend is not provided here) follow the probe's flags on the command line and are kept
in the cassette's command, so the replay runs them too; the flags the probe sets itself are
refused (:func:`probe_env_args`).

Network other than loopback is refused during both runs. atroposlib's ``process`` retries a
group it got nothing back for, forever; a run that keeps doing so — more rollouts than it was
given items, or ``collect_trajectories`` returning no group again and again (an env that drops
groups whose scores are all equal drops every group of one) — is stopped with
``ProbeRunaway``.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hermes_replay._errors import HermesReplayError
from hermes_replay._session.known_good import Reference, collecting_known_good
from hermes_replay.probe._registry import Probe, ProbeContext, probe_script

__all__ = ["ProbeRun", "ProbeRunaway", "probe_env_args", "run_probe"]

OUTPUT_NAME = "groups.jsonl"
#: Flags every probe run sets itself (one item per step, group of 1, its own endpoint).
OWNED_FLAGS = ("--env.total_steps", "--env.group_size", "--env.data_path_to_save_groups")


class ProbeRunaway(HermesReplayError):
    """The environment ran far more rollouts than the probe asked for (a retry loop)."""


@dataclass
class ProbeRun:
    """What one probe did to an environment (both runs)."""

    probe: Probe
    cassette: Path
    items: int
    outcomes: dict[str, dict[str, Any]] = field(default_factory=dict)
    annotations: dict[str, Any] = field(default_factory=dict)
    exit_code: int = 0
    error: str | None = None  # the env crashed or hermes-replay stopped it
    replay_rewards: dict[str, float | None] | None = None
    replay_error: str | None = None
    tools: list[dict[str, Any]] = field(default_factory=list)
    known_good_offers: int = 0
    log: Path | None = None

    @property
    def rewards(self) -> dict[str, float | None]:
        out: dict[str, float | None] = {}
        for rid, outcome in sorted(self.outcomes.items()):
            value = outcome.get("reward")
            out[rid] = float(value) if isinstance(value, (int, float)) else None
        return out


class _Outcomes:
    """What each finished rollout reported; stops a run that goes on long after its items."""

    def __init__(self, limit: int | None = None) -> None:
        self.outcomes: dict[str, dict[str, Any]] = {}
        self.limit = limit

    def __call__(self, rollout_id: str, outcome: dict[str, Any]) -> None:
        self.outcomes[rollout_id] = dict(outcome)
        if self.limit is not None and len(self.outcomes) > self.limit:
            raise ProbeRunaway(
                f"the environment ran {len(self.outcomes)} rollouts for a probe of "
                f"{(self.limit - 4) // 4} items: atroposlib's process retries a group it cannot "
                "score (a rollout without tokens drops the group) forever. See the log."
            )


#: atroposlib's logger, and the warning it logs before retrying a group forever.
_ATROPOS_LOGGER = "atroposlib.envs.base"
_RETRYING = "Failed to process group"


class _RetryGuard(logging.Filter):
    """Counts atroposlib's "retrying" warnings and ends the run past ``limit``: the only sign of
    an env whose ``collect_trajectories`` never returns a group (no rollout, no request)."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit
        self.retries = 0

    def filter(self, record: logging.LogRecord) -> bool:
        if record.getMessage().startswith(_RETRYING):
            self.retries += 1
            if self.retries > self.limit:
                raise ProbeRunaway(
                    f"collect_trajectories returned no group {self.retries} times for a probe "
                    f"of {(self.limit - 4) // 4} items, and atroposlib's process retries "
                    "forever. A probe runs groups of one: does the env drop groups whose "
                    "scores are all equal, or override collect_trajectories without returning "
                    "the group?")
        return True


@contextmanager
def _bounded_retries(items: int) -> Iterator[None]:
    logger = logging.getLogger(_ATROPOS_LOGGER)
    guard = _RetryGuard(limit=4 * items + 4)
    logger.addFilter(guard)
    try:
        yield
    finally:
        logger.removeFilter(guard)


def probe_env_args(env_args: Sequence[str]) -> list[str]:
    """``env_args`` checked for a probe run: an optional leading ``process`` is dropped; another
    mode, or a flag the probe sets itself, is a ``ValueError`` saying why."""
    flags = list(env_args)
    if flags and flags[0] == "process":
        flags = flags[1:]
    if flags and flags[0] in ("serve", "evaluate"):
        raise ValueError(f"a probe runs the environment's `process` mode, not {flags[0]!r}; "
                         "after `--` give only the env's own flags, e.g. -- "
                         "--env.terminal_backend local")
    for flag in flags:
        name = flag.split("=", 1)[0]
        if name in OWNED_FLAGS or name.startswith("--openai."):
            raise ValueError(f"{name} is set by the probe itself (each probe runs N items, "
                             "one rollout each, against its own scripted endpoint); use --items "
                             "for the number of items and leave it out after `--`")
    return flags


def env_argv(items: int, base_url: str, model: str, out_dir: Path | None,
             env_args: Sequence[str] = (), server_type: str = "openai") -> list[str]:
    """The env CLI command of a probe run (``out_dir`` None: the form stored in the header)."""
    out = str(out_dir / OUTPUT_NAME) if out_dir is not None else OUTPUT_NAME
    health = ["--openai.health_check", "false"] if server_type == "openai" else []
    return ["process", "--env.total_steps", str(items), "--env.group_size", "1",
            "--env.data_path_to_save_groups", out,
            "--openai.base_url", base_url, "--openai.model_name", model,
            "--openai.server_type", server_type, *health, *env_args]


def _offered_tools(requests: list[tuple[str, Any]]) -> list[dict[str, Any]]:
    """Every tool offered in any request of the run, once. Groups may be offered different
    tools (a ``distribution`` draws per group): a probe is n/a only if no rollout could act."""
    seen: dict[str, dict[str, Any]] = {}
    for _, body in requests:
        for tool in (body.get("tools") or []) if isinstance(body, dict) else []:
            fn = tool.get("function", tool) if isinstance(tool, dict) else None
            if isinstance(fn, dict):
                seen.setdefault(str(fn.get("name")), tool)
    return list(seen.values())


def run_probe(env_file: Path, probe: Probe, *, items: int, cassette: Path, work_dir: Path,
              judge: str = "examples", seed: int = 0, replay: bool = True,
              env_args: Sequence[str] = (), known_good: Reference | None = None,
              server_type: str = "openai") -> ProbeRun:
    """Record ``probe`` against ``env_file`` into ``cassette``, then replay it once.

    ``known_good`` (a template over the item's fields, or a function of the item) replaces
    the env's ``known_good_reply`` hook as the source of known-good replies."""
    from hermes_replay import load_cassette
    from hermes_replay._runner.plan import project_root, recorded_env_fields
    from hermes_replay._runner.portable import portable_command
    from hermes_replay._runner.run import run_env
    from hermes_replay.scripted_endpoint import ScriptedEndpoint, get_script

    n = min(items, probe.max_items or items)
    run = ProbeRun(probe, cassette, n)
    work = work_dir / probe.name
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    run.log = work / "env.log"
    model = f"probe-{probe.name}"
    outcomes = _Outcomes(limit=4 * n + 4)
    cassette.parent.mkdir(parents=True, exist_ok=True)
    judge_script = probe.judge or judge
    if isinstance(judge_script, str):
        judge_script = get_script(judge_script)
    env_args = probe_env_args(env_args)
    with collecting_known_good(known_good) as table:
        ctx = ProbeContext(known_good=table)
        with ScriptedEndpoint(script=probe_script(probe, ctx, judge_script),
                              seed=seed) as endpoint:
            # vLLM/SGLang servers are given the root: they add /generate themselves
            url = endpoint.base_url if server_type == "openai" else endpoint.root_url
            located = recorded_env_fields(env_file)
            header = {
                **located,
                # no path of this machine (``_runner/portable.py``)
                "command": portable_command(env_argv(n, url, model, None, env_args, server_type),
                                            Path.cwd().resolve(), project_root(env_file.parent)),
                "endpoint_type": server_type, "base_url": url, "model": model,
                "extra": {**located.get("extra", {}),
                          "probe": {"name": probe.name, "kind": probe.kind, "items": n,
                                    "judge": judge_script.name, "seed": seed}},
            }
            argv = env_argv(n, url, model, work, env_args, server_type)
            _trust_the_project(env_file, header["env_file"])
            # One seed for the endpoint and the env's `random`/numpy: a re-run is the same run.
            with _bounded_retries(n):
                result = run_env(env_file, argv, cassette=cassette, mode="record",
                                 log_path=run.log, block_network=True, on_rollout=outcomes,
                                 header=header, seed=seed)
            run.tools = _offered_tools(endpoint.requests)
        run.known_good_offers = table.offers
    run.exit_code = result.exit_code
    if isinstance(result.error, ProbeRunaway):  # says why itself
        run.error = f"{_first_line(result.error)}; see {run.log}"
    elif result.error is not None:
        run.error = f"{_first_line(result.error)}{_last_words(run.log)}; see {run.log}"
    run.outcomes = outcomes.outcomes
    if run.error is None:
        run.annotations = dict(load_cassette(cassette).header.extra)
        if replay and run.outcomes:
            _replay(run, env_file, argv, work)
    return run


def _replay(run: ProbeRun, env_file: Path, argv: list[str], work: Path) -> None:
    """Second run from the cassette: the same replies must give the same rewards."""
    from hermes_replay._errors import CassetteMiss
    from hermes_replay._runner.run import run_env

    outcomes = _Outcomes()
    log = work / "replay.log"
    # Tools run again (``execute``): a reward whose verifier answers differently the second
    # time is what this run is for. Tool output that drifts without changing a reward is not
    # a finding here (not strict); drift that changes the next prompt is a miss, and is one.
    with _bounded_retries(run.items):
        result = run_env(env_file, argv, cassette=run.cassette, mode="replay", log_path=log,
                         tools="execute", on_rollout=outcomes)
    if isinstance(result.error, CassetteMiss):
        run.replay_error = "the environment asked something else: " + _first_line(result.error)
    elif result.error is not None:
        run.replay_error = _first_line(result.error)
    elif result.exit_code != 0:
        run.replay_error = f"the replay exited with code {result.exit_code}; see {log}"
    run.replay_rewards = {rid: (float(o["reward"]) if isinstance(o.get("reward"), (int, float))
                                else None) for rid, o in outcomes.outcomes.items()}


def _last_words(log: Path | None) -> str:
    """What the environment said last (a startup error, the exception of a traceback): the
    last line of the log's end that is not indented (traceback frames and footers are)."""
    from hermes_replay._runner.verdict import log_tail

    said = next((line for line in reversed(log_tail(log, 40))
                 if line[:1].strip() and not line.startswith("Traceback")), None)
    if said is None:
        return ""
    hint = (" (env flags go after `--`: hermes-replay probe ENV_FILE -- --env.FIELD VALUE)"
            if "--env." in said else "")
    return f" — the environment said: {said.strip()}{hint}"


def _first_line(exc: BaseException) -> str:
    lines = [line for line in str(exc).splitlines() if line.strip()]
    return " / ".join(lines[:2]) if lines else type(exc).__name__


def _trust_the_project(env_file: Path, recorded_name: str) -> None:
    """The user asked to run this env: its probe cassettes replay it again from its project
    (``_runner.trust``); an unwritable trust list only means a replay asks for the step."""
    from hermes_replay._runner.trust import trust_recorded

    trust_recorded(env_file, recorded_name)

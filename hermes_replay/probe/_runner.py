"""Run one probe through an environment's real ``process`` path, twice.

1. **Record**: the env file's own CLI runs in this process (``process`` with ``group_size`` 1 on
   N items) against a scripted endpoint that plays the probe; the traffic is recorded to
   ``cassettes/<env>/probe-<name>.jsonl`` (replacing an older one only when the run succeeded).
   Agent loop, tool calls, sandbox and ``compute_reward`` are the environment's own.
2. **Replay**: the cassette is replayed (same replies, tools run again) and each rollout's
   reward is compared with the first run's: a difference is the environment's nondeterminism.

Network other than loopback is refused during both runs. A run that keeps asking for more
rollouts than it was given items (atroposlib's ``process`` retries a group it cannot score,
forever) is stopped with ``ProbeRunaway``.
"""

from __future__ import annotations

import shutil
from contextlib import ExitStack, redirect_stderr, redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hermes_replay._envrun import OutcomeCollector, run_env_file
from hermes_replay._errors import HermesReplayError
from hermes_replay._known_good import collecting_known_good
from hermes_replay.probe._registry import Probe, ProbeContext, probe_script

__all__ = ["ProbeRun", "ProbeRunaway", "run_probe"]

OUTPUT_NAME = "groups.jsonl"


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


class _Budget(OutcomeCollector):
    """Collects outcomes and stops a run that goes on long after its items are done."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def rollout_finished(self, scope: Any) -> None:
        super().rollout_finished(scope)
        if len(self.outcomes) > self.limit:
            raise ProbeRunaway(
                f"the environment ran {len(self.outcomes)} rollouts for a probe of "
                f"{self.limit // 4} items: atroposlib's process retries a group it cannot "
                "score (a rollout without tokens drops the group) forever. See the log."
            )


def env_argv(items: int, base_url: str, model: str, out_dir: Path | None) -> list[str]:
    """The env CLI command of a probe run (``out_dir`` None: the form stored in the header)."""
    out = str(out_dir / OUTPUT_NAME) if out_dir is not None else OUTPUT_NAME
    return ["process", "--env.total_steps", str(items), "--env.group_size", "1",
            "--env.data_path_to_save_groups", out,
            "--openai.base_url", base_url, "--openai.model_name", model,
            "--openai.server_type", "openai", "--openai.health_check", "false"]


def _first_tools(requests: list[tuple[str, Any]]) -> list[dict[str, Any]]:
    for _, body in requests:
        if isinstance(body, dict) and body.get("tools"):
            return list(body["tools"])
    return []


def run_probe(env_file: Path, probe: Probe, *, items: int, cassette: Path, work_dir: Path,
              judge: str = "examples", seed: int = 0, replay: bool = True) -> ProbeRun:
    """Record ``probe`` against ``env_file`` into ``cassette``, then replay it once."""
    from hermes_replay._cli._runner import relative_to_cwd
    from hermes_replay.scripted_endpoint import ScriptedEndpoint, get_script

    n = min(items, probe.max_items or items)
    run = ProbeRun(probe, cassette, n)
    work = work_dir / probe.name
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    run.log = work / "env.log"
    model = f"probe-{probe.name}"
    budget = _Budget(limit=4 * n + 4)
    cassette.parent.mkdir(parents=True, exist_ok=True)
    with collecting_known_good() as table:
        ctx = ProbeContext(known_good=table)
        judge_script = probe.judge or judge
        if isinstance(judge_script, str):
            judge_script = get_script(judge_script)
        with ScriptedEndpoint(script=probe_script(probe, ctx, judge_script),
                              seed=seed) as endpoint:
            header = {
                "env_file": relative_to_cwd(env_file),
                "command": env_argv(n, endpoint.base_url, model, None),
                "endpoint_type": "openai", "base_url": endpoint.base_url, "model": model,
                "extra": {"probe": {"name": probe.name, "kind": probe.kind, "items": n,
                                    "judge": judge_script.name, "seed": seed}},
            }
            argv = env_argv(n, endpoint.base_url, model, work)
            try:
                run.exit_code = _run_env(env_file, argv, cassette, "record", budget, run.log,
                                         header=header)
            except _EnvFailed as exc:
                run.exit_code = exc.code
                run.error = f"the environment exited with code {exc.code}; see {run.log}"
            except HermesReplayError as exc:
                run.error = str(exc).strip().splitlines()[0]
                run.exit_code = run.exit_code or 1
            run.tools = _first_tools(endpoint.requests)
        run.known_good_offers = table.offers
    run.outcomes = dict(budget.outcomes)
    run.annotations = dict(budget.annotations)
    if replay and run.error is None and run.outcomes:
        _replay(run, env_file, argv, work)
    return run


def _run_env(env_file: Path, argv: list[str], cassette: Path, mode: str,
             collector: OutcomeCollector, log_path: Path, **options: Any) -> int:
    """The env CLI in this process inside the cassette, network limited to loopback.

    A non-zero exit raises ``_EnvFailed`` inside the cassette block, so a recording keeps
    the previous cassette."""
    import hermes_replay
    from hermes_replay._netblock import block_network
    from hermes_replay._wandb import capture_wandb

    with ExitStack() as stack:
        stack.enter_context(block_network())
        stack.enter_context(capture_wandb())
        stack.enter_context(collector.listening())
        stack.enter_context(hermes_replay.cassette(cassette, mode=mode,  # type: ignore[arg-type]
                                                   **options))
        log = stack.enter_context(log_path.open("w", encoding="utf-8"))
        with redirect_stdout(log), redirect_stderr(log):
            code = run_env_file(env_file, argv)
        if code != 0:
            raise _EnvFailed(code)
    return code


class _EnvFailed(Exception):
    def __init__(self, code: int) -> None:
        super().__init__(f"exit code {code}")
        self.code = code


def _replay(run: ProbeRun, env_file: Path, argv: list[str], work: Path) -> None:
    """Second run from the cassette: the same replies must give the same rewards."""
    from hermes_replay._errors import CassetteMiss

    collector = OutcomeCollector()
    log = work / "replay.log"
    try:
        _run_env(env_file, argv, run.cassette, "replay", collector, log, strict=True)
    except CassetteMiss as exc:
        run.replay_error = "the environment asked something else: " + _first_line(exc)
    except _EnvFailed as exc:
        run.replay_error = f"the replay exited with code {exc.code}; see {log}"
    except HermesReplayError as exc:
        run.replay_error = _first_line(exc)
    run.replay_rewards = {rid: (float(o["reward"]) if isinstance(o.get("reward"), (int, float))
                                else None) for rid, o in collector.outcomes.items()}


def _first_line(exc: BaseException) -> str:
    lines = [line for line in str(exc).splitlines() if line.strip()]
    return " / ".join(lines[:2]) if lines else type(exc).__name__

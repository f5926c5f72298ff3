"""One rollout of a Hermes environment, start to finish (used by ``HermesAgentBaseEnv``).

Kept out of the base class so the order of things — identity scope, sandbox, agent loop, reward,
cleanup, tokens, report — reads top to bottom in one function.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import math
from dataclasses import dataclass, field
from typing import Any, Protocol

import hermes_replay
from environments import _managed, _tokens
from environments._ids import item_fingerprint, rollout_id_for, task_id_for
from environments.agent_loop import AgentResult, HermesAgentLoop
from environments.tool_context import ToolContext


class RolloutEnv(Protocol):
    """What a rollout needs of its environment (``HermesAgentBaseEnv`` is one); a protocol,
    so this module and the base class do not import each other."""

    config: Any
    server: Any
    tokenizer: Any

    @property
    def phase2(self) -> bool: ...

    def initial_messages(self, item: Any) -> list[dict[str, Any]]: ...

    async def compute_reward(self, item: Any, result: AgentResult, ctx: ToolContext) -> float: ...

logger = logging.getLogger(__name__)


@dataclass
class Rollout:
    """Everything one rollout produced. ``tokens`` is None when they could not be built."""

    rollout_id: str
    task_id: str
    item: Any
    phase: str
    result: AgentResult
    reward: float = 0.0
    reward_error: str | None = None
    tokens: list[int] | None = None
    masks: list[int] | None = None
    logprobs: list[float] | None = None
    messages: list[dict[str, Any]] = field(default_factory=list)

    @property
    def tool_errors(self) -> int:
        return len(self.result.tool_errors)

    @property
    def turns_used(self) -> int:
        return self.result.turns_used

    @property
    def finished_naturally(self) -> bool:
        return self.result.finished_naturally

    @property
    def final_response(self) -> str:
        """The last assistant message with text content ('' if none)."""
        for msg in reversed(self.messages):
            if msg.get("role") == "assistant" and msg.get("content"):
                return str(msg["content"])
        return ""


def _jsonable(value: Any) -> Any:
    """Messages as plain JSON (SDK objects dumped), every message with a ``content`` key."""
    if hasattr(value, "model_dump"):
        value = value.model_dump(exclude_none=True)
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


def plain_messages(messages: list[Any]) -> list[dict[str, Any]]:
    out = []
    for msg in messages:
        msg = _jsonable(msg)
        msg.setdefault("content", None)  # the trajectory API rejects messages without it
        out.append(msg)
    return out


class _EvalSplit:
    """Routes a server's requests through its eval semaphore (``split="eval"``), so eval
    rollouts neither starve nor are starved by training; nothing changes on the wire."""

    def __init__(self, server: Any) -> None:
        self._server = server

    async def chat_completion(self, **kwargs: Any) -> Any:
        return await self._server.chat_completion(split="eval", **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._server, name)


def _first_user_text(messages: list[dict[str, Any]]) -> str:
    content = next((m.get("content") for m in messages if m.get("role") == "user"), "")
    return content if isinstance(content, str) else str(content or "")


async def _cleanup(ctx: ToolContext, rollout_id: str) -> None:
    try:
        if hasattr(ctx, "acleanup"):
            await ctx.acleanup()  # off the event loop: other rollouts keep running
        elif inspect.iscoroutinefunction(ctx.cleanup):
            await ctx.cleanup()
        else:
            await asyncio.to_thread(ctx.cleanup)
    except Exception:
        logger.exception("rollout %s: ToolContext.cleanup failed", rollout_id)


def _with_parts(value: Any) -> float:
    """``compute_reward``'s value: a float, or ``(reward, {"part": value, …})`` whose parts
    are kept with the rollout's outcome (``hermes_replay.reward_parts``)."""
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[1], dict):
        hermes_replay.reward_parts(value[1])
        value = value[0]
    return float(value)


async def _score(env: RolloutEnv, item: Any, result: AgentResult, ctx: ToolContext,
                 rollout_id: str) -> tuple[float, str | None]:
    try:
        with hermes_replay.scoring():  # a judge's requests are reward calls, not agent turns
            reward = _with_parts(await env.compute_reward(item, result, ctx))
    except hermes_replay.RequestNotRecorded as miss:
        # a replayed judge call with no recording: the session reports it (with its diff) as
        # the run's verdict; this rollout scores 0.0 and the other rollouts still run
        logger.warning("rollout %s: reward call had no recording (%s); reward 0.0", rollout_id,
                       miss.miss.headline())
        return 0.0, "replay miss in compute_reward"
    except Exception as exc:
        logger.exception("rollout %s: compute_reward raised; reward 0.0 (counted in "
                         "train/reward_errors)", rollout_id)
        return 0.0, f"{type(exc).__name__}: {exc}"
    if math.isnan(reward):
        logger.error("rollout %s: compute_reward returned NaN; reward 0.0", rollout_id)
        return 0.0, "NaN reward"
    return reward, None


async def run_rollout(env: RolloutEnv, item: Any, tool_schemas: list[dict],
                      valid_names: set[str], *, occurrence: int, slot: int, phase: str,
                      temperature: float) -> Rollout:
    prefix = "eval" if phase == "eval" else "train"
    rollout_id = rollout_id_for(item, occurrence, slot, prefix=prefix, worker=env.worker)
    task_id = task_id_for(rollout_id)
    cfg = env.config
    loop_kwargs = dict(tool_schemas=tool_schemas, valid_tool_names=valid_names,
                       max_turns=cfg.max_agent_turns, task_id=task_id, temperature=temperature,
                       max_tokens=cfg.max_token_length, extra_body=cfg.extra_body,
                       tool_call_parser=cfg.tool_call_parser,
                       terminal_backend=cfg.terminal_backend,
                       terminal_timeout=cfg.terminal_timeout,
                       budget_config=cfg.build_budget_config())
    with hermes_replay.rollout(rollout_id) as scope:
        ctx = ToolContext(task_id, backend=cfg.terminal_backend)
        managed_tokens = None
        try:
            messages = env.initial_messages(item)
            # Only while `hermes-replay probe` runs is the hook called (see known_good_reply).
            hermes_replay.offer_known_good(_first_user_text(messages),
                                           lambda: env.known_good_reply(item), item)
            if env.phase2:
                async with env.server.managed_server(tokenizer=env.tokenizer) as managed:
                    _managed.install_translator(managed, cfg.tool_call_parser)
                    server = _EvalSplit(managed) if phase == "eval" else managed
                    result = await HermesAgentLoop(server=server, **loop_kwargs).run(messages)
                    result.managed_state = managed.get_state()
                    managed_tokens = _managed.final_sequence(result.managed_state)
            else:
                server = _EvalSplit(env.server) if phase == "eval" else env.server
                result = await HermesAgentLoop(server=server, **loop_kwargs).run(messages)
            reward, error = await _score(env, item, result, ctx, rollout_id)
        finally:
            await _cleanup(ctx, rollout_id)
        outcome = Rollout(rollout_id, task_id, item, phase, result, reward, error,
                          messages=plain_messages(result.messages))
        if managed_tokens is not None:
            outcome.tokens, outcome.masks, outcome.logprobs = managed_tokens
        elif env.phase2:
            logger.error("rollout %s: managed server tracked no sequence", rollout_id)
        else:
            try:
                outcome.tokens, outcome.masks = _tokens.tokens_and_masks(
                    env.tokenizer, outcome.messages, tool_schemas or None)
            except Exception:
                logger.exception("rollout %s: could not build training tokens", rollout_id)
        scope.report(reward=outcome.reward, turns_used=outcome.turns_used,
                     finished_naturally=outcome.finished_naturally,
                     tool_errors=outcome.tool_errors, phase=phase,
                     group=item_fingerprint(item), reward_error=error,
                     label=hermes_replay.rollout_label(item, env))
    return outcome

"""``HermesAgentBaseEnv``: multi-turn, tool-calling RL environments on atroposlib's ``BaseEnv``.

An environment author implements ``setup``, ``get_next_item``, ``format_prompt``,
``compute_reward`` and ``evaluate`` (and usually ``wandb_log``); this class runs the agent loop
for every rollout, scores it, and hands atroposlib a ``ScoredDataGroup``::

    collect_trajectories(item)
      └ tools resolved once for the group (_resolve_tools_for_group)
      └ group_size rollouts at once (asyncio.gather), each:
          hermes_replay.rollout(rollout id)            ← identity for record/replay
            HermesAgentLoop(task id).run(messages)     ← own sandbox per rollout
            compute_reward(item, result, ToolContext)  ← a raise gives 0.0, counted, logged
            ToolContext.cleanup()                      ← always, in finally
          tokens/masks: Phase 1 from the chat template, Phase 2 from the ManagedServer state

What an env gets besides that: ``rollout(item, ...)`` (one full rollout → :class:`Rollout`),
``run_eval_rollouts(items)`` (full agent loop with tools at temperature 0, concurrent),
``initial_messages(item)``, ``in_evaluation``, ``phase2``, and a ``wandb_log`` that adds
``train/tool_errors_per_rollout``, ``train/rollouts_with_tool_errors``,
``train/turns_per_rollout``, ``train/finished_naturally`` and ``train/reward_errors``.

Evaluation never pollutes training buffers: every ``evaluate`` a subclass defines is wrapped
(``__init_subclass__``) so it runs under :func:`environments._metrics.evaluation` — list
attributes named ``*_buffer`` (or listed in ``metric_buffers``) ignore writes made from the
evaluation's context, other buffer types are snapshot and restored.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import os
import sys
import time
from abc import abstractmethod
from collections import Counter
from typing import Any, ClassVar

from atroposlib.envs.base import BaseEnv, ScoredDataGroup
from atroposlib.envs.server_handling.openai_server import OpenAIServer
from atroposlib.envs.server_handling.server_baseline import APIServerConfig
from atroposlib.envs.server_handling.server_harness import ServerHarness

import hermes_replay
from environments import _lifetime, _loop_scope, _metrics, _startup
from environments._config import (
    PLACEHOLDER_API_KEY,
    REDACTED,
    EndpointNotConfigured,
    HermesAgentEnvConfig,
    default_server_configs,
    ensure_wandb_offline_safe,
    normalize_server_configs,
    redact_yaml_file,
)
from environments._datasets import load_dataset_rows
from environments._groups_html import bounded_groups_html
from environments._ids import item_fingerprint, worker_from_environment, worker_from_registration
from environments._live_groups import scrub_live_groups
from environments._rollout import Rollout, run_rollout
from environments._startup import StartupError
from environments.agent_loop import AgentResult
from environments.tool_context import ToolContext
from environments.tools import resolve_toolsets
from environments.tools.distributions import sample_toolsets

__all__ = ["HermesAgentBaseEnv", "HermesAgentEnvConfig", "Rollout", "item_fingerprint"]

logger = logging.getLogger(__name__)


class HermesAgentBaseEnv(BaseEnv):
    """Base class of Hermes agent environments; see the module docstring."""

    name: ClassVar[str | None] = None
    env_config_cls: ClassVar[type[HermesAgentEnvConfig]] = HermesAgentEnvConfig
    #: A hint for readers and tooling only; ``config.enabled_toolsets`` decides.
    default_toolsets: ClassVar[tuple[str, ...] | None] = None
    #: Training metric buffers protected during evaluate, besides any ``*_buffer`` attribute.
    metric_buffers: ClassVar[tuple[str, ...]] = ()
    #: The range ``compute_reward`` promises; ``hermes-replay probe`` reports rewards outside it.
    reward_range: ClassVar[tuple[float, float]] = (0.0, 1.0)
    #: Item field holding a known-good reply, read by the default ``known_good_reply``.
    known_good_field: ClassVar[str | None] = None
    #: rollout scopes are opened here (``_rollout``), so the harness adds none of its own
    hermes_replay_own_rollout_scopes: ClassVar[bool] = True

    config: HermesAgentEnvConfig

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        evaluate = cls.__dict__.get("evaluate")
        if evaluate is not None and not getattr(evaluate, "_hermes_guarded", False):
            cls.evaluate = _guard_evaluate(evaluate)  # type: ignore[method-assign]
        compute = cls.__dict__.get("compute_reward")
        if compute is not None and inspect.iscoroutinefunction(compute):
            # a former-layer evaluate scores its own loops: see environments._loop_scope
            cls.compute_reward = _loop_scope.scoped_reward(compute)  # type: ignore[method-assign]

    def __init__(self, config: HermesAgentEnvConfig, server_configs: Any, slurm: bool = False,
                 testing: bool = False) -> None:
        # a configuration that cannot run stops here, naming the field (never zero rewards)
        _startup.check_startup(config)
        # replay: a tokenizer the cassette carries is loaded from its store (no hub needed)
        config.tokenizer_name = hermes_replay.tokenizer_for_run(config.tokenizer_name)
        server_configs = normalize_server_configs(server_configs, config.tokenizer_name)
        if config.wandb_name is None:  # the trajectory API answers 422 to a nameless env
            config.wandb_name = self.name or type(self).__name__
        _startup.check_tokenizer(config.tokenizer_name)
        super().__init__(config, server_configs, slurm=slurm, testing=testing)
        # replay: fail now, before any rollout, if this is not the recorded tokenizer
        hermes_replay.check_tokenizer(config.tokenizer_name)
        if config.data_dir_to_save_evals:
            # atroposlib's evaluate CLI has just written evaluate_config.yaml with the key in it.
            redact_yaml_file(os.path.join(config.data_dir_to_save_evals, "evaluate_config.yaml"))
        self._tool_error_buffer: list[int] = []
        self._turns_buffer: list[int] = []
        self._finished_buffer: list[int] = []
        self._reward_error_buffer: list[int] = []
        self._draws: Counter[tuple[str, str]] = Counter()
        self._anonymous_groups = 0
        self.dataset_items: list[dict[str, Any]] = []
        self._dataset_index = 0
        self._annotated = False
        self.last_wandb_metrics: dict[str, Any] = {}
        # which worker of a deployment this is (part of rollout ids; see environments._ids)
        self.worker: str | None = worker_from_environment()

    # -- what an environment implements ------------------------------------------------------

    async def setup(self) -> None:
        """Load the dataset and split train/eval (called once before anything else).

        Default: the rows of ``dataset_name``/``dataset_split`` (a hub id, or a local file or
        folder) into ``self.dataset_items``; override it for anything else."""
        if not self.config.dataset_name:
            raise NotImplementedError(
                f"{type(self).__name__} implements no setup() and has no dataset: implement "
                "setup(), or set --env.dataset_name <hub id | local file | local folder>")
        self.dataset_items = load_dataset_rows(self.config.dataset_name, self.config.dataset_split)
        if not self.dataset_items:
            raise ValueError(f"dataset {self.config.dataset_name!r} split "
                             f"{self.config.dataset_split!r} has no rows")
        self._dataset_index = 0

    async def get_next_item(self) -> Any:
        """The next training item. Default: cycle through ``self.dataset_items``."""
        if not self.dataset_items:
            raise NotImplementedError(f"{type(self).__name__}: no dataset_items; implement "
                                      "get_next_item() or load them in setup()")
        item = self.dataset_items[self._dataset_index % len(self.dataset_items)]
        self._dataset_index += 1
        return item

    def format_prompt(self, item: Any) -> str:
        """The user message for ``item``. Default: ``item[config.prompt_field]``."""
        field = self.config.prompt_field
        if not isinstance(item, dict) or field not in item:
            keys = ", ".join(map(str, item)) if isinstance(item, dict) else type(item).__name__
            raise KeyError(f"item has no field {field!r} (its fields: {keys}); set "
                           "--env.prompt_field or override format_prompt()")
        return str(item[field])

    @abstractmethod
    async def compute_reward(self, item: Any, result: AgentResult, ctx: ToolContext) -> float:
        """Score one rollout; ``ctx`` reaches the rollout's sandbox. Raising gives 0.0."""

    @abstractmethod
    async def evaluate(self, *args: Any, **kwargs: Any) -> None:
        """Run held-out items through the full agent loop (see ``run_eval_rollouts``)."""

    @classmethod
    def config_init(cls) -> tuple[HermesAgentEnvConfig, list[Any]]:
        """Defaults: the env's config class and ONE server config in a list, no provider."""
        return cls.env_config_cls(), default_server_configs()

    def known_good_reply(self, item: Any) -> str | list[Any] | None:
        """Optional: a reply known to solve ``item``, for ``hermes-replay probe``'s known-good
        probe (which checks that it scores high). Called only while a probe runs.

        A string is the final answer; a list gives the turns, each a string or
        ``{"content": ..., "tool_calls": [[name, arguments_dict], ...]}``. None: no reference.
        The default reads ``item[known_good_field]`` when that class attribute is set.
        """
        field_name = type(self).known_good_field
        if field_name and isinstance(item, dict):
            return item.get(field_name)
        return None

    # -- what an environment gets ------------------------------------------------------------

    @property
    def in_evaluation(self) -> bool:
        """True while ``evaluate`` runs, in its own task and every task it spawned."""
        return _metrics.in_evaluation()

    @property
    def phase2(self) -> bool:
        """True when rollouts go through ``ManagedServer`` (vLLM/SGLang: real tokens/logprobs)."""
        return not all(isinstance(s, (OpenAIServer, ServerHarness)) for s in self.server.servers)

    def _resolve_tools_for_group(self, item: Any = None, occurrence: int | None = None,
                                 phase: str = "train") -> tuple[list[dict[str, Any]], set[str]]:
        """The group's tools: ``enabled_toolsets``, or a draw from ``distribution`` seeded by the
        group's identity (``item``, ``occurrence``, ``phase``) so every run draws the same."""
        cfg = self.config
        disabled = set(cfg.disabled_toolsets or [])
        if cfg.distribution:
            if occurrence is None:  # called without a group: draws in call order
                self._anonymous_groups += 1
                key = f"call-{self._anonymous_groups}"
            else:
                key = f"{phase}-{item_fingerprint(item)}-{occurrence}"
            chosen = sample_toolsets(cfg.distribution, key, disabled)
        elif cfg.enabled_toolsets is not None:
            chosen = list(cfg.enabled_toolsets)
        else:
            chosen = _startup.default_toolsets(cfg)
        return resolve_toolsets(chosen, disabled)

    def initial_messages(self, item: Any) -> list[dict[str, Any]]:
        """System prompt (if configured) + the formatted user prompt."""
        messages: list[dict[str, Any]] = []
        if self.config.system_prompt:
            messages.append({"role": "system", "content": self.config.system_prompt})
        messages.append({"role": "user", "content": self.format_prompt(item)})
        return messages

    def _occurrence(self, item: Any, phase: str) -> int:
        key = (phase, item_fingerprint(item))
        n = self._draws[key]
        self._draws[key] += 1
        return n

    async def rollout(self, item: Any, *, tools: tuple[list[dict], set[str]] | None = None,
                      occurrence: int = 0, slot: int = 0, phase: str = "train",
                      temperature: float | None = None) -> Rollout:
        """One full rollout of ``item``: agent loop, reward, tokens; never raises for a reward."""
        self._annotate_once()
        _lifetime.reap_idle(self.config.terminal_lifetime)
        tool_schemas, valid_names = tools or self._resolve_tools_for_group(item, occurrence, phase)
        if temperature is None:
            temperature = self.config.agent_temperature if phase == "train" else 0.0
        outcome = await run_rollout(self, item, tool_schemas, valid_names, occurrence=occurrence,
                                    slot=slot, phase=phase, temperature=temperature)
        self._tool_error_buffer.append(outcome.tool_errors)
        self._turns_buffer.append(outcome.turns_used)
        self._finished_buffer.append(int(outcome.finished_naturally))
        if outcome.reward_error:
            self._reward_error_buffer.append(1)
        return outcome

    async def collect_trajectories(self, item: Any) -> tuple[ScoredDataGroup | None, list[Any]]:
        occurrence = self._occurrence(item, "train")
        tools = self._resolve_tools_for_group(item, occurrence, "train")
        rollouts = await asyncio.gather(*(
            self.rollout(item, tools=tools, occurrence=occurrence, slot=slot)
            for slot in range(self.config.group_size)
        ))
        return self._group(rollouts), []

    async def collect_trajectory(self, item: Any) -> tuple[dict[str, Any] | None, list[Any]]:
        outcome = await self.rollout(item, occurrence=self._occurrence(item, "train"))
        if outcome.tokens is None:
            return None, []
        scored: dict[str, Any] = {"tokens": outcome.tokens, "masks": outcome.masks,
                                  "scores": outcome.reward, "messages": outcome.messages}
        if outcome.logprobs is not None:
            scored["inference_logprobs"] = outcome.logprobs
        return scored, []

    def _group(self, rollouts: list[Rollout]) -> ScoredDataGroup | None:
        usable = [r for r in rollouts if r.tokens is not None]
        if len(usable) < len(rollouts):
            logger.error("%d of %d rollouts have no tokens (see errors above); group dropped",
                         len(rollouts) - len(usable), len(rollouts))
            return None
        group = ScoredDataGroup(
            tokens=[r.tokens for r in usable],
            masks=[r.masks for r in usable],
            scores=[r.reward for r in usable],
            messages=[r.messages for r in usable],
        )
        if self.phase2:
            group["inference_logprobs"] = [r.logprobs for r in usable]
        return group

    async def run_eval_rollouts(self, items: list[Any]) -> list[Rollout]:
        """Each item once through the full agent loop with tools at temperature 0, concurrently."""
        # one draw per item when a distribution is set (each eval item is its own group)
        tools = None if self.config.distribution else self._resolve_tools_for_group()
        limit = asyncio.Semaphore(self.config.max_concurrent_eval_rollouts)

        async def one(item: Any) -> Rollout:
            async with limit:
                return await self.rollout(item, tools=tools, phase="eval", temperature=0.0,
                                          occurrence=self._occurrence(item, "eval"))

        return list(await asyncio.gather(*(one(item) for item in items)))

    #: Tokens of one rollout decoded into the wandb rollout table (head and tail). atroposlib
    #: decodes every token of every logged rollout: a 50 MB reply cost ~10 GB and minutes.
    wandb_rollout_max_tokens: ClassVar[int] = 8192

    async def add_rollouts_for_wandb(self, scored_data: Any, item: Any = None) -> None:
        """atroposlib's rollout table, with each rollout's text capped (see above)."""
        cap = self.wandb_rollout_max_tokens
        tokens = scored_data.get("tokens") if isinstance(scored_data, dict) else None
        if not cap or not isinstance(tokens, list) or all(len(t) <= cap for t in tokens):
            await super().add_rollouts_for_wandb(scored_data, item)
            return
        half = cap // 2
        capped = [t if len(t) <= cap else [*t[:half], *t[-half:]] for t in tokens]
        await super().add_rollouts_for_wandb({**scored_data, "tokens": capped}, item)
        if self.rollouts_for_wandb:  # say where text was left out
            self.rollouts_for_wandb[-1] = [
                (text if len(tokens[i]) <= cap else
                 f"{text}\n[hermes: {len(tokens[i]) - cap} of {len(tokens[i])} tokens not "
                 "shown in this table]", score)
                for i, (text, score) in enumerate(self.rollouts_for_wandb[-1])]

    async def wandb_log(self, wandb_metrics: dict[str, Any] | None = None) -> None:
        """Adds tool-error/turn/reward-error metrics, then atroposlib's ``wandb_log``."""
        metrics = dict(wandb_metrics or {})
        n = len(self._tool_error_buffer)
        if n:
            metrics["train/tool_errors_per_rollout"] = sum(self._tool_error_buffer) / n
            metrics["train/rollouts_with_tool_errors"] = (
                sum(1 for e in self._tool_error_buffer if e) / n)
            metrics["train/turns_per_rollout"] = sum(self._turns_buffer) / n
            metrics["train/finished_naturally"] = sum(self._finished_buffer) / n
            metrics["train/reward_errors"] = len(self._reward_error_buffer)
        for buffer in (self._tool_error_buffer, self._turns_buffer, self._finished_buffer,
                       self._reward_error_buffer):
            buffer.clear()
        self.last_wandb_metrics = metrics
        await _base_wandb_log(self, metrics)

    def _annotate_once(self) -> None:
        if self._annotated:
            return
        self._annotated = True
        fields: dict[str, Any] = {}
        if self.worker is not None:
            fields["worker"] = self.worker
        hermes_replay.annotate(env_name=self.name or type(self).__name__,
                               tokenizer=hermes_replay.describe_tokenizer(self.config.tokenizer_name),
                               reward_range=[float(v) for v in type(self).reward_range],
                               **fields)

    # -- CLI hooks: make process/evaluate safe offline and keep keys out of output ----------

    async def process_manager(self) -> None:
        ensure_wandb_offline_safe()
        # atroposlib's groups.html re-parses every token id and renders whole messages; ours
        # reads only messages and scores and caps each message (see _groups_html).
        with bounded_groups_html():
            await super().process_manager()

    async def handle_send_to_api(self, scored_data: Any, item: Any = None,
                                 do_send_to_api: bool = True,
                                 abort_on_any_max_length_exceeded: bool = True) -> Any:
        scrub_live_groups(scored_data)  # before the line is written: a kill leaves no secret
        return await super().handle_send_to_api(
            scored_data, item, do_send_to_api=do_send_to_api,
            abort_on_any_max_length_exceeded=abort_on_any_max_length_exceeded)

    async def _run_evaluate(self) -> None:
        ensure_wandb_offline_safe()
        await super()._run_evaluate()

    async def env_manager(self) -> None:
        ensure_wandb_offline_safe()
        await super().env_manager()

    async def register_env(self) -> None:
        """atroposlib's registration, then this worker's identity if none was given: the
        trajectory API numbers same-named workers in the order they register."""
        await super().register_env()
        if self.worker is None:
            self.worker = worker_from_registration(getattr(self, "wandb_prepend", None),
                                                   self.config.wandb_name)
        if self.worker is not None:
            hermes_replay.annotate(worker=self.worker)

    @classmethod
    def cli(cls) -> None:
        """atroposlib's CLI (serve/process/evaluate), printing server configs without API keys."""
        import atroposlib.envs.base as atropos_base

        original = atropos_base.rprint
        atropos_base.rprint = functools.partial(_print_redacted, original)
        try:
            super().cli()
        except (EndpointNotConfigured, StartupError) as exc:
            print(f"{cls.__name__}: {exc}", file=sys.stderr)
            raise SystemExit(2) from None
        finally:
            atropos_base.rprint = original

    @classmethod
    def get_cli_evaluate_config_cls(cls) -> type:
        base = super().get_cli_evaluate_config_cls()

        class RedactingEvaluateConfig(base):  # type: ignore[misc,valid-type]
            def run(self) -> None:
                try:
                    super().run()
                finally:
                    out = getattr(self, "env.data_dir_to_save_evals", None)
                    if out:
                        redact_yaml_file(os.path.join(out, "evaluate_config.yaml"))

        RedactingEvaluateConfig.__name__ = base.__name__
        return RedactingEvaluateConfig


async def _base_wandb_log(env: HermesAgentBaseEnv, metrics: dict[str, Any]) -> None:
    """atroposlib's wandb_log, tolerant of runs that never called ``wandb.init`` (evaluate)."""
    import wandb

    if env.config.use_wandb and wandb.run is None:
        env.config.use_wandb = False
        try:
            await BaseEnv.wandb_log(env, metrics)
        finally:
            env.config.use_wandb = True
        return
    await BaseEnv.wandb_log(env, metrics)


def _print_redacted(printer: Any, *objects: Any, **kwargs: Any) -> None:
    """atroposlib prints the final server configs, keys included, on every CLI start."""
    def redact(obj: Any) -> Any:
        if isinstance(obj, list):
            return [redact(o) for o in obj]
        if isinstance(obj, APIServerConfig) and obj.api_key not in (None, "", PLACEHOLDER_API_KEY):
            return obj.model_copy(update={"api_key": REDACTED})
        return obj

    printer(*(redact(o) for o in objects), **kwargs)


def _guard_evaluate(evaluate: Any) -> Any:
    @functools.wraps(evaluate)
    async def guarded(self: HermesAgentBaseEnv, *args: Any, **kwargs: Any) -> Any:
        with _metrics.evaluation(self, type(self).metric_buffers):
            started = time.time()
            result = evaluate(self, *args, **kwargs)
            if inspect.isawaitable(result):
                result = await result
            logger.debug("%s.evaluate took %.2fs", type(self).__name__, time.time() - started)
            return result

    guarded._hermes_guarded = True  # type: ignore[attr-defined]
    return guarded

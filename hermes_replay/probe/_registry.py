"""What a probe is, the registry of probes, and how a probe becomes a script of the endpoint.

A probe is a scripted policy: the rules of a scripted-endpoint :class:`Script` that play "the
model" of an environment badly on purpose (or, for ``known-good``, well). Requests shaped like a
judge's (no tools offered, a JSON score asked for) are not the policy's to answer: they go to
the judge script (``examples`` by default), so an LLM-judge environment is probed with its judge
in place and the probe says what the reward code does with that judge's answers.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

from hermes_replay._session.known_good import KnownGoodTable
from hermes_replay.scripted_endpoint import Conversation, Reply, Rule, Script

__all__ = ["PROBES", "Probe", "ProbeContext", "probe_script", "register_probe"]

Kind = Literal["degenerate", "known-good"]


@dataclass(frozen=True)
class ProbeContext:
    """What a probe's rules may consult while the run is going on."""

    known_good: KnownGoodTable = field(default_factory=KnownGoodTable)


RulesFactory = Callable[[ProbeContext], list[Rule]]


@dataclass(frozen=True)
class Probe:
    """One scripted policy of the battery.

    ``rules(ctx)`` returns the policy's rules (first match answers; a catch-all "Done." is
    added after them). ``kind`` is ``"degenerate"`` (must score low) or ``"known-good"`` (must
    score high). ``applies(tool_schemas)`` says why the probe cannot run against the tools the
    environment offers (None: it can). ``env`` restricts the probe to env files of that stem.
    ``max_items`` caps how many items it runs on (the 1 MB reply needs only one). ``judge``
    (a script name or a :class:`Script`) answers this probe's judge requests instead of the
    battery's judge, e.g. a judge that fails to answer in JSON.
    """

    name: str
    rules: RulesFactory
    description: str
    kind: Kind = "degenerate"
    applies: Callable[[list[dict[str, Any]]], str | None] | None = None
    env: str | None = None
    max_items: int | None = None
    judge: str | Script | None = None

    def not_applicable(self, tools: list[dict[str, Any]]) -> str | None:
        return self.applies(tools) if self.applies is not None else None


_REGISTRY: dict[str, Probe] = {}
PROBES: Mapping[str, Probe] = MappingProxyType(_REGISTRY)


def register_probe(
    name: str,
    *,
    description: str,
    kind: Kind = "degenerate",
    applies: Callable[[list[dict[str, Any]]], str | None] | None = None,
    env: str | None = None,
    max_items: int | None = None,
    judge: str | Script | None = None,
) -> Callable[[RulesFactory], RulesFactory]:
    """Decorator: register ``factory(ctx) -> list[Rule]`` as the probe ``name``.

    Names are unique (a second registration under one name raises ``ValueError``); ``env``
    (an env file stem such as ``"research_judge_env"``) makes the probe run only for that env.
    """

    def decorate(factory: RulesFactory) -> RulesFactory:
        old = _REGISTRY.get(name)
        if old is not None and old.rules is not factory:
            if getattr(old.rules, "__qualname__", None) != getattr(factory, "__qualname__", 0):
                raise ValueError(f"probe {name!r} is already registered (by "
                                 f"{old.rules.__module__}); pick another name")
        _REGISTRY[name] = Probe(name, factory, description, kind, applies, env, max_items, judge)
        return factory

    return decorate


def _done(conv: Conversation, rng: random.Random) -> Reply:
    return Reply(content="Done.")


def probe_script(probe: Probe, ctx: ProbeContext, judge: Script) -> Script:
    """The endpoint script of one probe run: judge requests to ``judge``, the rest to the probe."""

    def judge_reply(conv: Conversation, rng: random.Random) -> Reply:
        rule = judge.match(conv)
        if rule is None:  # a judge script without a catch-all: answer "no score"
            return Reply(content="No score.")
        return rule.reply(conv, rng)

    return Script(f"probe-{probe.name}", [
        Rule("judge", lambda c: c.is_judge, judge_reply),
        *probe.rules(ctx),
        Rule("probe-done", lambda c: True, _done),
    ])

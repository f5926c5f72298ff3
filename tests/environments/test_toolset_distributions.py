"""Toolset distributions: weighted mixes drawn once per group, the same in every run."""

from __future__ import annotations

import pytest
from _hermes_env_helpers import Recorder, make_env

from environments.terminal_test_env import TerminalTestEnv
from environments.tools.distributions import (
    distributions,
    get_distribution,
    register_distribution,
    sample_toolsets,
)
from hermes_replay.scripted_endpoint import ScriptedEndpoint


def test_a_draw_depends_only_on_the_distribution_and_the_group_key():
    first = [sample_toolsets("mixed_tasks", f"train-item-{i}") for i in range(50)]
    again = [sample_toolsets("mixed_tasks", f"train-item-{i}") for i in range(50)]
    assert first == again
    assert len({tuple(d) for d in first}) > 3  # groups do get different mixes


def test_probabilities_are_respected_and_a_draw_is_never_empty():
    draws = [sample_toolsets('{"terminal": 0.5, "web": 0.1}', f"k{i}") for i in range(1000)]
    terminal = sum("terminal" in d for d in draws)
    web = sum("web" in d for d in draws)
    # each toolset independently; a draw of nothing takes the likeliest (terminal), so
    # P(terminal) = 0.5 + 0.5 * 0.9 = 0.95 and P(web) = 0.1 (the draws are deterministic)
    assert 920 <= terminal <= 980 and 70 <= web <= 130
    assert all(draws)
    assert sample_toolsets('{"terminal": 0, "web": 0}', "x") == ["terminal"]


def test_disabled_toolsets_never_appear_and_bad_specs_are_refused():
    assert all("web" not in sample_toolsets("default", f"k{i}", {"web"}) for i in range(20))
    with pytest.raises(ValueError, match="no toolset left"):
        sample_toolsets("terminal_only", "k", {"terminal"})
    with pytest.raises(ValueError, match=r"probability of 'web' must be a number in \[0, 1\]"):
        get_distribution('{"web": 2}')
    with pytest.raises(ValueError, match="already registered"):
        register_distribution("default", {"terminal": 1.0})
    assert {"default", "research", "development", "terminal_only", "terminal_web",
            "terminal_tasks", "browser_tasks", "mixed_tasks"} <= set(distributions())


async def test_each_group_of_an_env_gets_its_own_draw_reproducibly():
    mix = '{"terminal": 0.5, "file": 0.5, "todo": 0.5}'
    with ScriptedEndpoint(script="examples", seed=0) as ep:
        runs = []
        for _ in range(2):  # two fresh envs: what a record and its replay are
            env = make_env(TerminalTestEnv, ep.base_url, group_size=2, max_agent_turns=2,
                           distribution=mix, enabled_toolsets=None)
            await env.setup()
            seen = []
            with Recorder():
                for _ in range(3):
                    item = await env.get_next_item()
                    tools, _ = env._resolve_tools_for_group(item, 0, "train")
                    seen.append(sorted(t["function"]["name"] for t in tools))
                    group, _ = await env.collect_trajectories(item)
                    assert group is not None
            chats = [b for p, b in ep.requests if p == "/v1/chat/completions"]
            runs.append(seen)
            ep.requests.clear()
            offered = {tuple(sorted(t["function"]["name"] for t in b.get("tools", [])))
                       for b in chats}
            assert offered <= {tuple(s) for s in seen}  # the requests offered the drawn tools
    assert runs[0] == runs[1]
    assert len({tuple(s) for s in runs[0]}) > 1

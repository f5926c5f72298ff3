"""The harness's identity for plain envs, piece by piece (no endpoint, no atroposlib server)."""

from __future__ import annotations

import asyncio

import pytest

import hermes_replay
from hermes_replay._runner.plain_groups import EveryGroupDropped, GroupIdentity, item_hash
from hermes_replay._runner.plan import recorded_cwd


class _Box:
    """An item without JSON form: its repr carries a memory address."""

    def __init__(self, value: int) -> None:
        self.value = value


class _Observer:
    def __init__(self) -> None:
        self.outcomes: dict[str, dict] = {}

    def rollout_finished(self, scope) -> None:
        self.outcomes[scope.id] = dict(scope.outcome)

    def annotate(self, fields) -> None:
        pass


class OneRequestEnv:
    """``collect_trajectories`` answers the whole group with one request (n > 1)."""

    def __init__(self, scores):
        self.scores = scores
        self.seen: list[str] = []

    async def collect_trajectories(self, item):
        self.seen.append(hermes_replay.current_rollout().id)
        return ({"scores": list(self.scores)} if self.scores else None), []

    async def collect_trajectory(self, item):  # atroposlib's default: not implemented
        raise NotImplementedError


class PerRolloutEnv:
    """atroposlib's default ``collect_trajectories`` shape: group_size concurrent calls."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    async def collect_trajectories(self, item):
        results = await asyncio.gather(*[self.collect_trajectory(item) for _ in range(3)])
        return {"scores": [r[0]["scores"] for r in results]}, []

    async def collect_trajectory(self, item):
        rid = hermes_replay.current_rollout().id
        self.seen.append(rid)
        await asyncio.sleep(0)
        return {"scores": float(rid[-1])}, []


def _run(env, items, tmp_path, max_empty=None):
    identity = GroupIdentity(env, max_empty=max_empty)
    identity.install(env)
    observer = _Observer()

    async def drive():
        for item in items:
            await env.collect_trajectories(item)

    with hermes_replay.cassette(tmp_path / "c.jsonl", mode="passthrough") as session:
        session.observe(observer)
        asyncio.run(drive())
    return observer.outcomes


def test_a_group_of_one_request_gets_a_rollout_per_score(tmp_path):
    env = OneRequestEnv([1.0, 0.0, 0.5])
    outcomes = _run(env, [{"q": 1}, {"q": 2}, {"q": 1}], tmp_path)
    first = f"train-{item_hash({'q': 1})}"
    assert env.seen == [f"{first}-0", f"train-{item_hash({'q': 2})}-0", f"{first}-1"]
    group = outcomes[f"{first}-0"]
    assert group["kind"] == "group" and group["scores"] == [1.0, 0.0, 0.5]
    assert group["rollouts"] == [f"{first}-0-0", f"{first}-0-1", f"{first}-0-2"]
    assert [outcomes[r]["reward"] for r in group["rollouts"]] == [1.0, 0.0, 0.5]
    assert outcomes[f"{first}-0-1"]["traffic"] == f"{first}-0"
    assert outcomes[f"{first}-0-1"]["choice"] == 1


def test_collect_trajectory_calls_are_slots_of_their_group_in_call_order(tmp_path):
    env = PerRolloutEnv()
    outcomes = _run(env, ["item"], tmp_path)
    base = f"train-{item_hash('item')}-0"
    assert env.seen == [f"{base}-0", f"{base}-1", f"{base}-2"]
    assert outcomes[base]["scores"] == [0.0, 1.0, 2.0]
    assert outcomes[base]["rollouts"] == env.seen
    assert [outcomes[r]["reward"] for r in env.seen] == [0.0, 1.0, 2.0]


def test_the_worker_is_part_of_every_id(tmp_path, monkeypatch):
    monkeypatch.setenv("HERMES_REPLAY_WORKER", "w2")
    env = OneRequestEnv([1.0, 0.0])
    outcomes = _run(env, ["x"], tmp_path)
    base = f"train-{item_hash('x')}-0"
    assert set(outcomes) == {f"{base}@w2", f"{base}-0@w2", f"{base}-1@w2"}


def test_empty_groups_in_a_row_stop_at_the_bound_and_a_full_one_resets_it(tmp_path):
    env = OneRequestEnv([])
    with pytest.raises(EveryGroupDropped, match="returned no group 3 times in a row"):
        _run(env, [1, 2, 3, 4, 5], tmp_path, max_empty=3)
    assert len(env.seen) == 3

    class Flaky(OneRequestEnv):
        async def collect_trajectories(self, item):
            self.scores = [1.0] if item % 3 == 0 else []
            return await super().collect_trajectories(item)

    flaky = Flaky([])
    _run(flaky, list(range(1, 10)), tmp_path, max_empty=3)  # 2 empty, 1 full, … never 3
    assert len(flaky.seen) == 9


def test_item_hash_is_the_content_not_the_object():
    assert item_hash({"a": 1, "b": 2}) == item_hash({"b": 2, "a": 1})
    assert item_hash(_Box(3)) == item_hash(_Box(3))  # memory addresses are left out
    assert item_hash((1, 2)) != item_hash((2, 1))


def test_a_recorded_working_folder_never_leaves_the_project(tmp_path):
    (tmp_path / "envs").mkdir()
    assert recorded_cwd(tmp_path, {"env_cwd": "envs"}) == tmp_path / "envs"
    for hostile in ("../..", "/etc", "envs/../../x", 3, "missing"):
        assert recorded_cwd(tmp_path, {"env_cwd": hostile}) == tmp_path


def test_a_module_name_as_env_file_runs_that_module(tmp_path, monkeypatch):
    """``record pkg.env`` (a module, as ``python -m`` takes it) is the file ``pkg/env.py`` run
    as the module ``pkg.env`` from the working directory (issue 35: it used to be refused)."""
    from hermes_replay._runner.env_target import resolve_env

    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "env.py").write_text("")
    monkeypatch.chdir(tmp_path)
    found, module = resolve_env("record", "pkg.env")
    assert found.resolve() == (tmp_path / "pkg" / "env.py").resolve()
    assert module == ("pkg.env", tmp_path.resolve())
    assert "no module pkg.nope found" in resolve_env("record", "pkg.nope")

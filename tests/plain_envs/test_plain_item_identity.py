"""A plain env's rollouts are found again whatever its items carry (issue 35, item 1).

- items with a fresh ``uuid4()`` and timestamp every run replay with 0 misses;
- items built from frozensets, recorded under one ``PYTHONHASHSEED`` and replayed under
  another (two interpreters), replay with 0 misses;
- an item that really changed is named in the miss, field by field (old → new), never as
  "the cassette has no rollout";
- a cassette recorded under the former rule (``json.dumps(item, default=repr)``) still replays.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from _plain_script import plain_script

from hermes_replay import bundled_tokenizer_path, load_cassette, run_cassette
from hermes_replay._runner.plain_items import canonical_text, item_changes, item_hash
from hermes_replay._runner.plain_resolve import GroupResolver
from hermes_replay.cli import main
from hermes_replay.scripted_endpoint import ScriptedEndpoint

HERE = Path(__file__).resolve().parent
FLAGS = ["process", "--env.tokenizer_name", str(bundled_tokenizer_path()),
         "--env.total_steps", "2", "--env.group_size", "4"]


@pytest.fixture
def _here(monkeypatch):
    monkeypatch.chdir(HERE)
    yield
    import wandb

    if wandb.run is not None:
        wandb.finish()


def _record(env_file: str, cassette: Path, out: Path) -> None:
    with ScriptedEndpoint(script=plain_script(), seed=0) as endpoint:
        code = main(["record", env_file, "--cassette", str(cassette), "--endpoint",
                     endpoint.base_url, "--model", "scripted", "--", *FLAGS,
                     "--env.data_path_to_save_groups", str(out)])
    assert code == 0


def test_frozenset_items_do_not_depend_on_the_hash_seed():
    item = (frozenset({"role": "user", "content": "hi"}.items()), frozenset({"b", "a", "c"}))
    code = ("import sys; sys.path.insert(0, {here!r})\n"
            "from hermes_replay._runner.plain_items import item_hash\n"
            "print(item_hash({item!r}))").format(here=str(HERE), item=item)
    seen = set()
    for seed in ("1", "2", "3"):
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              env={**os.environ, "PYTHONHASHSEED": seed}, check=True)
        seen.add(done.stdout.strip())
    assert seen == {item_hash(item)}


def test_uuid_and_timestamp_items_replay_with_no_miss(_here, tmp_path, capsys):
    cassette = tmp_path / "uuid.jsonl"
    _record("uuid_items_env.py", cassette, tmp_path / "rec.jsonl")
    result = run_cassette(cassette, out_dir=tmp_path / "replay")
    assert result.error is None and result.summary.misses == []
    assert len(result.rewards) == 8
    groups = {rid: r.outcome for rid, r in load_cassette(cassette).rollouts.items()
              if r.outcome.get("kind") == "group"}
    assert sorted(g["draw"] for g in groups.values()) == [0, 1]
    assert all('"round_id"' in g["item"] for g in groups.values())  # kept to compare with


def test_a_changed_item_is_named_field_by_field(_here, tmp_path, monkeypatch):
    project = tmp_path / "proj"
    project.mkdir()
    (project / "pyproject.toml").write_text("[project]\nname = 'p'\nversion = '0'\n")
    source = (HERE / "uuid_items_env.py").read_text()
    (project / "uuid_items_env.py").write_text(source)
    monkeypatch.chdir(project)
    cassette = project / "cassettes" / "uuid.jsonl"
    _record("uuid_items_env.py", cassette, tmp_path / "rec.jsonl")
    # the dataset's numbers change: the model is asked something else
    (project / "uuid_items_env.py").write_text(source.replace("rng.randint(2, 60), \"b\"",
                                                              "rng.randint(70, 90), \"b\""))
    result = run_cassette(cassette, out_dir=tmp_path / "replay", raise_errors=False)
    assert result.summary.misses
    reasons = " | ".join(m.reason for m in result.summary.misses)
    assert "the cassette has no rollout" not in reasons
    assert "the item drawn 1st changed since it was recorded" in reasons
    assert "a: 22 → 80" in reasons and "round_id" not in reasons and "created" not in reasons


def test_a_new_item_names_the_nearest_recorded_one():
    resolver = GroupResolver()
    old = {"question": "What is 2 + 2?", "answer": 4, "id": "9b2f4c1e-0d3a-4f6b-8e7d-1a2b3c4d5e6f"}
    new = {**old, "answer": 5, "id": "11111111-2222-4333-8444-555555555555"}
    recorded = {"train-aaaaaaaaaaaa-0": {"kind": "group", "draw": 0,
                                         "item": canonical_text(old)}}
    resolver._loaded, resolver._recorded = True, recorded
    note = resolver.open(new).note  # not drawn through get_next_item: no position to go by
    assert note is not None and "this item was not recorded" in note
    assert "answer: 4 → 5" in note and "id" not in note.split("differs:")[1]
    assert item_changes(canonical_text(old), canonical_text({**old, "id": "x"})) == \
        ["id: '9b2f4c1e-0d3a-4f6b-8e7d-1a2b3c4d5e6f' → 'x'"]


def test_a_cassette_keyed_by_the_former_rule_still_finds_its_groups():
    resolver = GroupResolver()
    item = ("What time is it? 10:30", 7)  # a time: the new rule's hash differs
    from hermes_replay._runner.plain_items import legacy_item_hash

    legacy = f"train-{legacy_item_hash(item)}-0"
    assert legacy != f"train-{item_hash(item)}-0"
    resolver._loaded, resolver._recorded = True, {legacy: {"kind": "group"}}
    assert resolver.open(item).base == legacy


@pytest.mark.slow
def test_a_frozenset_env_records_under_one_hash_seed_and_replays_under_another(tmp_path):
    cassette = tmp_path / "frozen.jsonl"
    cli = [sys.executable, "-c", "import sys; from hermes_replay.cli import main; "
           "sys.exit(main(sys.argv[1:]))"]
    with ScriptedEndpoint(script=plain_script(), seed=0) as endpoint:
        record = subprocess.run(
            [*cli, "record", "frozen_messages_env.py", "--cassette", str(cassette),
             "--endpoint", endpoint.base_url, "--model", "scripted", "--", *FLAGS,
             "--env.data_path_to_save_groups", str(tmp_path / "rec.jsonl")],
            cwd=HERE, capture_output=True, text=True, timeout=300,
            env={**os.environ, "PYTHONHASHSEED": "1"})
    assert record.returncode == 0, record.stderr[-3000:]
    replay = subprocess.run([*cli, "replay", str(cassette), "--out", str(tmp_path / "out")],
                            cwd=HERE, capture_output=True, text=True, timeout=300,
                            env={**os.environ, "PYTHONHASHSEED": "2"})
    assert replay.returncode == 0, replay.stdout[-3000:] + replay.stderr[-3000:]
    assert "0 misses" in replay.stdout + replay.stderr


def test_a_changed_item_is_matched_by_its_position_within_its_own_worker(monkeypatch):
    item = {"board": "new"}
    recorded = {f"train-aaaaaaaaaaaa-0{w}": {"kind": "group", "draw": 0,
                                             "item": canonical_text({"board": "old"})}
                for w in ("", "@w1")}
    for worker, expected in (("w1", "train-aaaaaaaaaaaa-0@w1"), ("w0", "train-aaaaaaaaaaaa-0")):
        monkeypatch.setenv("HERMES_REPLAY_WORKER", worker)
        noted: list[str] = []
        resolver = GroupResolver(noted.append)
        resolver._loaded, resolver._recorded = True, dict(recorded)
        resolver.drawn(item)
        resolved = resolver.open(item)
        assert resolved.base == "train-aaaaaaaaaaaa-0" and resolved.draw == 0
        assert resolver._claimed == {expected}
        assert noted and "board: 'old' → 'new'" in noted[0]

"""The recorded command's paths, both ways (``_runner/portable.py``): every argv shape."""

from __future__ import annotations

from pathlib import Path

import pytest

from hermes_replay import CassetteError, bundled_tokenizer_path
from hermes_replay._runner.portable import local_command, portable_command
from hermes_replay._tokenizers.bundled import TOKENIZER_NAME


def test_record_writes_the_bundled_tokenizer_by_name_and_project_paths_relative(tmp_path):
    root = tmp_path / "proj"
    (root / "envs").mkdir(parents=True)
    argv = ["process", f"--env.tokenizer_name={bundled_tokenizer_path()}",
            "--env.items_path", str(root / "data" / "x.json"),
            f"--env.config={root / 'cfg.yaml'}", "--openai.base_url", "http://h:1/v1",
            "--env.other", "/elsewhere/y", "--env.name", "plain"]
    assert portable_command(argv, root / "envs", root) == [
        "process", f"--env.tokenizer_name={TOKENIZER_NAME}",
        "--env.items_path", "../data/x.json", "--env.config=../cfg.yaml",
        "--openai.base_url", "http://h:1/v1", "--env.other", "/elsewhere/y",
        "--env.name", "plain"]


def test_replay_gives_this_installs_tokenizer_and_names_a_missing_path(tmp_path):
    cassette = tmp_path / "c.jsonl"
    assert local_command([f"--env.tokenizer_name={TOKENIZER_NAME}", "--n", "2"], None,
                         cassette, tmp_path) == [
        f"--env.tokenizer_name={bundled_tokenizer_path()}", "--n", "2"]
    # an output flag is the run's own (moved into --out), never checked
    kept = ["process", "--env.data_path_to_save_groups", "/gone/groups.jsonl"]
    assert local_command(kept, None, cassette, tmp_path,
                         skip=["--env.data_path_to_save_groups"]) == kept
    with pytest.raises(CassetteError) as caught:
        local_command(["process", "--env.items=/gone/items.json"], None, cassette, tmp_path)
    text = str(caught.value)
    assert f"{cassette}:1:" in text and "--env.items /gone/items.json" in text
    assert "next step:" in text and "--env.items PATH" in text


def test_a_missing_tokenizer_folder_is_the_bundled_one_when_its_fingerprint_is(tmp_path):
    from hermes_replay._tokenizers.bundled import tokenizer_fingerprint

    cassette = tmp_path / "c.jsonl"
    recorded = {"name": "/old/venv/tok", "fingerprint": tokenizer_fingerprint()}
    assert local_command(["--env.tokenizer_name", "/old/venv/tok"], recorded, cassette,
                         tmp_path) == ["--env.tokenizer_name", bundled_tokenizer_path()]
    # a hub id is no folder: left to the env (and the store, by name)
    assert local_command(["--env.tokenizer_name", "org/model"], recorded, cassette,
                         tmp_path) == ["--env.tokenizer_name", "org/model"]
    # a folder that is here is the user's, whatever the recording had
    (tmp_path / "tok").mkdir()
    assert local_command(["--env.tokenizer_name", "./tok"], {"fingerprint": "sha256:00"},
                         cassette, tmp_path) == ["--env.tokenizer_name", "./tok"]
    with pytest.raises(CassetteError, match="no copy of it is stored"):
        local_command(["--env.tokenizer_name", "/old/venv/tok"],
                      {"fingerprint": "sha256:" + "0" * 64}, cassette, tmp_path)


def test_the_bundled_name_loads_in_any_mode():
    from hermes_replay import tokenizer_for_run
    from hermes_replay._tokenizers.store import describe

    assert Path(tokenizer_for_run(TOKENIZER_NAME)) == Path(bundled_tokenizer_path())
    assert describe(TOKENIZER_NAME)["fingerprint"] == describe(bundled_tokenizer_path())[
        "fingerprint"]

"""Hermetic tokenizers: a cassette carries its tokenizer; a replay with another one fails clearly.

The "custom" tokenizer is a copy of the bundled one with a changed ``tokenizer_config.json``
(same token ids, another fingerprint) — what a user's own or hub tokenizer looks like to the
harness, without any download.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from hermes_replay._cassette import load_cassette
from hermes_replay._tokenizers.bundled import TOKENIZER_NAME, tokenizer_fingerprint, tokenizer_path
from hermes_replay._tokenizers.store import (
    TokenizerMismatch,
    mismatch,
    store_root,
    store_tokenizer,
    stored_dir,
)
from hermes_replay.cli import main
from hermes_replay.scripted_endpoint import ScriptedEndpoint

ROOT = Path(__file__).resolve().parents[2]
ENV_FILE = ROOT / "environments" / "multi_signal_env.py"


def _custom_tokenizer(where: Path, max_length: int = 12345) -> Path:
    shutil.copytree(tokenizer_path(), where)
    config_file = where / "tokenizer_config.json"
    config = json.loads(config_file.read_text())
    config["model_max_length"] = max_length
    config_file.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    return where


# -- the store ----------------------------------------------------------------------------------

def test_store_is_content_addressed_under_the_cassettes_root(tmp_path):
    source = _custom_tokenizer(tmp_path / "tok")
    fingerprint = tokenizer_fingerprint(source)
    cassette = tmp_path / "proj" / "cassettes" / "my_env" / "process.jsonl"
    ref = store_tokenizer(cassette, source, fingerprint)
    digest = fingerprint.split(":")[1]
    assert ref == f"../.tokenizers/{digest}"
    stored = tmp_path / "proj" / "cassettes" / ".tokenizers" / digest
    assert store_root(cassette) == stored.parent
    assert tokenizer_fingerprint(stored) == fingerprint
    assert sorted(p.name for p in stored.iterdir()) == sorted(p.name for p in source.iterdir())
    # a second cassette (another env, another recorder) reuses the entry as it is
    mtime = (stored / "tokenizer.json").stat().st_mtime_ns
    other = tmp_path / "proj" / "cassettes" / "other_env" / "evaluate.jsonl"
    assert store_tokenizer(other, source, fingerprint) == ref
    assert (stored / "tokenizer.json").stat().st_mtime_ns == mtime
    assert [p.name for p in stored.parent.iterdir()] == [digest]  # no temp folders left
    assert stored_dir(cassette, {"store": ref}) == stored.resolve()


def test_store_outside_a_cassettes_folder_sits_beside_the_cassette(tmp_path):
    source = _custom_tokenizer(tmp_path / "tok")
    ref = store_tokenizer(tmp_path / "elsewhere" / "c.jsonl", source,
                          tokenizer_fingerprint(source))
    assert ref.startswith(".tokenizers/") and (tmp_path / "elsewhere" / ref).is_dir()


def test_store_refuses_files_that_do_not_match_the_fingerprint(tmp_path):
    source = _custom_tokenizer(tmp_path / "tok")
    with pytest.raises(ValueError, match="changed while being stored"):
        store_tokenizer(tmp_path / "c.jsonl", source, tokenizer_fingerprint())
    assert not any((tmp_path / ".tokenizers").iterdir())


def test_mismatch_names_both_tokenizers_and_the_fixes(tmp_path):
    recorded = {"name": "org/model", "fingerprint": "sha256:" + "a" * 64,
                "store": ".tokenizers/" + "a" * 64}
    loaded = {"name": TOKENIZER_NAME, "fingerprint": tokenizer_fingerprint()}
    error = mismatch(tmp_path / "c.jsonl", recorded, loaded)
    assert isinstance(error, TokenizerMismatch)
    text = str(error)
    for part in ("org/model", "a" * 64, TOKENIZER_NAME, tokenizer_fingerprint(), "re-record",
                 "--env.tokenizer_name", "c.jsonl"):
        assert part in text
    assert mismatch(tmp_path / "c.jsonl", recorded, dict(recorded)) is None
    assert mismatch(tmp_path / "c.jsonl", None, loaded) is None  # nothing recorded to check
    assert mismatch(tmp_path / "c.jsonl", {"name": "x", "fingerprint": None}, loaded) is None


def test_shipped_cassettes_reference_the_bundled_tokenizer_without_a_copy():
    for cassette in sorted((ROOT / "cassettes").glob("*/*.jsonl")):
        tokenizer = load_cassette(cassette).header.tokenizer or {}
        assert tokenizer.get("fingerprint") == tokenizer_fingerprint(), cassette
        assert "store" not in tokenizer, cassette
    assert not (ROOT / "cassettes" / ".tokenizers").exists()


# -- record → replay through the CLI --------------------------------------------------------------

def _flags(tokenizer: Path | str, out: Path) -> list[str]:
    return ["process", "--env.total_steps", "1", "--env.group_size", "2",
            "--env.max_agent_turns", "4", "--env.tokenizer_name", str(tokenizer),
            "--env.data_path_to_save_groups", str(out)]


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HERMES_API_KEY", "sk-test-tok")
    monkeypatch.delenv("HERMES_BASE_URL", raising=False)
    yield tmp_path
    import wandb

    if wandb.run is not None:
        wandb.finish()


@pytest.mark.slow
def test_recording_stores_the_tokenizer_and_replay_needs_nothing_else(project, capsys):
    custom = _custom_tokenizer(project / "my-tokenizer")
    fingerprint = tokenizer_fingerprint(custom)
    cassette = project / "cassettes" / "multi_signal_env" / "process.jsonl"
    with ScriptedEndpoint(script="examples", seed=0) as endpoint:
        code = main(["record", str(ENV_FILE), "--cassette", str(cassette), "--endpoint",
                     endpoint.root_url, "--model", "scripted", "--server-type", "vllm", "--",
                     *_flags(custom, project / "recorded.jsonl")])
    assert code == 0, capsys.readouterr().err[-4000:]
    header = load_cassette(cassette).header
    digest = fingerprint.split(":")[1]
    assert header.tokenizer == {"name": str(custom), "fingerprint": fingerprint,
                                "store": f"../.tokenizers/{digest}"}
    stored = project / "cassettes" / ".tokenizers" / digest
    assert tokenizer_fingerprint(stored) == fingerprint

    # another machine: the tokenizer folder is gone (as a hub id would be offline)
    shutil.rmtree(custom)
    capsys.readouterr()
    code = main(["replay", str(ENV_FILE), "--cassette", str(cassette), "--strict", "--",
                 *_flags(custom, project / "replayed.jsonl")])
    output = capsys.readouterr()
    assert code == 0, output.out[-2000:] + output.err[-4000:]
    assert "0 misses" in output.out
    recorded = (project / "recorded.jsonl").read_bytes()
    assert recorded and recorded == (project / "replayed.jsonl").read_bytes()

    # a different tokenizer (here: the bundled one) fails before any rollout, saying why
    code = main(["replay", str(ENV_FILE), "--cassette", str(cassette), "--",
                 *_flags(tokenizer_path(), project / "other.jsonl")])
    output = capsys.readouterr()
    text = output.out + output.err
    assert code == 1
    assert "recorded with" in text and fingerprint in text and tokenizer_fingerprint() in text
    assert f"--env.tokenizer_name {stored}" in text and "re-record" in text
    other = project / "other.jsonl"  # atroposlib opens it at start; no group was written
    assert not other.exists() or other.read_text() == ""


def test_session_rejects_another_tokenizer_even_if_the_env_swallows_the_error(tmp_path):
    import hermes_replay
    from hermes_replay._cassette import CassetteHeader, write_cassette

    cassette = tmp_path / "c.jsonl"
    recorded = {"name": "org/model", "fingerprint": "sha256:" + "b" * 64}
    write_cassette(cassette, CassetteHeader(tokenizer=recorded), [])
    with hermes_replay.cassette(cassette, mode="replay"):  # same fingerprint: fine
        hermes_replay.annotate(tokenizer=dict(recorded))
    loaded = {"name": TOKENIZER_NAME, "fingerprint": tokenizer_fingerprint()}
    with pytest.raises(TokenizerMismatch, match="recorded with 'org/model'"):
        with hermes_replay.cassette(cassette, mode="replay"):
            try:
                hermes_replay.annotate(tokenizer=loaded)
            except TokenizerMismatch:
                pass  # an env that logs and carries on: the block still fails on exit
    # recording and passthrough never check
    with hermes_replay.cassette(tmp_path / "new.jsonl", mode="record"):
        hermes_replay.annotate(tokenizer=loaded)

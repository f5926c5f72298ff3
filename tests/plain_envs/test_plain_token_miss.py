"""A miss on ``/generate`` reads as text (issue 35, item 6).

``managed_regex_env`` runs ``managed_server`` over a vLLM-type server: its requests are token
ids. A one-word change of the prompt used to miss with a screen of ``prompt_token_ids[105]: 2 →
16`` fields; the miss now decodes both prompts with the cassette's tokenizer and shows where the
texts differ, with the token diff under it.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from _plain_script import plain_script

from hermes_replay import bundled_tokenizer_path, run_cassette
from hermes_replay.cli import main
from hermes_replay.scripted_endpoint import ScriptedEndpoint

HERE = Path(__file__).resolve().parent


@pytest.mark.slow
def test_a_generate_miss_shows_the_decoded_text_diff_above_the_tokens(tmp_path, monkeypatch,
                                                                       capsys):
    project = tmp_path / "proj"
    project.mkdir()
    (project / "pyproject.toml").write_text("[project]\nname = 'p'\nversion = '0'\n")
    shutil.copy(HERE / "managed_regex_env.py", project)
    monkeypatch.chdir(project)
    cassette = project / "cassettes" / "regex.jsonl"
    with ScriptedEndpoint(script=plain_script(), seed=0) as endpoint:
        code = main(["record", "managed_regex_env.py", "--cassette", str(cassette),
                     "--endpoint", endpoint.root_url, "--model", "scripted", "--server-type",
                     "vllm", "--", "process", "--env.tokenizer_name",
                     str(bundled_tokenizer_path()), "--env.total_steps", "1",
                     "--env.group_size", "2", "--env.data_path_to_save_groups",
                     str(tmp_path / "rec.jsonl")])
    assert code == 0, capsys.readouterr().err[-3000:]
    env = project / "managed_regex_env.py"
    env.write_text(env.read_text().replace("Write one string", "Write one word"))
    result = run_cassette(cassette, out_dir=tmp_path / "replay", raise_errors=False)
    misses = result.summary.misses
    assert misses and misses[0].path == "/generate"
    for text in (misses[0].diff, misses[0].short):
        assert "prompt text (decoded with the cassette's tokenizer" in text
        assert "Write one [-string-] that matches" in text, text
        assert "Write one {+word+} that matches" in text
        decoded, tokens = text.split("token ids:", 1)
        assert "prompt_token_ids" not in decoded and "prompt_token_ids" in tokens


def test_the_token_paths_prompts_are_found_and_diffed_word_by_word():
    from hermes_replay._session.token_misses import prompt_ids, text_diff_lines

    vllm = {"body": {"prompt": {"prompt_token_ids": [1, 2, 3]}}}
    sglang = {"body": {"input_ids": [1, 2, 4]}}
    completions = {"body": {"prompt": [[1, 5, 3]]}}
    chat = {"body": {"messages": [{"role": "user", "content": "hi"}]}}
    assert [prompt_ids(r) for r in (vllm, sglang, completions, chat)] == \
        [[1, 2, 3], [1, 2, 4], [1, 5, 3], None]
    words = {1: "add ", 2: "two", 3: " numbers", 4: " apples", 5: "three"}
    decode = lambda ids: "".join(words[i] for i in ids)  # noqa: E731
    lines = text_diff_lines(vllm, completions, decode)
    assert lines[1:3] == ["  -add [-two-] numbers", "  +add {+three+} numbers"]
    assert lines[-1] == "token ids:"
    assert text_diff_lines(vllm, vllm, decode) == [] and text_diff_lines(vllm, chat, decode) == []

"""The endpoint question: never assume a provider (DESIGN section 4)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from hermes_replay._cli._provider import (
    ATROPOS_DEFAULT_URL,
    OPENROUTER_URL,
    Endpoint,
    ProviderError,
    ask_endpoint,
    endpoint_from_args,
)
from hermes_replay._runner.result import RunResult
from hermes_replay.cli import main


def _ask(answers: str, environ: dict[str, str] | None = None, mode: str = "process"):
    out = io.StringIO()
    endpoint = ask_endpoint(io.StringIO(answers), out, env_mode=mode, environ=environ or {})
    return endpoint, out.getvalue()


def test_openrouter_choice_needs_key_and_asks_model() -> None:
    ep, shown = _ask("1\ngoogle/gemini-2.5-pro\n", {"OPENROUTER_API_KEY": "sk-or-x"})
    assert "1. OpenRouter" in shown and "4. Local Atropos training server" in shown
    assert ep == Endpoint("openrouter", OPENROUTER_URL, "google/gemini-2.5-pro", "openai",
                          False, "OPENROUTER_API_KEY")
    assert ep.env_flags() == ["--openai.base_url", OPENROUTER_URL, "--openai.model_name",
                              "google/gemini-2.5-pro", "--openai.server_type", "openai",
                              "--openai.health_check", "false"]
    assert ep.secret_flags({"OPENROUTER_API_KEY": "sk-or-x"}) == ["--openai.api_key=sk-or-x"]
    with pytest.raises(ProviderError, match="OPENROUTER_API_KEY"):
        _ask("1\nsome/model\n", {})


def test_vllm_choice_reasks_bad_url_and_keeps_health_check_default() -> None:
    ep, shown = _ask("5\n2\nlocalhost:8000\nhttp://gpu:8000/v1/\nmy-model\n")
    assert "answer 1, 2, 3 or 4" in shown and "not an http(s) URL" in shown
    assert ep.base_url == "http://gpu:8000/v1" and ep.model == "my-model"
    assert ep.server_type == "vllm" and ep.health_check is None
    assert "--openai.health_check" not in ep.env_flags()
    assert ep.secret_flags({}) == []


def test_openai_compatible_choice_takes_key_variable_name_not_key() -> None:
    env = {"MY_KEY": "secret"}
    ep, shown = _ask("3\nhttps://api.example.com/v1\nm\nsk-123-not-a-name\nMISSING\nMY_KEY\n",
                     env)
    assert "NAME" in shown and "MISSING is not set" in shown
    assert (ep.server_type, ep.health_check, ep.api_key_env) == ("openai", False, "MY_KEY")
    assert "secret" not in " ".join(ep.env_flags()) and "secret" not in str(ep.header_fields())
    ep2, _ = _ask("3\nhttps://api.example.com/v1\nm\n\n", env)
    assert ep2.api_key_env is None


def test_atropos_choice_defaults_url_and_notes_serve() -> None:
    ep, shown = _ask("4\n\n\n", mode="process")
    assert "meant for `serve`" in shown
    assert ep.base_url == ATROPOS_DEFAULT_URL and ep.model is None and ep.server_type is None
    assert ep.env_flags() == ["--openai.base_url", ATROPOS_DEFAULT_URL]


def test_end_of_input_stops_without_guessing() -> None:
    with pytest.raises(ProviderError, match="end of input"):
        _ask("2\n")


def test_flags_and_env_args_settle_the_endpoint(tmp_path: Path) -> None:
    ep = endpoint_from_args(endpoint="http://h:1/v1", model="m", server_type=None,
                            api_key_env=None, env_args=["process"])
    assert ep is not None and ep.server_type == "openai" and ep.health_check is False
    ep = endpoint_from_args(endpoint=None, model=None, server_type=None, api_key_env=None,
                            env_args=["serve", "--openai.base_url=http://x/v1"])
    assert ep is not None and ep.source == "env-args" and ep.env_flags() == []
    cfg = tmp_path / "c.yaml"
    cfg.write_text("openai:\n  base_url: http://yaml/v1\n", encoding="utf-8")
    ep = endpoint_from_args(endpoint=None, model=None, server_type=None, api_key_env=None,
                            env_args=["process", "--config", str(cfg)])
    assert ep is not None and ep.base_url == "http://yaml/v1"
    assert endpoint_from_args(endpoint=None, model=None, server_type=None, api_key_env=None,
                              env_args=["process"], environ={}) is None
    ep = endpoint_from_args(endpoint=None, model=None, server_type=None, api_key_env=None,
                            env_args=["process"], environ={"HERMES_BASE_URL": "http://e/v1"})
    assert ep is not None and ep.base_url == "http://e/v1" and ep.env_flags() == []
    for kwargs, match in [
        ({"endpoint": "http://h/v1", "model": None}, "needs --model"),
        ({"endpoint": "h:80", "model": "m"}, "not an http"),
        ({"endpoint": None, "model": "m"}, "need --endpoint"),
        ({"endpoint": "http://h/v1", "model": "m", "api_key_env": "sk-abc"}, "NAME"),
    ]:
        args = {"server_type": None, "api_key_env": None, "env_args": ["process"], **kwargs}
        with pytest.raises(ProviderError, match=match):
            endpoint_from_args(**args)
    with pytest.raises(ProviderError, match="given twice"):
        endpoint_from_args(endpoint="http://a/v1", model="m", server_type=None,
                           api_key_env=None, env_args=["process", "--openai.base_url", "http://b"])


@pytest.fixture
def env_file(tmp_path: Path) -> Path:
    path = tmp_path / "never_run_env.py"
    path.write_text("raise SystemExit('must not run')\n", encoding="utf-8")
    return path


def test_record_without_endpoint_non_interactive_lists_options(env_file, capsys,
                                                               monkeypatch) -> None:
    monkeypatch.delenv("HERMES_BASE_URL", raising=False)
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    assert main(["record", str(env_file), "--", "process", "--env.total_steps", "1"]) == 2
    err = capsys.readouterr().err
    assert "no inference endpoint given" in err and "not a terminal" in err
    for option in ("1. OpenRouter", "2. Your own vLLM endpoint",
                   "3. Another OpenAI-compatible API", "4. Local Atropos training server"):
        assert option in err
    assert "--api-key-env OPENROUTER_API_KEY" in err and "--server-type vllm" in err
    assert f"-- serve --openai.base_url {ATROPOS_DEFAULT_URL}" in err


def test_record_interactive_choice_reaches_the_run(env_file, capsys, monkeypatch) -> None:
    class FakeTTY(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.delenv("HERMES_BASE_URL", raising=False)
    monkeypatch.setattr("sys.stdin", FakeTTY("2\nhttp://gpu:8000/v1\nm\n"))
    seen: dict = {}

    def fake_run(env_file, argv, **kwargs):
        seen.update(kwargs, argv=argv)
        return RunResult(command=list(argv))

    monkeypatch.setattr("hermes_replay._runner.run.run_env", fake_run)
    monkeypatch.chdir(env_file.parent)
    assert main(["record", env_file.name, "--", "process"]) == 0
    err = capsys.readouterr().err
    assert "Next time, skip this question with: hermes-replay record never_run_env.py " \
           "--endpoint http://gpu:8000/v1 --model m --server-type vllm -- process" in err
    assert seen["argv"][:7] == ["process", "--openai.base_url", "http://gpu:8000/v1",
                                "--openai.model_name", "m", "--openai.server_type", "vllm"]
    # process's scored groups go beside the env log, not into the project (none was given)
    assert seen["argv"][7] == "--env.data_path_to_save_groups" and len(seen["argv"]) == 9
    assert "record-never_run_env-groups-" in seen["argv"][8]
    assert "--env.data_path_to_save_groups" not in seen["header"]["command"]
    assert seen["cassette"] == Path("cassettes/never_run_env/process.jsonl")
    assert seen["header"]["env_file"] == "never_run_env.py"
    assert seen["header"]["endpoint_type"] == "vllm"


def test_record_key_never_reaches_header_or_output(env_file, capsys, monkeypatch) -> None:
    monkeypatch.setenv("TEST_KEY_VAR", "sk-very-secret")
    seen: dict = {}

    def fake_run(env_file, argv, **kwargs):
        seen.update(kwargs, argv=argv)
        return RunResult(command=list(argv))

    monkeypatch.setattr("hermes_replay._runner.run.run_env", fake_run)
    code = main(["record", str(env_file), "--endpoint", "https://api.x/v1", "--model", "m",
                 "--api-key-env", "TEST_KEY_VAR", "--", "process", "--openai.api_key", "typed"])
    assert code == 0
    captured = capsys.readouterr()
    assert "sk-very-secret" in " ".join(seen["argv"])  # handed to the env in-process only
    header = str(seen["header"])
    assert "sk-very-secret" not in header and "typed" not in header
    assert "sk-very-secret" not in captured.out + captured.err
    monkeypatch.delenv("TEST_KEY_VAR")
    assert main(["record", str(env_file), "--endpoint", "https://api.x/v1", "--model", "m",
                 "--api-key-env", "TEST_KEY_VAR", "--", "process"]) == 2
    assert "TEST_KEY_VAR is not set" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["record", "{env}"], "say which mode"),
        (["record", "{env}", "--", "train"], "not a mode"),
        (["record", "missing_env.py", "--", "process"], "does not exist"),
        (["replay", "{env}"], "is an environment file"),
    ],
)
def test_usage_errors_exit_2_with_next_step(argv, message, env_file, capsys) -> None:
    argv = [a.replace("{env}", str(env_file)) for a in argv]
    assert main(argv) == 2
    assert message in capsys.readouterr().err

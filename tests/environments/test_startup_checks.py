"""A configuration this layer cannot run stops at startup, naming field, choices and flag."""

from __future__ import annotations

import pytest
from _hermes_env_helpers import make_env

from environments import _lifetime
from environments._startup import StartupError, check_startup, check_tokenizer
from environments.hermes_base_env import HermesAgentEnvConfig
from environments.terminal_test_env import TerminalTestEnv
from environments.tool_context import ToolContext
from environments.tools.sandbox import active_sandboxes
from environments.tools.web import current_web_backend, set_web_backend
from environments.tools.web_backends import LocalCorpusBackend, TavilyBackend


@pytest.fixture(autouse=True)
def no_web_backend():
    set_web_backend(None)
    yield
    set_web_backend(None)


def _check(**fields) -> None:
    check_startup(HermesAgentEnvConfig(**fields))


@pytest.mark.parametrize("backend", ["modal", "daytona", "ssh", "singularity"])
def test_cloud_backends_stop_with_the_available_ones_and_the_flag(backend):
    with pytest.raises(StartupError) as err:
        _check(terminal_backend=backend)
    message = str(err.value)
    assert f"terminal_backend {backend!r}" in message and "not provided" in message
    available = message.split("available: ", 1)[1].split(".", 1)[0].split(", ")
    assert "local" in available and "docker" not in available  # what really runs here
    assert "--env.terminal_backend local" in message


def test_a_registered_backend_that_cannot_run_stops_too():
    with pytest.raises(StartupError, match=r"terminal_backend 'docker' cannot run here.*"
                                           r"--env.terminal_backend local"):
        _check(terminal_backend="docker")


@pytest.mark.parametrize("toolset", ["browser", "vision", "memory"])
def test_toolsets_not_provided_stop_with_the_reason_and_the_way_out(toolset):
    with pytest.raises(StartupError) as err:
        _check(enabled_toolsets=["terminal", toolset])
    message = str(err.value)
    assert f"'{toolset}'" in message and "does not provide" in message
    assert "Available toolsets: file, search, terminal, todo, web" in message
    assert f"--env.disabled_toolsets {toolset}" in message
    _check(enabled_toolsets=["terminal", toolset], disabled_toolsets=[toolset])  # way out works


def test_disabling_a_toolset_that_is_not_provided_is_fine_but_a_typo_is_not():
    _check(disabled_toolsets=["browser", "memory"])
    with pytest.raises(StartupError, match=r"unknown toolset.*'termnial'"):
        _check(disabled_toolsets=["termnial"])


def test_distribution_checks():
    with pytest.raises(StartupError, match="exclusive"):
        _check(distribution="terminal_only", enabled_toolsets=["terminal"])
    with pytest.raises(StartupError, match=r"unknown toolset distribution 'nope'.*terminal_only"):
        _check(distribution="nope")
    with pytest.raises(StartupError, match=r"distribution 'browser_tasks'.*'browser'"):
        _check(distribution="browser_tasks")
    _check(distribution="terminal_only")


def test_web_toolsets_need_a_backend(monkeypatch, tmp_path):
    monkeypatch.delenv("TAVILY_API_KEY", raising=False)
    with pytest.raises(StartupError) as err:
        _check(enabled_toolsets=["web"])
    message = str(err.value)
    assert "TAVILY_API_KEY" in message and "--env.web_backend local_corpus" in message
    with pytest.raises(StartupError, match="does not exist"):
        _check(enabled_toolsets=["search"], web_corpus_dir=str(tmp_path / "missing"))
    (tmp_path / "page.md").write_text("# A page\ntext\n")
    _check(enabled_toolsets=["search"], web_corpus_dir=str(tmp_path))
    assert isinstance(current_web_backend(), LocalCorpusBackend)
    monkeypatch.setenv("TAVILY_API_KEY", "tvly-test-0123456789")
    _check(enabled_toolsets=["web"], web_backend="tavily")
    assert isinstance(current_web_backend(), TavilyBackend)


def test_default_toolsets_add_web_only_once_a_backend_is_chosen(tmp_path):
    from environments._startup import default_toolsets

    assert sorted(default_toolsets(HermesAgentEnvConfig())) == ["file", "terminal", "todo"]
    (tmp_path / "p.md").write_text("# p\n")
    chosen = default_toolsets(HermesAgentEnvConfig(web_corpus_dir=str(tmp_path)))
    assert {"web", "search"} <= set(chosen)


def test_a_hub_tokenizer_offline_stops_naming_the_flag_and_the_store(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(StartupError) as err:
        check_tokenizer("NousResearch/Hermes-3-Llama-3.1-8B")
    message = str(err.value)
    assert "--env.tokenizer_name" in message and ".tokenizers/" in message


def test_the_env_stops_before_loading_anything_and_the_cli_exits_2(monkeypatch, capsys):
    with pytest.raises(StartupError, match="modal"):
        make_env(TerminalTestEnv, "http://127.0.0.1:9/v1", terminal_backend="modal")
    monkeypatch.setattr("sys.argv", ["terminal_test_env.py", "process",
                                     "--env.terminal_backend", "modal",
                                     "--openai.base_url", "http://127.0.0.1:9/v1"])
    with pytest.raises(SystemExit) as exit_info:
        TerminalTestEnv.cli()
    assert exit_info.value.code == 2
    assert "--env.terminal_backend local" in capsys.readouterr().err


def test_tool_pool_size_resizes_the_pool():
    from environments.agent_loop import resize_tool_pool, tool_pool_size

    before = tool_pool_size()
    try:
        _check(tool_pool_size=7)
        assert tool_pool_size() == 7
    finally:
        resize_tool_pool(before)


def test_terminal_lifetime_reaps_sandboxes_left_idle():
    ctx = ToolContext("test-lifetime-idle")
    ctx.write_file("x", "1")
    try:
        assert "test-lifetime-idle" in active_sandboxes()
        now = _lifetime._LAST_USED["test-lifetime-idle"]
        # not idle long enough (other tests' sandboxes, older, may be reaped: not this one)
        assert "test-lifetime-idle" not in _lifetime.reap_idle(60, now=now + 30)
        assert "test-lifetime-idle" in _lifetime.reap_idle(60, now=now + 61)
        assert "test-lifetime-idle" not in active_sandboxes()
    finally:
        ctx.cleanup()

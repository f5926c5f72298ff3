"""The env CLI's fixed costs are cut without a change anyone can see (``_runner.fast_cli``, and
the flag check on atroposlib's own parser in ``_runner.flags``): the parsers of every mode of
every shipped example env, their help and parsed values, the prefixed models, the flags the
check knows and a replay's outputs are the same with the patches as without them; the shared
TLS context exists in a replay only."""

from __future__ import annotations

import importlib
import json
import os
import ssl
from pathlib import Path
from typing import Any

import pydantic
import pydantic_cli
import pytest
from _tiny_env import tiny_env_source

import hermes_replay._runner.fast_cli as fast
import hermes_replay._runner.flags as flags
from hermes_replay._runner.fast_cli import fast_cli
from hermes_replay._runner.run import run_cassette, run_env
from hermes_replay.scripted_endpoint import ScriptedEndpoint

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted(p.stem for p in (ROOT / "environments").glob("*_env.py")
                  if p.stem != "hermes_base_env" and ".cli()" in p.read_text())
MODES = ("serve", "process", "evaluate")


def _env_class(stem: str) -> Any:
    from atroposlib.envs.base import BaseEnv

    module = importlib.import_module(f"environments.{stem}")
    found = [v for v in vars(module).values() if isinstance(v, type) and issubclass(v, BaseEnv)
             and v.__module__ == module.__name__]
    assert len(found) == 1, found
    return found[0]


def _parser(env_cls: Any, mode: str) -> Any:
    """atroposlib's parser of ``mode`` for ``env_cls``, built as its ``cli()`` builds it."""
    cmds = {mode: getattr(env_cls, f"get_cli_{mode}_config_cls")()}
    top = pydantic_cli._to_subparser(cmds, description=f"CLI for {env_cls.__name__}")
    return flags_subparser(top, mode)


def flags_subparser(top: Any, mode: str) -> Any:
    import argparse

    for action in top._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices[mode]
    raise AssertionError("no subparsers")


def _shape(parser: Any) -> list[tuple[Any, ...]]:
    return [(tuple(a.option_strings), a.dest, a.help, repr(a.default), a.required, a.nargs)
            for a in parser._actions]


def _parsed(parser: Any, argv: list[str]) -> dict[str, Any]:
    """The config ``argv`` gives, as pydantic-cli's runner makes it from the parse."""
    parsed = vars(parser.parse_args(argv))
    cmd = parsed.pop("cmd")
    keys = cmd.model_json_schema()["properties"].keys()
    return cmd(**{k: v for k, v in parsed.items() if k in keys}).model_dump()


def test_the_examples_are_found() -> None:
    assert len(EXAMPLES) >= 3, EXAMPLES


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("stem", EXAMPLES)
def test_every_parser_is_the_same_with_the_patches(stem: str, mode: str) -> None:
    env_cls = _env_class(stem)
    plain = _parser(env_cls, mode)
    with fast_cli():
        assert pydantic_cli.deepcopy is not fast.copy.deepcopy  # the patch is what runs
        patched = _parser(env_cls, mode)
        again = _parser(env_cls, mode)  # the second run of a process: the memo answers
    assert _shape(patched) == _shape(plain)
    assert _shape(again) == _shape(plain)
    assert plain.format_help() == patched.format_help()
    argv = ["--env.group_size", "3", "--openai.model_name", "m", "--env.total_steps=2"]
    if mode != "serve":
        argv += ["--env.data_path_to_save_groups", "out.jsonl"]
    assert _parsed(plain, argv) == _parsed(patched, argv)
    with pytest.raises(pydantic_cli.FailedExecutionException):
        patched.parse_args(["--env.no_such_flag", "1"])


def test_a_field_copy_leaves_the_original_as_it_was() -> None:
    """pydantic-cli blanks ``json_schema_extra`` on its copy: a copy that shared the original
    would lose a field's custom flag (``cli=``) for every later parser."""
    class Cmd(pydantic_cli.Cmd):
        alpha: int = pydantic.Field(1, description="a", json_schema_extra={"cli": ("-a",)})

        def run(self) -> None:
            pass

    with fast_cli():
        first = pydantic_cli.pydantic_class_to_parser(Cmd, default_value_override={})
        second = pydantic_cli.pydantic_class_to_parser(Cmd, default_value_override={})
    assert Cmd.model_fields["alpha"].json_schema_extra == {"cli": ("-a",)}
    assert "-a" in first._option_string_actions and "-a" in second._option_string_actions
    plain = pydantic_cli.pydantic_class_to_parser(Cmd, default_value_override={})
    assert _shape(first) == _shape(second) == _shape(plain)


def _fields(model: Any) -> dict[str, tuple[str, ...]]:
    return {name: (repr(f.annotation), repr(f.default), repr(f.default_factory),
                   str(f.description)) for name, f in model.model_fields.items()}


def test_atroposlibs_prefixed_models_are_kept_and_unchanged() -> None:
    import atroposlib.envs.base as base
    from atroposlib.envs.base import APIServerConfig
    from atroposlib.utils.cli import get_prefixed_pydantic_model

    fresh = get_prefixed_pydantic_model(APIServerConfig, "openai.")
    with fast_cli():
        kept = base.get_prefixed_pydantic_model(APIServerConfig, "openai.")
        assert base.get_prefixed_pydantic_model(APIServerConfig, "openai.") is kept
        before = _fields(kept)
        env_cls = _env_class(EXAMPLES[0])
        for mode in MODES:  # every use atroposlib makes of it: a base of its Cli*Config
            _parser(env_cls, mode).parse_args(["--openai.model_name", "m"])
        assert base.get_prefixed_pydantic_model(APIServerConfig, "openai.") is kept
    assert base.get_prefixed_pydantic_model is get_prefixed_pydantic_model  # put back
    assert _fields(kept) == before == _fields(fresh)
    assert kept.__name__ == fresh.__name__


def test_the_users_config_class_is_kept_for_one_run_only() -> None:
    """atroposlib prefixes the env's config class once per mode (three times a run): within
    a run it is the same class, so one model serves all three; the next run's class may have
    changed, so nothing of it outlives the run."""
    import atroposlib.envs.base as base
    from atroposlib.envs.base import BaseEnvConfig
    from atroposlib.utils.cli import get_prefixed_pydantic_model

    class MyConfig(BaseEnvConfig):
        extra: int = 1

    fresh = get_prefixed_pydantic_model(MyConfig, "env.")
    with fast_cli():
        one = base.get_prefixed_pydantic_model(MyConfig, "env.")
        assert base.get_prefixed_pydantic_model(MyConfig, "env.") is one
        assert base.get_prefixed_pydantic_model(MyConfig, "other.") is not one
    assert fast._RUN_PREFIXED == {}
    with fast_cli():
        two = base.get_prefixed_pydantic_model(MyConfig, "env.")
    assert one is not two and _fields(one) == _fields(two) == _fields(fresh)
    assert not any(kept is MyConfig for kept, _ in fast._PREFIXED.values())

    class Changed(BaseEnvConfig):  # a class edited between runs is its own key
        extra: int = 2

    with fast_cli():
        changed = base.get_prefixed_pydantic_model(Changed, "env.")
    assert _fields(changed) != _fields(one)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("stem", EXAMPLES)
def test_the_flag_check_knows_exactly_the_flags_of_atroposlibs_parser(
        stem: str, mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The check reads the parser the env's ``cli()`` built, and builds none of its own."""
    env_cls = _env_class(stem)
    expected = set(_parser(env_cls, mode)._option_string_actions)
    assert expected == flags._options(env_cls, mode)  # the old way, on a parser of its own
    seen: list[set[str]] = []

    class Stop(Exception):
        pass

    def spy(argv: Any, options: set[str]) -> Any:
        seen.append(set(options))
        raise Stop

    def no_second_parser(*args: Any) -> set[str]:
        raise AssertionError("the check built a parser of its own")

    monkeypatch.setattr(flags, "unknown_flags", spy)
    monkeypatch.setattr(flags, "_options", no_second_parser)
    monkeypatch.setattr("sys.argv", ["env.py", mode, "--env.group_size", "1"])
    with flags.checked_flags(), pytest.raises(Stop):
        env_cls.cli()
    assert seen == [expected]


def _tls_context(**kwargs: Any) -> ssl.SSLContext:
    import httpx2

    return httpx2.AsyncHTTPTransport(**kwargs)._pool._ssl_context


def test_the_tls_context_is_shared_only_where_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    with fast_cli():  # record, auto, passthrough: a context per client, as httpx2 makes it
        assert _tls_context() is not _tls_context()
    with fast_cli(reuse_tls=True):
        shared = _tls_context()
        assert _tls_context() is shared
        assert _tls_context(trust_env=False) is not shared
        assert _tls_context(trust_env=False) is _tls_context(trust_env=False)
        assert _tls_context(verify=False) is not _tls_context(verify=False)
        mine = ssl.create_default_context()
        assert _tls_context(verify=mine) is mine
        # another CA bundle named by the environment: another context, built from it
        monkeypatch.setenv("SSL_CERT_FILE", ssl.get_default_verify_paths().cafile or "")
        if os.environ["SSL_CERT_FILE"]:
            assert _tls_context() is not shared
        monkeypatch.delenv("SSL_CERT_FILE")
        assert _tls_context() is shared
    assert _tls_context() is not shared
    # what is shared is the context httpx2 builds: same verification, same CA store
    fresh = _tls_context()
    assert (shared.verify_mode, shared.check_hostname, shared.protocol) == \
        (fresh.verify_mode, fresh.check_hostname, fresh.protocol)
    assert shared.cert_store_stats() == fresh.cert_store_stats()


def made_before_the_run() -> tuple[bool, bool]:
    """In a fork of the warm process: whether the prefixed model and the TLS context were
    there before this run made anything."""
    from atroposlib.envs.base import APIServerConfig

    kept = fast._PREFIXED.get((APIServerConfig.__module__, APIServerConfig.__qualname__,
                               "openai."))
    return kept is not None and kept[0] is APIServerConfig, fast._tls_key(True) in fast._TLS


def test_the_warm_process_makes_them_once_before_it_forks() -> None:
    from hermes_replay._runner.warm import WarmProcess

    with WarmProcess(["atroposlib.envs.base", "httpx2._transports.default"]) as warm:
        [done] = list(warm.run([("k", made_before_the_run, ())]))
    assert done.value == (True, True), done.error
    with WarmProcess(["json"]) as small:  # no stack preloaded: nothing imported for it
        [done] = list(small.run([("k", stack_imported, ())]))
    assert done.value is False, done.error


def stack_imported() -> bool:
    import sys

    return "atroposlib.envs.base" in sys.modules


# ------------------------------------------------------------------ whole runs

ENV = tiny_env_source(
    imports=("import json\n\nimport httpx2._config\n"
             "import httpx2._transports.default as transports\n"),
    setup=(
        "        shared = transports.create_ssl_context is not httpx2._config.create_ssl_context\n"
        "        with open(\"tls.json\", \"a\") as fh:\n"
        "            fh.write(json.dumps(shared) + \"\\n\")\n"))


def test_the_shared_tls_context_is_a_replays_only(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HERMES_BASE_URL", raising=False)
    (tmp_path / "pyproject.toml").write_text("")
    env_file = tmp_path / "tiny_env.py"
    env_file.write_text(ENV)
    cassette = tmp_path / "tiny.jsonl"
    seen = []
    with ScriptedEndpoint(script="generic") as ep:
        argv = ["process", "--openai.base_url", ep.base_url, "--openai.model_name", "m",
                "--openai.api_key", "x", "--env.data_path_to_save_groups", "g.jsonl"]
        for mode in ("record", "passthrough", "replay"):
            result = run_env(env_file, argv, cassette=None if mode == "passthrough"
                             else cassette, mode=mode)
            assert result.exit_code == 0 and result.error is None, (mode, result.error)
            seen.append(json.loads((tmp_path / "tls.json").read_text().splitlines()[-1]))
    assert seen == [False, False, True]  # record, passthrough, replay


def test_a_replays_outputs_are_byte_equal_with_and_without(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    cassette = ROOT / "cassettes" / "multi_signal_env" / "process.jsonl"
    on = run_cassette(cassette, out_dir=tmp_path / "on")
    with fast.switched_off():
        off = run_cassette(cassette, out_dir=tmp_path / "off")
    assert on.rewards and on.rewards == off.rewards
    groups = sorted(p.name for p in (tmp_path / "on").glob("*.jsonl"))
    assert groups and groups == sorted(p.name for p in (tmp_path / "off").glob("*.jsonl"))
    for name in groups:
        assert (tmp_path / "on" / name).read_bytes() == (tmp_path / "off" / name).read_bytes()

    def rollouts(folder: str) -> Any:  # each rollout's reward, turns, tool errors
        return json.loads((tmp_path / folder / "result.json").read_text())["rollouts"]

    assert rollouts("on") and rollouts("on") == rollouts("off")

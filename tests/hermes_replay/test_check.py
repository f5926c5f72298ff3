"""`hermes-replay check`: every pitfall caught at the right line, clean code left alone.

The broken environments in ``broken_envs/`` mark each expected finding with a trailing
``# check: <rule-id>`` comment; the tests read the markers, so a line number can never drift
from the file it describes.
"""

from __future__ import annotations

import argparse
import json
import re
import textwrap
from pathlib import Path

import pytest

from hermes_replay._check import RULES, Target, check_env, check_static, to_records
from hermes_replay._check._dynamic import NEEDS_MODEL, import_check
from hermes_replay._check._report import JSON_KEYS, render_table
from hermes_replay._check._static import rule
from hermes_replay._cli import check as check_cli

HERE = Path(__file__).parent
BROKEN = HERE / "broken_envs"
CLEAN = BROKEN / "clean_env.py"
REPO = HERE.parent.parent
BROKEN_FILES = sorted(p for p in BROKEN.glob("*_env.py") if p != CLEAN)
MARKER = re.compile(r"#\s*check:\s*([a-z-]+)\s*$")

EXPECTED_RULES = [
    "result-fields", "eval-agent-loop", "wandb-super", "ctx-cleanup", "tool-call-shape",
    "eval-buffers", "judge-once", "server-list", "server-type", "no-hardcoded-provider",
    "toolsets", "volatile-prompt",
]
# What each rule's message must say: the part a user needs to recognise the problem.
MESSAGE_FRAGMENTS = {
    "result-fields": "AgentResult has no `final_response`",
    "eval-agent-loop": "calls `self.server.chat_completion` directly",
    "wandb-super": "never calls super().wandb_log",
    "ctx-cleanup": "is not in a finally",
    "tool-call-shape": "assumes tool calls are dicts",
    "eval-buffers": "writes `self.rewards_seen`",
    "judge-once": "judged twice",
    "server-list": "single server config, not a list",
    "server-type": None,  # two broken files, two different messages: checked per file below
    "no-hardcoded-provider": "hard-coded",
    "toolsets": "offered every toolset",
    "volatile-prompt": "into a prompt: a replay sends another request than the recording",
}
SERVER_TYPE_MESSAGES = {
    "server_type_vllm_env.py": "server_type='vllm' for external llm.example.com",
    "openrouter_health_env.py": "OpenRouter with health_check on",
}
WARN_RULES = {"eval-buffers", "judge-once", "tool-call-shape", "volatile-prompt"}


def markers(path: Path) -> set[tuple[str, int]]:
    out = set()
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        match = MARKER.search(line)
        if match and "<rule-id>" not in line:
            out.add((match.group(1), number))
    return out


def findings(rows):
    return [f for row in rows for f in row.findings]


def snippet(tmp_path: Path, code: str, name: str = "snippet_env.py") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(code))
    return path


def static_hits(path: Path) -> set[tuple[str, str, int | None]]:
    return {(f.rule, f.severity, f.line) for f in findings(check_static(path))}


def run_cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="hermes-replay")
    check_cli.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["check", *argv])
    return args.func(args)


# -- the registry ----------------------------------------------------------------------------


def test_rules_are_registered_in_checklist_order():
    check_static(CLEAN)  # loads the rule modules
    assert list(RULES) == EXPECTED_RULES
    assert all(r.title and r.fix for r in RULES.values())


def test_registry_refuses_a_duplicate_id():
    check_static(CLEAN)
    with pytest.raises(ValueError, match="already registered"):
        rule("result-fields", "dup", "dup")(lambda src, out: None)
    with pytest.raises(TypeError):
        RULES["new"] = RULES["result-fields"]  # type: ignore[index]


def test_every_rule_has_a_broken_environment():
    covered = {rule_id for path in BROKEN_FILES for rule_id, _ in markers(path)}
    assert covered == set(EXPECTED_RULES)


# -- broken environments: each caught by exactly the right rule, line and message -----------


@pytest.mark.parametrize("path", BROKEN_FILES, ids=lambda p: p.stem)
def test_broken_env_is_caught_by_exactly_its_rule(path: Path):
    expected = markers(path)
    assert expected, f"{path.name} has no `# check:` marker"
    got = findings(check_static(path))
    assert {(f.rule, f.line) for f in got} == expected
    for finding in got:
        assert finding.file == str(path)
        assert finding.severity == ("warn" if finding.rule in WARN_RULES else "fail")
        fragment = MESSAGE_FRAGMENTS[finding.rule] or SERVER_TYPE_MESSAGES[path.name]
        assert fragment in finding.message
        assert finding.fix


def test_clean_env_passes_every_static_rule():
    rows = check_static(CLEAN)
    assert [r.rule for r in rows] == ["parse", *EXPECTED_RULES]
    assert {r.rule: r.status for r in rows} == {r.rule: "pass" for r in rows}


def test_shipped_example_environments_pass_clean():
    examples = sorted((REPO / "environments").glob("*_env.py"))
    examples = [p for p in examples if p.name != "hermes_base_env.py"]
    # The base env has landed, so examples must exist: an empty glob is a failure, not a pass.
    assert (REPO / "environments" / "hermes_base_env.py").is_file()
    assert examples, "no example environments under environments/*_env.py"
    for path in examples:
        bad = [f"{f.location} {f.rule}: {f.message}" for f in findings(check_static(path))]
        assert bad == [], f"{path.name} is not clean"


# -- edge cases of single rules ----------------------------------------------------------------


def test_unparsable_file_fails_parse_and_skips_the_rest(tmp_path):
    path = snippet(tmp_path, "class Env:\n    def evaluate(self)\n        pass\n")
    rows = check_static(path)
    assert rows[0].rule == "parse" and rows[0].status == "fail"
    assert rows[0].findings[0].line == 2
    assert {r.status for r in rows[1:]} == {"warn"}


def test_agent_result_names_from_loop_run_and_getattr(tmp_path):
    path = snippet(tmp_path, """\
        async def run(server, messages):
            agent = HermesAgentLoop(server=server, tool_schemas=[{"x": 1}], valid_tool_names={"x"})
            out = await agent.run(messages)
            calls = out.tool_calls
            used = getattr(out, "tools_used", [])
            return calls, used, out.messages
        """)
    assert static_hits(path) == {("result-fields", "fail", 4), ("result-fields", "fail", 5)}


def test_super_wandb_log_not_awaited_fails(tmp_path):
    path = snippet(tmp_path, """\
        class Env:
            async def wandb_log(self, metrics=None):
                super().wandb_log(metrics)
        """)
    assert static_hits(path) == {("wandb-super", "fail", 3)}


def test_tool_context_forms(tmp_path):
    path = snippet(tmp_path, """\
        async def ok_with(task_id):
            with ToolContext(task_id) as ctx:
                return ctx.terminal("ls")

        async def ok_async_with(task_id):
            async with ToolContext(task_id) as ctx:
                return await ctx.aterminal("ls")

        async def ok_finally_acleanup(task_id):
            ctx = ToolContext(task_id)
            try:
                return await ctx.aterminal("ls")
            finally:
                await ctx.acleanup()

        async def leaked(task_id):
            ctx = ToolContext(task_id)
            return ctx.terminal("ls")

        async def inline(env, item, result, task_id):
            return await env.compute_reward(item, result, ToolContext(task_id))
        """)
    assert static_hits(path) == {("ctx-cleanup", "fail", 17), ("ctx-cleanup", "fail", 21)}


def test_agent_loop_without_tools_in_evaluate_fails(tmp_path):
    path = snippet(tmp_path, """\
        class Env:
            async def evaluate(self, *args, **kwargs):
                loop = HermesAgentLoop(server=self.server, tool_schemas=[], valid_tool_names=set())
                return await loop.run([])
        """)
    assert static_hits(path) == {("eval-agent-loop", "fail", 3)}


def test_evaluate_through_base_helpers_passes(tmp_path):
    path = snippet(tmp_path, """\
        class Env:
            async def _judge(self, text):
                return await self.server.chat_completion(messages=[], n=1)

            async def compute_reward(self, item, result, ctx):
                self.scores.append(1.0)
                return await self._judge("x")

            async def evaluate(self, *args, **kwargs):
                rollouts = await self.run_eval_rollouts(self.eval_items)
                await self.evaluate_log(metrics={"n": len(rollouts)})
        """)
    # run_eval_rollouts is a rollout runner: not a bare chat_completion, but it scores rollouts,
    # so the unprotected `self.scores` buffer is reported.
    assert static_hits(path) == {("eval-buffers", "warn", 6)}


def test_buffers_the_base_class_protects_are_not_reported(tmp_path):
    path = snippet(tmp_path, """\
        class Env:
            metric_buffers = ("scores", "correct")

            async def compute_reward(self, item, result, ctx):
                self.scores.append(1.0)
                self.correct += 1
                self.per_tool_buffer["terminal"] += 1
                self.hits_buffer += 1
                self.manual.append(1)
                return 1.0

            async def evaluate(self, *args, **kwargs):
                saved = list(self.manual)
                try:
                    await self.compute_reward(None, None, None)
                finally:
                    self.manual[:] = saved
        """)
    # hits_buffer is a scalar: its `_buffer` name does not protect it (no len()).
    assert static_hits(path) == {("eval-buffers", "warn", 8)}


def test_tool_call_shape_get_with_getattr_fallback_passes(tmp_path):
    path = snippet(tmp_path, """\
        def names(msg):
            out = []
            for tc in msg.get("tool_calls") or []:
                fn = tc.get("function") if hasattr(tc, "get") else getattr(tc, "function")
                out.append(fn)
            return out

        def objects_only(msg):
            return [tc.function.name for tc in msg["tool_calls"]]

        def sdk_as_dicts(response):
            return [tc["function"] for tc in response.choices[0].message.tool_calls]

        def indexed(msg):
            return msg["tool_calls"][0]["function"]["name"]
        """)
    assert static_hits(path) == {("tool-call-shape", "fail", 9), ("tool-call-shape", "fail", 12),
                                 ("tool-call-shape", "warn", 15)}


def test_server_config_variants(tmp_path):
    path = snippet(tmp_path, """\
        import os

        class Env:
            @classmethod
            def config_init(cls):
                return cls.env_config_cls(), default_server_configs()[0]

        GATEWAY = APIServerConfig(base_url="https://llm.example.com/v1", health_check=False)
        LOCAL = APIServerConfig(base_url="http://127.0.0.1:8000/v1", server_type="vllm")
        DYNAMIC = APIServerConfig(base_url=os.environ["BASE_URL"], model_name=os.environ["M"])
        """)
    assert static_hits(path) == {("server-list", "fail", 6), ("server-type", "warn", 8)}


def test_provider_names_only_flagged_as_settings(tmp_path):
    path = snippet(tmp_path, """\
        '''Try https://openrouter.ai/api/v1 with model gpt-4o.'''
        TOKENIZER_NAME = "openai/gpt-oss-20b"
        HELP = "e.g. --openai.model_name gpt-4o"

        def judge(server, judge_model="gpt-4o-mini"):
            return server.chat_completion(model=judge_model)
        """)
    assert static_hits(path) == {("no-hardcoded-provider", "fail", 5)}


def test_evaluate_followed_into_module_helpers(tmp_path):
    path = snippet(tmp_path, """\
        async def run_one(server, tools, names, messages):
            loop = HermesAgentLoop(server=server, tool_schemas=tools, valid_tool_names=names)
            return await loop.run(messages)

        async def ask_once(server, messages):
            return await server.chat_completion(messages=messages, n=1)

        class Good:
            async def evaluate(self, *args, **kwargs):
                tools, names = self._resolve_tools_for_group()
                await self.server.chat_completion(messages=[], n=1)  # a warm-up, say
                return await run_one(self.server, tools, names, [])

        class Bad:
            async def evaluate(self, *args, **kwargs):
                return await ask_once(self.server, [])
        """)
    assert static_hits(path) == {("eval-agent-loop", "fail", 6)}


def test_provider_docs_links_are_not_settings(tmp_path):
    path = snippet(tmp_path, """\
        DOCS = ["https://openrouter.ai/docs/quickstart", "https://platform.openai.com/docs"]
        API = "https://openrouter.ai/api/v1"
        AZURE = "https://myorg.openai.azure.com/"
        """)
    assert static_hits(path) == {("no-hardcoded-provider", "fail", 2),
                                 ("no-hardcoded-provider", "fail", 3)}


def test_default_toolsets_none_or_backed_by_field_passes(tmp_path):
    path = snippet(tmp_path, """\
        class Config(HermesAgentEnvConfig):
            enabled_toolsets: list[str] | None = Field(default=["terminal"])

        class Env:
            default_toolsets = ("terminal",)
        """)
    assert static_hits(path) == set()


# -- output: table, JSON, exit codes -------------------------------------------------------------


def test_table_lists_every_rule_and_the_fix_for_failures():
    path = BROKEN / "result_fields_env.py"
    text = render_table(check_static(path), str(path))
    lines = text.splitlines()
    assert lines[0] == f"hermes-replay check {path}"
    for rule_id in EXPECTED_RULES:
        row = re.compile(rf"\s+(pass|WARN|FAIL)\s+{rule_id}\s")
        assert sum(1 for line in lines if row.match(line)) == 1
    fail_at = next(i for i, line in enumerate(lines) if re.match(r"\s+FAIL\s+result-fields", line))
    line_no = next(n for r, n in markers(path))
    assert f"{path}:{line_no}: fail:" in lines[fail_at + 1]
    assert lines[fail_at + 2].strip().startswith("fix: walk `reversed(result.messages)`")
    # every rule and the parse row, one of them failed
    assert lines[-1].startswith(f"{len(EXPECTED_RULES)} passed, 0 warning(s), 1 failed")


def test_json_schema(capsys):
    path = BROKEN / "openrouter_health_env.py"
    assert run_cli(["--static-only", "--json", str(path)]) == 1
    records = json.loads(capsys.readouterr().out)
    assert isinstance(records, list)
    for record in records:
        assert tuple(record) == JSON_KEYS
        assert record["status"] in {"pass", "warn", "fail"}
        assert isinstance(record["rule"], str) and isinstance(record["message"], str)
        assert record["file"] == str(path)
        assert record["line"] is None or isinstance(record["line"], int)
        if record["status"] == "pass":
            assert record["line"] is None and record["fix"] is None
        else:
            assert isinstance(record["line"], int) and record["fix"]
    assert [r["rule"] for r in records][:2] == ["parse", "result-fields"]
    failed = {(r["rule"], r["line"]) for r in records if r["status"] == "fail"}
    assert failed == markers(path)
    assert records == to_records(check_static(path), str(path))


def test_exit_codes(capsys, tmp_path):
    assert run_cli(["--static-only", str(CLEAN)]) == 0
    assert run_cli(["--static-only", str(BROKEN / "single_server_env.py")]) == 1
    # warnings alone never fail a run
    assert run_cli(["--static-only", str(BROKEN / "eval_buffers_env.py")]) == 0
    assert run_cli(["--static-only", str(tmp_path / "missing_env.py")]) == 2
    assert "is not a file" in capsys.readouterr().err
    assert run_cli(["--endpoint", "http://127.0.0.1:1/v1", str(CLEAN)]) == 2
    assert "--endpoint and --model go together" in capsys.readouterr().err
    assert run_cli(["--cassette", str(tmp_path / "none.jsonl"), str(CLEAN)]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert run_cli(["--cassette", str(CLEAN), "--endpoint", "http://127.0.0.1:1/v1",
                    "--model", "m", str(CLEAN)]) == 2
    assert "not both" in capsys.readouterr().err


def test_check_is_a_cli_command():
    from hermes_replay import cli

    assert "check" in cli.COMMANDS


# -- dynamic checks without a model ------------------------------------------------------------


def test_import_check_passes_and_fails_with_the_line(tmp_path):
    good = snippet(tmp_path, "VALUE = 1\n", "good_env.py")
    assert import_check(good, str(good)).status == "pass"
    bad = snippet(tmp_path, "import os\n\nraise RuntimeError('boom at import')\n", "bad_env.py")
    row = import_check(bad, str(bad))
    assert row.status == "fail"
    assert row.findings[0].line == 3
    assert "RuntimeError: boom at import" in row.findings[0].message
    assert "runpy.run_path" in row.findings[0].fix and str(bad) in row.findings[0].fix


def test_model_checks_warn_without_a_cassette_or_endpoint(tmp_path):
    path = snippet(tmp_path, "VALUE = 1\n", "tiny_env.py")
    rows = check_env(path, target=Target())
    dynamic = {r.rule: r for r in rows if r.kind == "dynamic"}
    assert dynamic["import"].status == "pass"
    for name in ("process", "evaluate", "rewards", "rerun"):
        assert dynamic[name].status == "warn"
        assert dynamic[name].findings[0].message == NEEDS_MODEL
    assert "needs a cassette or an endpoint" in NEEDS_MODEL
    assert [r.kind for r in check_env(path, dynamic=False)] == ["static"] * (1 + len(RULES))


def test_volatile_prompt_follows_a_judges_messages_through_assignments(tmp_path):
    """A judge that builds ``messages`` in steps (the research_judge example does): the rule
    follows each assignment once and ends — it used to re-take the same assignment forever and
    hang ``check`` on that shipped example. The clock in the prompt is found at its line; the
    ``time.time()`` that only times the call is not a prompt value."""
    import signal

    path = snippet(tmp_path, '''
        import time
        from datetime import datetime

        class JudgeEnv(HermesAgentBaseEnv):
            async def judge(self, answer):
                started = time.time()
                stamp = datetime.now().isoformat()
                question = f"At {stamp}: is this right? {answer}"
                messages = [{"role": "user", "content": question}]
                messages = messages + [{"role": "system", "content": "be strict"}]
                reply = await self.server.chat_completion(messages=messages, n=1)
                self.elapsed = time.time() - started
                return reply
    ''')

    def stuck(*_):
        raise TimeoutError("the volatile-prompt rule did not end")

    old = signal.signal(signal.SIGALRM, stuck)
    signal.alarm(30)  # a defect would loop forever: fail instead of hanging the suite
    try:
        hits = static_hits(path)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    assert {h for h in hits if h[0] == "volatile-prompt"} == {("volatile-prompt", "warn", 8)}

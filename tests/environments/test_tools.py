"""Tool registry, toolset resolution, the error rule, and the built-in tools."""

from __future__ import annotations

import json
import uuid

import pytest

from environments.tools import (
    cleanup_task,
    dispatch_tool,
    register_task_cleanup,
    register_tool,
    resolve_toolsets,
    tool_registry,
    tool_result_error,
    toolsets,
)
from environments.tools import registry as registry_module
from environments.tools.todo import todo_items


@pytest.fixture
def task_id():
    tid = f"test-tools-{uuid.uuid4().hex[:8]}"
    yield tid
    cleanup_task(tid)


@pytest.fixture
def private_registry(monkeypatch):
    """Tools registered in a test vanish afterwards, so other tests see the built-ins only."""
    monkeypatch.setattr(registry_module, "_TOOLS", dict(registry_module._TOOLS))
    monkeypatch.setattr(registry_module, "_TASK_CLEANUPS", list(registry_module._TASK_CLEANUPS))


def call(name: str, task_id: str, **args) -> dict:
    return json.loads(dispatch_tool(name, args, task_id))


# -- registry and resolution -----------------------------------------------------------------


def test_builtin_toolsets():
    groups = toolsets()
    assert groups["terminal"] == ["terminal"]
    assert set(groups["file"]) == {"read_file", "write_file", "search_files", "patch"}
    assert groups["todo"] == ["todo"]


def test_resolve_all_enabled_and_disabled():
    schemas, names = resolve_toolsets(None, None)
    assert names == set(tool_registry())
    assert [s["function"]["name"] for s in schemas] == list(tool_registry())
    for schema in schemas:
        assert schema["type"] == "function"
        assert schema["function"]["parameters"]["type"] == "object"
        assert schema["function"]["description"]

    _, only_terminal = resolve_toolsets(["terminal"], None)
    assert only_terminal == {"terminal"}
    _, no_todo = resolve_toolsets(None, ["todo"])
    assert "todo" not in no_todo and "terminal" in no_todo
    assert resolve_toolsets([], None) == ([], set())


def test_resolve_unknown_toolset_lists_available():
    with pytest.raises(ValueError,
                       match=r"'termnial'.*available toolsets: file, search, terminal, todo, web"):
        resolve_toolsets(["termnial"])
    with pytest.raises(ValueError, match="'nope'"):
        resolve_toolsets(None, ["nope"])


def test_resolved_schemas_are_copies():
    schemas, _ = resolve_toolsets(["todo"])
    schemas[0]["function"]["name"] = "mutated"
    assert resolve_toolsets(["todo"])[0][0]["function"]["name"] == "todo"


def test_register_tool_function_and_decorator_forms(private_registry, task_id):
    register_tool("echo", "custom", {"description": "echo"}, lambda args, tid: args["x"])

    @register_tool("count", "custom", {"type": "function", "function": {"name": "count"}})
    def count(args, tid):
        return {"n": len(args)}

    assert count({"a": 1}, "t") == {"n": 1}  # the decorator returns the function unchanged
    schemas, names = resolve_toolsets(["custom"])
    assert names == {"echo", "count"}
    assert schemas[0]["function"]["parameters"] == {"type": "object", "properties": {}}
    assert dispatch_tool("echo", {"x": "hi"}, task_id) == "hi"
    assert dispatch_tool("count", {"a": 1, "b": 2}, task_id) == '{"n": 2}'  # non-str → JSON


def test_register_tool_refuses_duplicates_and_mismatched_names(private_registry):
    with pytest.raises(ValueError, match="already registered"):
        register_tool("terminal", "other", {}, lambda a, t: "")
    with pytest.raises(ValueError, match="different tool"):
        register_tool("x", "other", {"name": "y"}, lambda a, t: "")


_TOOL_MODULE = """
from environments.tools import register_task_cleanup, register_tool

CALLS = []

@register_tool("adder", "mine", {"parameters": {"type": "object", "properties": {}}})
def adder(args, task_id):
    CALLS.append(task_id)
    return str(len(CALLS))

@register_task_cleanup
def forget(task_id):
    CALLS.clear()
"""


def test_a_module_run_twice_registers_its_tool_once_with_its_own_globals(
        private_registry, tmp_path):
    """Running an env file twice in one process re-executes ``register_tool`` with a new
    function object from the same source: accepted, and the second run's function (with the
    second run's module globals) is the one dispatched."""
    import runpy

    module = tmp_path / "tool_module.py"
    module.write_text(_TOOL_MODULE, encoding="utf-8")
    hooks_before = len(registry_module._TASK_CLEANUPS)
    first = runpy.run_path(str(module))
    assert dispatch_tool("adder", {}, "t") == "1" and first["CALLS"] == ["t"]
    second = runpy.run_path(str(module))  # no "already registered"
    assert tool_registry()["adder"].fn is second["adder"]
    assert dispatch_tool("adder", {}, "t") == "1"  # fresh globals: no count carried over
    assert first["CALLS"] == ["t"] and second["CALLS"] == ["t"]
    assert list(toolsets()["mine"]) == ["adder"]
    assert len(registry_module._TASK_CLEANUPS) == hooks_before + 1  # the hook once, not twice
    register_tool("adder", "mine", {"parameters": {"type": "object", "properties": {}}},
                  second["adder"])  # the very same function again: a no-op
    assert tool_registry()["adder"].fn is second["adder"]


def test_a_different_function_under_a_taken_name_names_both_definitions(
        private_registry, tmp_path):
    import runpy

    module = tmp_path / "tool_module.py"
    module.write_text(_TOOL_MODULE, encoding="utf-8")
    runpy.run_path(str(module))

    def adder(args, task_id):  # same name, other source
        return "0"

    with pytest.raises(ValueError) as info:
        register_tool("adder", "mine", {"parameters": {"type": "object", "properties": {}}},
                      adder)
    message = str(info.value)
    assert "tool_module.py:6 (adder)" in message  # the registered one
    line = adder.__code__.co_firstlineno
    assert f"test_tools.py:{line} (" in message and "adder)" in message  # the refused one
    assert "Next step" in message
    # an edited module body (same place, other code) is a different definition too
    module.write_text(_TOOL_MODULE.replace("str(len(CALLS))", "str(-len(CALLS))"),
                      encoding="utf-8")
    with pytest.raises(ValueError, match="already registered"):
        runpy.run_path(str(module))
    # the same function offered with another schema is refused, and says so
    with pytest.raises(ValueError, match="same function with another toolset or schema"):
        register_tool("adder", "other", {}, tool_registry()["adder"].fn)


def test_tool_registry_is_read_only():
    with pytest.raises(TypeError):
        tool_registry()["new"] = None  # type: ignore[index]


def test_dispatch_unknown_tool_names_the_registered_ones():
    with pytest.raises(KeyError, match=r"registered tools:.*terminal"):
        dispatch_tool("nope", {}, "t")


def test_cleanup_task_runs_every_hook_even_if_one_fails(private_registry):
    seen = []
    register_task_cleanup(lambda tid: (_ for _ in ()).throw(OSError("boom")))
    register_task_cleanup(seen.append)
    with pytest.raises(RuntimeError, match="cleanup of task 'z' failed"):
        cleanup_task("z")
    assert seen == ["z"]


# -- the error rule --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("result", "error"),
    [
        ('{"error": "file not found"}', "file not found"),
        ('{"error": {"code": 2}}', '{"code": 2}'),
        ('{"output": "", "exit_code": 1}', "exit code 1"),
        ('{"output": "", "exit_code": 124}', "exit code 124"),
        ('{"output": "", "exit_code": -9}', "exit code -9"),
        ('{"success": false}', "success is false"),
        ('{"success": false, "message": "no"}', "success is false: no"),
        ('{"output": "ok", "exit_code": 0}', None),
        ('{"error": null, "value": 1}', None),
        ('{"error": ""}', None),
        ('{"exit_code": true}', None),
        ('["error"]', None),
        ("error: plain text is not parsed", None),
        ("{not json", None),
        ("", None),
    ],
)
def test_tool_result_error_rule(result, error):
    assert tool_result_error(result) == error


# -- terminal --------------------------------------------------------------------------------


def test_terminal_returns_output_and_exit_code(task_id):
    assert call("terminal", task_id, command="echo hello") == {"output": "hello\n", "exit_code": 0}
    failed = dispatch_tool("terminal", {"command": "echo bad >&2; exit 2"}, task_id)
    assert json.loads(failed) == {"output": "bad\n", "exit_code": 2}
    assert tool_result_error(failed) == "exit code 2"


def test_terminal_timeout_argument(task_id):
    result = call("terminal", task_id, command="sleep 5", timeout=0.3)
    assert result["exit_code"] == 124
    assert "timed out" in result["output"]


@pytest.mark.parametrize(
    "args", [{}, {"command": ""}, {"command": 3}, {"command": "ls", "timeout": -1}]
)
def test_terminal_bad_arguments_are_error_results(task_id, args):
    assert "error" in json.loads(dispatch_tool("terminal", args, task_id))


# -- file tools ------------------------------------------------------------------------------


def test_write_then_read(task_id):
    assert call("write_file", task_id, path="d/a.txt", content="héllo") == {
        "path": "d/a.txt",
        "bytes_written": 6,
    }
    assert call("read_file", task_id, path="d/a.txt") == {"path": "d/a.txt", "content": "héllo"}
    assert call("terminal", task_id, command="cat d/a.txt")["output"] == "héllo"


def test_file_tools_refuse_escapes(task_id):
    for name, args in [
        ("read_file", {"path": "../../etc/passwd"}),
        ("write_file", {"path": "/tmp/x-escape.txt", "content": "x"}),
        ("search_files", {"pattern": "root", "path": "/etc"}),
        ("patch", {"path": "../x", "old_string": "a", "new_string": "b"}),
    ]:
        result = call(name, task_id, **args)
        assert "outside the sandbox" in result["error"], name


def test_read_missing_file_and_missing_argument(task_id):
    assert "FileNotFoundError" in call("read_file", task_id, path="missing.txt")["error"]
    assert "missing required argument 'path'" in call("read_file", task_id)["error"]
    assert "must be a string" in call("write_file", task_id, path="a", content=5)["error"]


def test_patch(task_id):
    call("write_file", task_id, path="m.py", content="a = 1\nb = 1\n")
    assert call("patch", task_id, path="m.py", old_string="a = 1", new_string="a = 2") == {
        "path": "m.py",
        "replacements": 1,
    }
    missing = call("patch", task_id, path="m.py", old_string="zzz", new_string="")
    assert "not found" in missing["error"]
    twice = call("patch", task_id, path="m.py", old_string=" = ", new_string="=")
    assert "occurs 2 times" in twice["error"]
    result = call(
        "patch", task_id, path="m.py", old_string="\n", new_string=";\n", replace_all=True
    )
    assert result["replacements"] == 2
    assert call("read_file", task_id, path="m.py")["content"] == "a = 2;\nb = 1;\n"


def test_search_files(task_id):
    call("write_file", task_id, path="src/a.py", content="def foo():\n    return 1\n")
    call("write_file", task_id, path="src/b.txt", content="foo bar\n")
    call("write_file", task_id, path="other.py", content="nothing\n")
    found = call("search_files", task_id, pattern=r"foo")
    assert {(m["path"], m["line"]) for m in found["matches"]} == {("src/a.py", 1), ("src/b.txt", 1)}
    only_py = call("search_files", task_id, pattern="foo", path="src", glob="*.py")
    assert [m["text"] for m in only_py["matches"]] == ["def foo():"]
    assert "error" in call("search_files", task_id, pattern="(")


# -- todo ------------------------------------------------------------------------------------


def test_todo_add_list_complete_and_isolation(task_id):
    assert call("todo", task_id, action="add", text="write tests")["todos"] == [
        {"id": 1, "text": "write tests", "done": False}
    ]
    call("todo", task_id, action="add", text="run tests")
    done = call("todo", task_id, action="complete", id=1)["todos"]
    assert [t["done"] for t in done] == [True, False]
    assert len(call("todo", task_id, action="list")["todos"]) == 2
    assert call("todo", f"{task_id}-other", action="list") == {"todos": []}
    assert "no todo item with id 9" in call("todo", task_id, action="complete", id=9)["error"]
    assert "unknown action" in call("todo", task_id, action="delete")["error"]
    assert "needs a non-empty 'text'" in call("todo", task_id, action="add")["error"]
    cleanup_task(task_id)
    assert todo_items(task_id) == []
    cleanup_task(f"{task_id}-other")


def test_error_results_never_show_host_paths(task_id):
    """Tool results go into the next request; a per-process temp path would break replay."""
    from environments.tools.sandbox import sandbox_root

    results = [
        dispatch_tool("read_file", {"path": "missing.txt"}, task_id),
        dispatch_tool("read_file", {"path": "/etc/passwd"}, task_id),
        dispatch_tool("patch", {"path": "nope.py", "old_string": "a", "new_string": "b"}, task_id),
        dispatch_tool("search_files", {"pattern": "x", "path": "nowhere"}, task_id),
    ]
    for result in results:
        assert tool_result_error(result), result
        assert sandbox_root() not in result
    assert "'missing.txt'" in results[0]
    assert "'nowhere'" in results[3]

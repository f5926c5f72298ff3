"""ToolContext's synchronous methods return the former layer's decoded JSON shapes, never raise."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from environments.tool_context import ToolContext
from environments.tools.web import set_web_backend
from environments.tools.web_backends import LocalCorpusBackend


@pytest.fixture
def ctx():
    context = ToolContext(f"test-former-{uuid.uuid4().hex[:8]}")
    yield context
    context.cleanup()


def test_read_file_returns_a_dict_with_content_or_an_error(ctx) -> None:
    ctx.write_file("notes/a.txt", "hello")
    assert ctx.read_file("notes/a.txt").get("content") == "hello"
    missing = ctx.read_file("nope.txt")
    assert "content" not in missing and "FileNotFoundError" in missing["error"]


def test_upload_and_download_are_binary_safe_with_the_former_returns(ctx, tmp_path) -> None:
    payload = bytes(range(256)) * 3
    (tmp_path / "blob.bin").write_bytes(payload)
    assert ctx.upload_file(str(tmp_path / "blob.bin"), "in/blob.bin") == {"exit_code": 0,
                                                                           "output": ""}
    got = ctx.download_file("in/blob.bin", str(tmp_path / "back.bin"))
    assert got == {"success": True, "bytes": len(payload)}
    assert (tmp_path / "back.bin").read_bytes() == payload
    failed = ctx.download_file("absent.bin", str(tmp_path / "x.bin"))
    assert failed["success"] is False and failed["error"]
    assert ctx.upload_file(str(tmp_path / "absent"), "x")["exit_code"] != 0


def test_upload_dir_and_download_dir_return_one_result_per_file(ctx, tmp_path) -> None:
    src = tmp_path / "src"
    (src / "pkg").mkdir(parents=True)
    (src / "a.txt").write_text("A")
    (src / "pkg" / "b.py").write_text("B = 1\n")
    results = ctx.upload_dir(str(src), "project")
    assert results == [{"exit_code": 0, "output": ""}] * 2
    assert ctx.read_file("project/pkg/b.py")["content"] == "B = 1\n"
    out = tmp_path / "out"
    downloaded = ctx.download_dir("project", str(out))
    assert sorted(Path(r["path"]).relative_to(out).as_posix() for r in downloaded) == [
        "a.txt", "pkg/b.py"]
    assert all(r["success"] and r["bytes"] > 0 for r in downloaded)
    assert ctx.upload_dir(str(tmp_path / "nothing"), "x")[0]["exit_code"] == 1
    assert ctx.download_dir("no-such-dir", str(tmp_path / "o2"))[0]["success"] is False


def test_search_finds_text_in_sandbox_files(ctx) -> None:
    ctx.write_file("src/m.py", "def answer():\n    return 42\n")
    found = ctx.search("return 42", path="src")
    assert found["matches"] == [{"path": "src/m.py", "line": 2, "text": "    return 42"}]


def test_call_tool_takes_the_former_and_the_new_keywords(ctx) -> None:
    ctx.write_file("f.txt", "x")
    former = ctx.call_tool(tool_name="read_file", arguments={"path": "f.txt"})
    assert isinstance(former, str) and json.loads(former)["content"] == "x"
    assert json.loads(ctx.call_tool(name="read_file", args='{"path": "f.txt"}'))["content"] == "x"
    assert "error" in json.loads(ctx.call_tool("read_file", "[1, 2]"))  # not an object


def test_terminal_default_timeout_and_errors_as_dicts(ctx) -> None:
    assert ctx.terminal("echo hi") == {"exit_code": 0, "output": "hi\n"}
    broken = ToolContext(ctx.task_id, backend="docker").terminal("ls")
    assert broken["exit_code"] == -1 and "already has a 'local' sandbox" in broken["error"]


def test_web_methods_use_the_configured_backend(ctx, tmp_path) -> None:
    (tmp_path / "rayleigh.md").write_text("url: https://example.org/sky\n# Why the sky is blue\n"
                                          "Rayleigh scattering of sunlight by air molecules.\n")
    set_web_backend(LocalCorpusBackend(tmp_path))
    try:
        hits = ctx.web_search("rayleigh scattering")
        assert hits["results"][0]["url"] == "https://example.org/sky"
        page = ctx.web_extract(["https://example.org/sky", "https://nowhere.test/"])
        assert "Rayleigh scattering" in page["results"][0]["content"]
        assert page["failed"] == [{"url": "https://nowhere.test/",
                                   "error": "not in the local corpus"}]
    finally:
        set_web_backend(None)
    assert "no web backend is configured" in ctx.web_search("anything")["error"]


def test_browser_methods_say_the_toolset_is_not_provided(ctx) -> None:
    assert "browser toolset is not provided" in ctx.browser_navigate("https://x.test")["error"]
    assert "browser toolset is not provided" in ctx.browser_snapshot()["error"]

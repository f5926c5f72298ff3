"""Host-side reads of sandbox content follow no link out, never block, stay bounded (issue 25,
items 2 and 3).

The sandbox's own commands make the hostile files — a link to the recorder's environment
(``/proc/self/environ``, which holds its API key), a link to a host folder, a FIFO — exactly
as a model-chosen tool call would; then the host reads them back the ways a reward and the
file tools do. Each read runs on a worker thread with a deadline, so a read that blocks fails
the test instead of hanging it.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from environments.tool_context import ToolContext
from environments.tools.registry import dispatch_tool
from environments.tools.sandbox import get_sandbox
from environments.tools.sandbox._host_io import CopyLimits

SECRET = "sk-proj-HOSTSECRET" + "x" * 30


@pytest.fixture
def task_id(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("HERMES_TEST_HOST_SECRET", SECRET)
    tid = f"test-host-io-{uuid.uuid4().hex[:8]}"
    yield tid
    ToolContext(tid).cleanup()


def _within(seconds: float, fn: Callable[[], Any]) -> Any:
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # reported to the test below
            box["error"] = exc

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"the host-side read blocked for more than {seconds} s"
    if "error" in box:
        raise box["error"]
    return box["value"]


def _all_bytes(folder: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file())


def test_download_dir_copies_no_link_out_of_the_sandbox(task_id: str, tmp_path: Path) -> None:
    ctx = ToolContext(task_id)
    host_dir = tmp_path / "host"
    host_dir.mkdir()
    (host_dir / "private.txt").write_text("host private " + SECRET)
    made = ctx.terminal(
        "mkdir -p out/sub && echo kept > out/ok.txt && echo deep > out/sub/deep.txt && "
        f"ln -s /proc/self/environ out/env && ln -s {host_dir} out/r && "
        f"ln -s {host_dir}/private.txt out/sub/p && ln -s ok.txt out/inner && mkfifo out/f")
    assert made["exit_code"] == 0, made
    dest = tmp_path / "dl"
    results = _within(30, lambda: ctx.download_dir("out", str(dest)))
    assert all(r["success"] for r in results), results
    assert sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file()) == [
        "ok.txt", "sub/deep.txt"]
    assert not any(p.is_symlink() for p in dest.rglob("*"))
    assert SECRET.encode() not in _all_bytes(dest)
    assert b"HERMES_TEST_HOST_SECRET" not in _all_bytes(dest)


def test_download_file_refuses_a_link_and_a_fifo(task_id: str, tmp_path: Path) -> None:
    ctx = ToolContext(task_id)
    assert ctx.terminal("ln -s /proc/self/environ env; mkfifo f; ln -s /etc/passwd pw")[
        "exit_code"] == 0
    for name in ("env", "f", "pw"):
        result = _within(10, lambda n=name: ctx.download_file(n, str(tmp_path / n)))
        assert result["success"] is False, (name, result)
        assert not (tmp_path / name).exists()


def test_copies_out_are_bounded_in_size_and_count(task_id: str, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    ctx = ToolContext(task_id)
    assert ctx.terminal("mkdir many big && for i in $(seq 1 12); do echo $i > many/$i; done "
                        "&& head -c 300000 /dev/zero > big/blob")["exit_code"] == 0
    sandbox = get_sandbox(task_id)
    monkeypatch.setattr(sandbox, "copy_limits", CopyLimits(max_bytes=100_000, max_files=10))
    too_many = ctx.download_dir("many", str(tmp_path / "many"))
    assert too_many[0]["success"] is False and "more than 10 files" in too_many[0]["error"]
    too_big = ctx.download_file("big/blob", str(tmp_path / "blob"))
    assert too_big["success"] is False and "100000 bytes" in too_big["error"]


def test_file_tools_never_block_on_a_fifo(task_id: str) -> None:
    ctx = ToolContext(task_id)
    assert ctx.terminal("mkfifo f && echo needle > plain.txt && ln -s /proc/self/environ e")[
        "exit_code"] == 0
    read = json.loads(_within(10, lambda: dispatch_tool("read_file", {"path": "f"}, task_id)))
    assert "FIFO" in read["error"]
    found = json.loads(_within(10, lambda: dispatch_tool(
        "search_files", {"pattern": "needle|HOSTSECRET"}, task_id)))
    assert [m["path"] for m in found["matches"]] == ["plain.txt"]


def test_a_file_over_the_read_limit_is_refused_not_cut(task_id: str,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    ctx = ToolContext(task_id)
    ctx.write_file("a.txt", "x" * 5000)
    sandbox = get_sandbox(task_id)
    monkeypatch.setattr(sandbox, "max_read_bytes", 1000)
    result = json.loads(dispatch_tool("patch", {"path": "a.txt", "old_string": "x",
                                                "new_string": "y", "replace_all": True},
                                      task_id))
    assert "more than the 1000" in result["error"]
    monkeypatch.setattr(sandbox, "max_read_bytes", 10_000)
    assert ctx.read_file("a.txt")["content"] == "x" * 5000  # untouched by the refused patch


def test_a_downloaded_file_is_scrubbed_in_the_cassette_and_verify_decodes_it(
        tmp_path: Path) -> None:
    """``download_file`` records base64; the secret inside is scrubbed, and a payload planted
    by hand is found by ``verify`` at its line."""
    import base64

    import hermes_replay
    from hermes_replay._cassette.verify import verify_file

    key = "sk-proj-" + "Dl9Xy8Wv7Ut6Sr5Qp4On3Ml2"
    cassette = tmp_path / "c.jsonl"
    tid = f"test-payload-{uuid.uuid4().hex[:8]}"
    try:
        with hermes_replay.cassette(cassette, "record"), hermes_replay.rollout("r0"):
            ctx = ToolContext(tid)
            ctx.write_file("out/conf.txt", f"OPENAI_API_KEY={key}\nkeep me\n")
            assert ctx.download_file("out/conf.txt", str(tmp_path / "got.txt"))["success"]
    finally:
        ToolContext(tid).cleanup()
    assert (tmp_path / "got.txt").read_text().endswith("keep me\n")  # the reward saw the file
    text = cassette.read_text()
    encoded = [base64.b64encode(key.encode()[i:]).decode()[4:20] for i in range(3)]
    assert key not in text and not any(e in text for e in encoded)
    records = [json.loads(line) for line in text.splitlines()]
    download = next(r for r in records if r.get("name") == "download_file")
    assert base64.b64decode(download["result"][""]).decode().endswith("keep me\n")
    assert verify_file(cassette) == []
    # planted by hand: verify decodes the payload and names the line
    download["result"][""] = base64.b64encode(f"token={key}\n".encode()).decode()
    line = records.index(download) + 1
    cassette.write_text("".join(json.dumps(r) + "\n" for r in records))
    found = [f for f in verify_file(cassette) if f.kind == "secret"]
    assert [f.line for f in found] == [line] and "downloaded file" in found[0].message

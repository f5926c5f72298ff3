"""``read_file`` of a huge or sparse file costs the host what it shows, not the file's size
(issue 25, item 18).

The model makes the file itself, as a tool call would (``truncate -s 500M``: 500 MB that take
no disk). The tool shows the first ``MAX_READ_CHARS`` characters; before the fix it read the
whole file (1 GB of host memory for 500 MB: the bytes and their text), and after the 16 MiB
host-read limit came in it read 16 MiB and then refused the file outright. Memory is measured
with ``tracemalloc`` around the one tool call (``os.read``'s buffers are Python objects).
"""

from __future__ import annotations

import json
import tracemalloc
import uuid

import pytest

from environments.tool_context import ToolContext
from environments.tools.file_tools import MAX_READ_CHARS
from environments.tools.registry import dispatch_tool

SIZE = 500 * 1024 * 1024


@pytest.fixture
def task_id():
    tid = f"test-sparse-{uuid.uuid4().hex[:8]}"
    yield tid
    ToolContext(tid).cleanup()


def _read_measured(path: str, task_id: str) -> tuple[dict, int]:
    tracemalloc.start()
    try:
        text = dispatch_tool("read_file", {"path": path}, task_id)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return json.loads(text), peak


def test_a_500_mb_sparse_file_is_shown_cut_for_a_bounded_cost(task_id: str) -> None:
    ctx = ToolContext(task_id)
    made = ctx.terminal("printf 'start of the file\\n' > big.log && truncate -s 500M big.log")
    assert made["exit_code"] == 0, made
    result, peak = _read_measured("big.log", task_id)
    assert "error" not in result, result
    assert result["content"].startswith("start of the file\n")
    assert len(result["content"]) == MAX_READ_CHARS
    assert result["truncated"] == (f"showing the first {MAX_READ_CHARS} characters of a "
                                   f"{SIZE}-byte file")
    # what is read (4 bytes per shown character) plus its text and JSON, far below the 16 MiB
    # the old read took before refusing (and the 1 GB before that)
    assert peak < 8 * 1024 * 1024, peak


def test_a_character_cut_by_the_bounded_read_is_dropped_not_garbled(task_id: str) -> None:
    """The read stops at a byte count; a UTF-8 character split there is not shown as U+FFFD
    (and the shown text is still the file's first characters)."""
    ctx = ToolContext(task_id)
    text = "a" + "é" * 300_000  # 600,001 bytes: the bounded read ends inside an "é"
    ctx.write_file("accents.txt", text)
    result, _ = _read_measured("accents.txt", task_id)
    assert result["content"] == text[:MAX_READ_CHARS]
    assert "\ufffd" not in result["content"]
    assert result["truncated"].endswith("of a 600001-byte file")


def test_a_small_file_is_read_whole_as_before(task_id: str) -> None:
    ctx = ToolContext(task_id)
    ctx.write_file("short.txt", "x" * 120_000)
    result, _ = _read_measured("short.txt", task_id)
    assert result["content"] == "x" * MAX_READ_CHARS
    assert result["truncated"] == f"showing the first {MAX_READ_CHARS} of 120000 characters"
    ctx.write_file("tiny.txt", "hello\n")
    assert _read_measured("tiny.txt", task_id)[0] == {"path": "tiny.txt", "content": "hello\n"}

"""A live run's output files are scrubbed in place: JSON Lines streamed line by line, a file
with nothing to scrub never rewritten, line ends kept, no temporary file left behind."""

from __future__ import annotations

import json

from hermes_replay._runner.scrub_outputs import scrub_file

KEY = "sk-proj-" + "Qz7" + "a1B2c3D4e5F6g7H8i9J0kLmNoPqRsTuV"


def test_jsonl_lines_with_secrets_are_rewritten_and_the_others_kept_byte_for_byte(tmp_path):
    path = tmp_path / "groups.jsonl"
    clean = json.dumps({"tokens": [[5000, 5001, -100]], "messages": [["no secret, é"]]},
                       ensure_ascii=False)
    dirty = json.dumps({"messages": [[{"role": "user", "content": f"key {KEY}"}]],
                        "tokens": [[1, 2, 3]], "scores": [0.5]})
    path.write_bytes(f"{clean}\n{dirty}\r\nnot json {KEY}\n{clean}".encode())
    assert scrub_file(path) is True
    lines = path.read_bytes().decode().split("\n")
    assert KEY not in path.read_text()
    assert lines[0] == clean and lines[3] == clean  # untouched lines keep their bytes
    assert lines[1].endswith("\r")  # the CRLF of the rewritten line is kept
    rewritten = json.loads(lines[1])
    assert rewritten["tokens"] == [[1, 2, 3]] and rewritten["scores"] == [0.5]
    assert rewritten["messages"][0][0]["content"].startswith("key <redacted")
    assert lines[2].startswith("not json <redacted")
    assert [p.name for p in tmp_path.iterdir()] == ["groups.jsonl"]


def test_a_file_with_nothing_to_scrub_is_not_rewritten(tmp_path):
    path = tmp_path / "groups.jsonl"
    path.write_text(json.dumps({"tokens": [list(range(100_000))], "messages": [["fine"]]})
                    + "\n", encoding="utf-8")
    before = path.stat()
    assert scrub_file(path) is False
    after = path.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert [p.name for p in tmp_path.iterdir()] == ["groups.jsonl"]


def test_json_and_other_files_are_scrubbed_too(tmp_path):
    data, page = tmp_path / "metrics.json", tmp_path / "groups.html"
    data.write_text(json.dumps({"note": f"used {KEY}", "n": 3}), encoding="utf-8")
    page.write_text(f"<p>{KEY}</p>", encoding="utf-8")
    assert scrub_file(data) and scrub_file(page)
    assert KEY not in data.read_text() and json.loads(data.read_text())["n"] == 3
    assert KEY not in page.read_text() and page.read_text().startswith("<p><redacted")

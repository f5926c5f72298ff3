"""Every command that prints cassette content scrubs it as the HTML report does (issue 25,
item 12): a key planted in a cassette by hand never reaches the terminal through ``show``,
``ls``, ``diff`` or a miss report, and what redaction cannot rewrite withholds the output."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from hermes_replay.cli import main

CASSETTE = "cassettes/calc_tool_env/process.jsonl"
KEY = "sk-proj-" + "Q7wE9rT2yU4iO6pA8sD1fG3hJ5kL0zX" + "cV7bN9mQ2wE4rT6y"
PEM = ("-----BEGIN RSA PRIVATE KEY-----\n" + "MIIEowIBAAKCAQEA7Yq1b2c3d4e5f6g7h8i9j0k" * 3
       + "\n-----END RSA PRIVATE KEY-----")


def _plant(path: Path, text: str, *, in_command: bool = True,
           header: dict[str, str] | None = None) -> str:
    """Put ``text`` into the first recorded user message and the reply to it (fingerprints
    dropped: the bodies are then matched as they read), and into the header's command
    (``in_command``); ``header``: request headers to add. Returns that rollout's id."""
    lines = path.read_text(encoding="utf-8").splitlines()
    if in_command:
        first = json.loads(lines[0])
        first["command"] = [*first["command"], "--env.note", f"see {text}"]
        lines[0] = json.dumps(first, ensure_ascii=False)
    for i, line in enumerate(lines[1:], start=1):
        record = json.loads(line)
        if record.get("type") != "interaction":
            continue
        user = next(m for m in record["request"]["body"]["messages"] if m["role"] == "user")
        user["content"] += f" (my key: {text})"
        record["fingerprint"] = ""
        record["request"]["headers"].update(header or {})
        body = record["response"]["body"]
        body["choices"][0]["message"]["content"] = f"noted {text}"
        lines[i] = json.dumps(record, ensure_ascii=False)
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        return record["rollout"]
    raise AssertionError("no interaction")


def _out(capsys: pytest.CaptureFixture) -> str:
    return "".join(capsys.readouterr())


def test_show_scrubs_a_planted_key(calc_project: Path, capsys: pytest.CaptureFixture) -> None:
    rollout = _plant(calc_project / CASSETTE, KEY)
    assert main(["show", CASSETTE, "--rollout", rollout]) == 0
    out = _out(capsys)
    assert KEY not in out and KEY[:20] not in out
    assert "(my key: <redacted" in out
    assert main(["show", CASSETTE, "--rollout", rollout, "--raw"]) == 0
    raw = _out(capsys)
    assert KEY[:20] not in raw and "noted <redacted" in raw  # the recorded reply, raw


def test_ls_scrubs_the_header_it_prints(calc_project: Path,
                                        capsys: pytest.CaptureFixture) -> None:
    _plant(calc_project / CASSETTE, KEY)
    assert main(["ls", CASSETTE]) == 0
    out = _out(capsys)
    assert "--env.note see <redacted" in out, out
    assert KEY[:20] not in out


def test_diff_scrubs_the_diverging_request(calc_project: Path,
                                           capsys: pytest.CaptureFixture) -> None:
    planted = calc_project / "planted.jsonl"
    shutil.copy(calc_project / CASSETTE, planted)
    _plant(planted, KEY)
    main(["diff", CASSETTE, str(planted)])
    out = _out(capsys)
    assert "my key: <redacted" in out, out  # the diverging field is shown, scrubbed
    assert KEY[:20] not in out
    main(["diff", CASSETTE, str(planted), "--json"])
    assert KEY[:20] not in _out(capsys)


def test_a_miss_report_scrubs_the_recorded_side(calc_project: Path,
                                                capsys: pytest.CaptureFixture) -> None:
    _plant(calc_project / CASSETTE, KEY, in_command=False)
    assert main(["replay", CASSETTE, "--out", "out", "--no-report"]) == 1
    out = _out(capsys)
    assert "my key: <redacted" in out, out  # the recorded side of the miss diff
    assert KEY[:20] not in out


def test_a_private_key_block_is_redacted(calc_project: Path,
                                         capsys: pytest.CaptureFixture) -> None:
    rollout = _plant(calc_project / CASSETTE, PEM)
    assert main(["show", CASSETTE, "--rollout", rollout]) == 0
    out = _out(capsys)
    assert "redacted:private-key" in out and "MIIEowIBAAKCAQEA" not in out


def test_what_redaction_cannot_rewrite_is_withheld(calc_project: Path,
                                                    capsys: pytest.CaptureFixture) -> None:
    """A random token where a credential sits, under a name no rule knows: the report
    refuses it (test_report.py), and so does show, naming the next step."""
    token = "Zq8" + "mT4vW9xR2kL7pN3bY6cH1fJ5dG0sA8e"
    rollout = _plant(calc_project / CASSETTE, "hello", in_command=False,
                     header={"x-trace": token})
    assert main(["show", CASSETTE, "--rollout", rollout, "--raw"]) == 1
    out = _out(capsys)
    assert "not shown:" in out and f"hermes-replay verify {CASSETTE}" in out, out
    assert token not in out

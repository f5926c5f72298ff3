"""``hermes-replay verify``: schema, integrity and secrets, each finding at file:line."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

import openai
import pytest
from _reliability_helpers import line_of, read_records, record_sample, write_records

from hermes_replay import cli
from hermes_replay._cassette.verify import Finding, scan_value, verify_file, verify_paths
from hermes_replay._secrets.known import KNOWN

# Secrets built at run time so this file itself holds no key-shaped literal.
SK = "sk-" + "proj-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4"
HF = "hf_" + "aB3dE5gH7jK9mN1pQ3sT5vX7zA9cE1"
AIZA = "AIza" + "SyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p"
RANDOM_TOKEN = "Zq8" + "mT4vW9xR2kL7pN3bY6cH1fJ5dG0sA8e"


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real recording (tools, blobs, deltas, two rollouts with outcomes)."""
    path = tmp_path_factory.mktemp("verify") / "sample.jsonl"
    record_sample(path, rollouts=2, turns=2)
    return path


@pytest.fixture
def records(sample: Path) -> list[dict[str, Any]]:
    return copy.deepcopy(read_records(sample))


def _first_interaction(rec: dict[str, Any]) -> bool:
    return rec["type"] == "interaction"


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = cli.main(["verify", *args])
    out = capsys.readouterr()
    return code, out.out + out.err


# -- clean cassettes ---------------------------------------------------------------------------

def test_verify_is_a_registered_command() -> None:
    assert "verify" in cli.COMMANDS
    assert "verify" in cli.build_parser().format_help()


def test_real_recordings_have_no_findings(sample: Path, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    streamed = tmp_path / "streamed.jsonl"
    record_sample(streamed, rollouts=1, turns=2, stream=True)
    assert verify_file(sample) == []
    assert verify_file(streamed) == []
    code, out = _cli(capsys, str(sample), str(streamed))
    assert code == 0, out
    assert "verified 2 cassette(s): 0 finding(s)" in out


# -- secrets -----------------------------------------------------------------------------------

def _plant(records: list[dict[str, Any]], where: str, secret: str) -> int:
    """Put ``secret`` at one position of the first interaction; return its line."""
    line = line_of(records, _first_interaction)
    inter = records[line - 1]
    req, resp = inter["request"], inter["response"]
    if where == "request header":
        req["headers"]["authorization"] = "Bearer " + secret
    elif where == "custom header":
        req["headers"]["x-custom"] = secret
    elif where == "query":
        req["url"] += "?api_key=" + secret
    elif where == "query random":
        req["url"] += "?trace=" + secret
    elif where == "body field":
        req["body"]["api_key"] = secret
    elif where == "prefixed body field":
        req["body"]["metadata"] = {"openai_api_key": secret}
    elif where == "message":
        req["body"]["messages"][-1]["content"] += " my key is " + secret
    elif where == "response header":
        resp["headers"]["set-cookie"] = "session=" + secret
    elif where == "response body":
        resp["body"]["choices"][0]["message"]["content"] = "use " + secret
    elif where == "header extra":
        records[0]["extra"]["note"] = "key " + secret
        return 1
    elif where == "command":
        records[0]["command"] = ["process", "--openai.api_key", secret]
        return 1
    else:
        raise AssertionError(where)
    return line


@pytest.mark.parametrize(("where", "secret"), [
    ("request header", RANDOM_TOKEN),
    ("custom header", RANDOM_TOKEN),
    ("query", "short-but-named"),
    ("query random", RANDOM_TOKEN),
    ("body field", "hunter2-password"),
    ("prefixed body field", "plain-value-123"),
    ("message", SK),
    ("message", HF),
    ("response header", RANDOM_TOKEN),
    ("response body", AIZA),
    ("header extra", SK),
    ("command", "plain-value-123"),
])
def test_planted_secret_is_found_at_its_line_and_never_printed(
        records: list[dict[str, Any]], tmp_path: Path, capsys: pytest.CaptureFixture[str],
        where: str, secret: str) -> None:
    line = _plant(records, where, secret)
    path = tmp_path / "leaky.jsonl"
    write_records(path, records)
    findings = verify_file(path)
    secrets = [f for f in findings if f.kind == "secret"]
    assert secrets, f"no secret finding for {where}: {findings}"
    assert {f.line for f in secrets} == {line}
    code, out = _cli(capsys, str(path))
    assert code == 1
    assert f"{path}:{line}: secret:" in out
    assert "next step: remove it now: revoke/rotate" in out
    assert secret not in out  # masked: first characters and the length only


def test_placeholders_and_data_fields_are_not_secrets() -> None:
    value = {"headers": {"authorization": "<redacted:authorization>",
                         "content-type": "application/json"},
             "url": "http://h/v1/chat?api_key=<redacted:api_key>",
             "body": {"logprobs": [{"token": "Hello", "logprob": -0.1}], "eos_token": "</s>",
                      "id": "chatcmpl-" + "0a1b2c3d" * 3, "api_key": "<redacted:api_key>",
                      "content": "Bearer <redacted:token> was sent"}}
    # the rules alone: a key another test of this process made known (one holding
    # ``0a1b2c3d``) would rightly find its piece in the made-up id
    with KNOWN.scope(empty=True):
        assert list(scan_value(value)) == []


# -- integrity ---------------------------------------------------------------------------------

def _write(tmp_path: Path, records: list[dict[str, Any]], name: str = "c.jsonl") -> Path:
    path = tmp_path / name
    write_records(path, records)
    return path


def test_blob_checksum_mismatch(records: list[dict[str, Any]], tmp_path: Path) -> None:
    line = line_of(records, lambda r: r["type"] == "blob")
    records[line - 1]["value"] = str(records[line - 1]["value"]).replace("careful", "sloppy")
    findings = verify_file(_write(tmp_path, records))
    assert [(f.line, f.kind) for f in findings] == [(line, "integrity")]
    assert "checksum" in findings[0].message


def test_missing_blob_and_bad_delta(records: list[dict[str, Any]], tmp_path: Path) -> None:
    blob = line_of(records, lambda r: r["type"] == "blob")
    del records[blob - 1]
    findings = verify_file(_write(tmp_path, records))
    assert any(f.kind == "integrity" and "which no earlier line defines" in f.message
               for f in findings)
    # a delta pointing to a turn that was never recorded
    records = read_records(tmp_path / "c.jsonl")
    second = [i for i, r in enumerate(records, 1) if r["type"] == "interaction"][1]
    records[second - 1]["request"]["body"]["messages"] = {
        "$delta": {"prev": 7, "keep": 1, "append": []}}
    findings = verify_file(_write(tmp_path, records, "d.jsonl"))
    assert any(f.line == second and "delta refers to turn 7" in f.message for f in findings)


def test_duplicate_and_missing_turns(records: list[dict[str, Any]], tmp_path: Path) -> None:
    interactions = [i for i, r in enumerate(records, 1) if r["type"] == "interaction"]
    dup = copy.deepcopy(records)
    dup[interactions[1] - 1]["seq"] = 0
    findings = verify_file(_write(tmp_path, dup, "dup.jsonl"))
    assert any(f.line == interactions[1] and "duplicate recording" in f.message
               and f"first at line {interactions[0]}" in f.message for f in findings)
    gap = copy.deepcopy(records)
    gap[interactions[1] - 1]["seq"] = 5
    findings = verify_file(_write(tmp_path, gap, "gap.jsonl"))
    assert any("a turn is missing" in f.message for f in findings)


def test_cut_off_at_a_record_boundary_is_noticed(records: list[dict[str, Any]],
                                                 tmp_path: Path) -> None:
    last_outcome = max(i for i, r in enumerate(records) if r["type"] == "outcome")
    findings = verify_file(_write(tmp_path, records[:last_outcome]))
    assert any("no outcome while others do" in f.message for f in findings)


def test_partial_recording_is_flagged_with_its_count(sample: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    lines = sample.read_text(encoding="utf-8").splitlines(keepends=True)
    last = max(i for i, line in enumerate(lines) if '"type": "interaction"' in line)
    partial = tmp_path / "c.jsonl.partial"
    partial.write_text("".join(lines[:last]) + lines[last][:60], encoding="utf-8")  # torn
    findings = verify_file(partial)
    assert len(findings) == 1
    assert "interrupted recording (.partial) with 3 complete interaction(s)" in \
        findings[0].message
    code, out = _cli(capsys, str(tmp_path))
    assert code == 1 and "c.jsonl.partial" in out


# -- schema ------------------------------------------------------------------------------------

@pytest.mark.parametrize(("mutate", "expected"), [
    (lambda rs: rs[0].update(schema_version=99), "newer than this hermes-replay reads"),
    (lambda rs: rs[0].update(schema_version="1"), "bad schema_version"),
    (lambda rs: rs[0].update(env_file="/tmp/evil_env.py"), "points outside the project"),
    (lambda rs: rs[0].update(env_file="../../evil_env.py"), "points outside the project"),
    (lambda rs: rs[3].update(rollout="../../etc/passwd"), "path separators"),
    (lambda rs: rs[3].update(rollout="r\x1b[2Jx"), "control characters"),
    (lambda rs: rs[3].update(seq="zero"), "seq must be a non-negative integer"),
    (lambda rs: rs[3].update(request=[]), "request must be an object"),
    (lambda rs: rs[3]["response"].update(status=503), "failed attempt recorded"),
    (lambda rs: rs.append({"type": "macro", "run": "rm -rf /"}), "unknown record type"),
])
def test_schema_problems_are_named(records: list[dict[str, Any]], tmp_path: Path,
                                   mutate: Any, expected: str) -> None:
    assert records[3]["type"] == "interaction"
    mutate(records)
    findings = verify_file(_write(tmp_path, records))
    hits = [f for f in findings if expected in f.message]
    assert hits, findings
    assert hits[0].line is not None and hits[0].kind == "schema"


@pytest.mark.parametrize("garbage", [
    b"{not json\n", b'"a string"\n', b"\xff\xfe\xfd\n", b"[" * 50000 + b"]" * 50000 + b"\n",
    b'{"type":"interaction","seq":' + b"9" * 5000 + b"}\n",
])
def test_undecodable_lines_are_findings_not_crashes(sample: Path, tmp_path: Path,
                                                    garbage: bytes) -> None:
    data = sample.read_bytes().split(b"\n")
    data.insert(2, garbage.rstrip(b"\n"))
    path = tmp_path / "c.jsonl"
    path.write_bytes(b"\n".join(data))
    findings = verify_file(path)
    assert any(f.line == 3 and f.kind == "schema" for f in findings), findings


# -- folders -----------------------------------------------------------------------------------

def test_folder_skips_data_files_flags_outside_symlinks(sample: Path, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "cassettes"
    (folder / "env").mkdir(parents=True)
    (folder / "env" / "process.jsonl").write_bytes(sample.read_bytes())
    (folder / "env" / "rollouts.jsonl").write_text('{"tokens": [1, 2], "scores": [0.5]}\n')
    outside = tmp_path / "elsewhere.jsonl"
    outside.write_bytes(sample.read_bytes())
    os.symlink(outside, folder / "env" / "linked.jsonl")
    checked, findings = verify_paths([folder])
    assert checked == [folder / "env" / "process.jsonl"]
    assert [f.message.split(",")[0] for f in findings] == [f"symlink to {outside}"]
    code, out = _cli(capsys, str(folder))
    assert code == 1 and "linked.jsonl: integrity: symlink" in out


def test_nothing_to_verify_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _cli(capsys, str(tmp_path))
    assert code == 2 and "no cassette found" in out
    code, out = _cli(capsys, str(tmp_path / "missing.jsonl"))
    assert code == 2 and "no such file or folder" in out


def test_finding_describe_has_location_and_next_step() -> None:
    text = Finding(Path("a.jsonl"), 7, "integrity", "what", "do this").describe()
    assert text == "a.jsonl:7: integrity: what\n  next step: do this"
    assert json.dumps(text)  # printable


def test_shipped_cassettes_verify_clean(capsys: pytest.CaptureFixture[str]) -> None:
    """The committed cassettes of the example environments: no finding, no false positive."""
    shipped = Path(__file__).resolve().parents[2] / "cassettes"
    checked, findings = verify_paths([shipped])
    assert len(checked) >= 6
    assert [f.describe() for f in findings] == []
    code, out = _cli(capsys, str(shipped))
    assert code == 0 and f"verified {len(checked)} cassette(s): 0 finding(s)" in out


def test_secret_in_a_damaged_line_is_still_found(sample: Path, tmp_path: Path) -> None:
    lines = sample.read_text(encoding="utf-8").splitlines()
    lines.insert(2, '{"type": "interaction", "request": {"headers": {"x": "' + SK)  # cut off
    path = tmp_path / "c.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    findings = {(f.line, f.kind) for f in verify_file(path)}
    assert {(3, "schema"), (3, "secret")} <= findings


# -- one rule for rollout ids ------------------------------------------------------------------

@pytest.mark.parametrize("bad", ["item-0/slot-0", "a\\b", "up..down", "tab\there", "", "x" * 257])
def test_rollout_refuses_an_id_verify_would_flag(bad: str) -> None:
    import hermes_replay
    from hermes_replay._session.scope import ROLLOUT_ID_RULE

    with pytest.raises(ValueError) as info:
        with hermes_replay.rollout(bad):
            pass
    assert ROLLOUT_ID_RULE in str(info.value)


def test_every_id_recording_accepts_verifies_clean(tmp_path: Path) -> None:
    """Odd but allowed ids (spaces, unicode, dots, colons, the longest) record and verify."""
    from _reliability_helpers import FAKE_KEY

    import hermes_replay
    from hermes_replay.scripted_endpoint import ScriptedEndpoint

    ids = ["item 0 · slot 0", "ünï-cödé", "v1.2:slot#3", "x" * 256, "eval-abc-0-0"]
    path = tmp_path / "odd-ids.jsonl"
    with ScriptedEndpoint(script="generic", seed=0) as ep:
        client = openai.OpenAI(base_url=ep.base_url, api_key=FAKE_KEY, max_retries=0)
        with hermes_replay.cassette(path, "record"):
            for rid in ids:
                with hermes_replay.rollout(rid) as scope:
                    client.chat.completions.create(
                        model="m", messages=[{"role": "user", "content": rid}])
                    scope.report(reward=1.0)
        client.close()
    assert sorted(hermes_replay.load_cassette(path).rollouts) == sorted(ids)
    assert verify_file(path) == []

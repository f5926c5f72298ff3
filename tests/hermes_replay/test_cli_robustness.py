"""The CLI meets damaged inputs and a hostile machine with a message, never a traceback
(issue 36: findings 08, 09, 10, 11, 12, 15, 22 and the "also seen" line)."""

from __future__ import annotations

import errno
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from _calc_project import CASSETTE_REL

import environments.hermes_base_env  # noqa: F401  (numpy once per process)
from hermes_replay._cassette.verify import verify_file
from hermes_replay._runner.plan import find_cassettes
from hermes_replay.cli import main

ESC = "\x1b[31mRED\x07"


def _header_only(path: Path, **header: Any) -> Path:
    """A cassette of a header (with ``header``'s fields) and one interaction."""
    path.parent.mkdir(parents=True, exist_ok=True)
    head = {"type": "header", "schema_version": 1, "env_name": "e",
            "env_file": "environments/e.py", "command": ["process"],
            "created": "2026-01-01T00:00:00Z", **header}
    inter = {"type": "interaction", "rollout": "r0", "seq": 0,
             "request": {"method": "POST", "url": "http://127.0.0.1:9/v1/chat/completions",
                         "headers": {}, "body": {"messages": []}},
             "response": {"status": 200, "headers": {}, "body": {}}}
    path.write_text(json.dumps(head) + "\n" + json.dumps(inter) + "\n", encoding="utf-8")
    return path


# -- 12: a FIFO or a folder named like a cassette ---------------------------------------------

def test_a_fifo_or_a_folder_named_jsonl_is_not_a_cassette(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    good = _header_only(tmp_path / "cassettes" / "good.jsonl")
    os.mkfifo(tmp_path / "cassettes" / "pipe.jsonl")  # opening it would wait for a writer
    (tmp_path / "cassettes" / "dir.jsonl").mkdir()
    (tmp_path / "cassettes" / "dir.jsonl.zst").mkdir()
    assert find_cassettes(tmp_path / "cassettes") == [good]
    from hermes_replay._corpus.watch_plan import WatchPlan

    plan = WatchPlan.from_target(tmp_path / "cassettes")  # what `watch` replays, and re-finds
    assert plan.cassettes == [good.resolve()]
    assert plan.affected([tmp_path / "cassettes" / "pipe.jsonl"]) == [good.resolve()]
    assert main(["ls", "cassettes"]) == 0
    assert "good.jsonl" in capsys.readouterr().out
    good.unlink()  # only the odd entries left: nothing to replay, said as such
    assert main(["replay", "cassettes", "--no-report"]) == 2
    assert "no cassette in cassettes" in capsys.readouterr().err
    assert main(["replay", "cassettes", "--twice"]) == 2
    assert main(["verify", "cassettes"]) == 2


# -- 08: a damaged replay.json ------------------------------------------------------------------

def _manifest(**changes: Any) -> dict[str, Any]:
    data = {"type": "hermes-replay-replay", "schema_version": 1, "corpus": "cassettes",
            "shard": "1/2", "complete": True, "corpus_cassettes": ["a.jsonl"],
            "rows": [{"rel": "a.jsonl", "cassette": "cassettes/a.jsonl", "mode": "process",
                      "summary": {"mode": "replay", "cassette": "cassettes/a.jsonl"}}]}
    data.update(changes)
    return data


@pytest.mark.parametrize(("text", "says"), [
    (json.dumps(_manifest(shard="0/2")), "I must be between 1 and N"),
    (json.dumps(_manifest(shard="abc")), "give I/N"),
    (json.dumps(_manifest(shard=2)), "shard is a int"),
    (json.dumps(_manifest(complete="false")), "complete is 'false', not true or false"),
    (json.dumps(_manifest(rows=[{"rel": "a", "cassette": "a", "mode": "process",
                                  "summary": {"mode": "replay", "rescore": []}}])),
     "summary field 'rescore' is a list, not dict"),
    (json.dumps(_manifest(rows=[{"rel": "a", "cassette": "a", "mode": "process",
                                  "summary": {"mode": "replay", "exit_code": True}}])),
     "summary field 'exit_code' is a bool"),
    ("[" * 100_000, "nested too deeply"),
    # trust round 5 (round 4's 08 still open): the values inside a summary's dicts and lists
    (json.dumps(_manifest(rows=[{"rel": "a", "cassette": "a", "mode": "process",
                                  "summary": {"mode": "replay", "rescore": {"r": "x"}}}])),
     "summary field 'rescore'['r'] is a str, not dict"),
    (json.dumps(_manifest(rows=[{"rel": "a", "cassette": "a", "mode": "process",
                                  "summary": {"mode": "replay",
                                              "rescore": {"r": {"stdev": "x"}}}}])),
     "summary field 'rescore'['r']['stdev'] is a str"),
    (json.dumps(_manifest(rows=[{"rel": "a", "cassette": "a", "mode": "process",
                                  "summary": {"mode": "replay",
                                              "rescore": {"r": {"rewards": 3}}}}])),
     "summary field 'rescore'['r']['rewards'] is a int"),
    (json.dumps(_manifest(rows=[{"rel": "a", "cassette": "a", "mode": "process",
                                  "summary": {"mode": "replay", "changed": {"r": [1]}}}])),
     "summary field 'changed'['r'] is a list of 1, not 2"),
    (json.dumps(_manifest(rows=[{"rel": "a", "cassette": "a", "mode": "process",
                                  "summary": {"mode": "replay", "unused_keys": [1]}}])),
     "summary field 'unused_keys'[0] is a int, not str"),
])
def test_results_reads_a_damaged_manifest_with_a_clear_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, says: str) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "replay.json").write_text(text, encoding="utf-8")
    assert main(["results", str(tmp_path / "out"), "--no-report"]) == 2
    err = capsys.readouterr().err
    assert "cannot be read as a replay manifest" in err and says in err, err
    assert "Traceback" not in err


def test_results_shows_a_manifests_text_escaped(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Trust round 5, finding 06: a downloaded shard's ``replay.json`` names a cassette no
    shard replayed whose name erases the line above (``\\e[2K\\e[1A``): shown escaped."""
    erase = "\x1b[2K\x1b[1A"
    (tmp_path / "out").mkdir()
    manifest = _manifest(corpus_cassettes=["a.jsonl", f"b{erase}.jsonl"],
                         rows=[{"rel": "a.jsonl", "cassette": f"cassettes/a{erase}.jsonl",
                                "mode": f"process{erase}",
                                "summary": {"mode": "replay", "cassette": "a",
                                            "error": f"boom{erase}"}}])
    (tmp_path / "out" / "replay.json").write_text(json.dumps(manifest), encoding="utf-8")
    assert main(["results", str(tmp_path / "out"), "--no-report"]) == 1
    out = capsys.readouterr().out
    assert "\x1b" not in out, out
    assert "b\\x1b[2K\\x1b[1A.jsonl (shard" in out


def test_results_report_below_a_file_is_a_usage_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Trust round 5, finding 08: ``results -o FILE/report.html`` built the whole page, then
    ended in a ``FileExistsError`` traceback; now exit 2 before anything is read, naming the
    file and the next step. ``report -o`` says the same."""
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "replay.json").write_text(json.dumps(_manifest()), encoding="utf-8")
    (tmp_path / "a-file").write_text("not a folder")
    target = tmp_path / "a-file" / "report.html"
    assert main(["results", str(tmp_path / "out"), "-o", str(target)]) == 2
    err = capsys.readouterr().err
    assert f"cannot write the report at {target}: {tmp_path / 'a-file'} is a file" in err, err
    assert "Next step: pass another -o path" in err and "Traceback" not in err
    shipped = Path(__file__).resolve().parents[2] / "cassettes" / "terminal_test_env"
    assert main(["report", str(shipped / "process.jsonl"), "-o", str(target)]) == 2
    assert "is a file" in capsys.readouterr().err
    assert (tmp_path / "a-file").read_text() == "not a folder"


def test_normalize_list_shows_a_headers_escapes_escaped(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Trust round 5, finding 06: a header's normalizer whose regex holds ``\\e[2K`` (a valid
    regex, matching those bytes) is printed by ``normalize --list`` through the sanitiser."""
    path = _header_only(tmp_path / "a.jsonl", normalizers=[["\x1b\\[2K\x1b\\[1A", "x"]])
    assert main(["normalize", str(path), "--list"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\\x1b\\[2K" in out, out


# -- 09 and the shard flags -----------------------------------------------------------------

@pytest.mark.parametrize(("flags", "environ", "says"), [
    ([], {"SLURM_ARRAY_TASK_ID": "3", "SLURM_ARRAY_TASK_COUNT": "4",
          "SLURM_ARRAY_TASK_STEP": "0"}, "SLURM_ARRAY_TASK_STEP=0: an array's step is at least 1"),
    (["--shard", ""], {}, "--shard : give I/N"),  # it replayed the whole corpus
    (["--shard", "１/２"], {}, "give I/N"),  # full-width digits: int() takes them
    (["--shard", " 1/2"], {}, "give I/N"),
])
def test_shards_that_name_no_shard_are_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        flags: list[str], environ: dict[str, str], says: str) -> None:
    for name in ("SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT", "SLURM_ARRAY_TASK_MIN",
                 "SLURM_ARRAY_TASK_STEP"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    _header_only(tmp_path / "c" / "a.jsonl")
    assert main(["replay", str(tmp_path / "c"), *flags]) == 2
    assert says in capsys.readouterr().err


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    from hermes_replay import __version__

    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.strip() == f"hermes-replay {__version__}"


# -- 10, 11: what a header says reaches the terminal escaped; a name no file has ---------------

def test_header_text_reaches_the_terminal_escaped(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text("")
    a = _header_only(tmp_path / "cassettes" / "a.jsonl", env_name=f"n{ESC}",
                     env_file=f"environments/x{ESC}.py")
    b = _header_only(tmp_path / "other" / "b.jsonl", env_name=f"n{ESC}")
    assert main(["replay", "cassettes", "--out", "o", "--no-report"]) == 1
    captured = capsys.readouterr()
    assert "was not found" in captured.err and "\\x1b[31mRED\\x07" in captured.err
    assert "\x1b" not in captured.out + captured.err and "\x07" not in captured.err
    main(["diff", str(a), str(b)])
    captured = capsys.readouterr()
    assert "n\\x1b[31mRED" in captured.out
    assert "\x1b" not in captured.out + captured.err


def test_an_env_file_no_file_can_have_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text("")
    cassette = _header_only(tmp_path / "cassettes" / "a.jsonl", env_file="e" * 6000 + ".py")
    assert main(["replay", "cassettes", "--out", "o", "--no-report"]) == 1
    err = capsys.readouterr().err
    assert "the header's env_file is 6,003 characters long" in err
    assert "Traceback" not in err and "File name too long" not in err
    assert any("6,003 characters long" in f.message for f in verify_file(cassette))


# -- 15: a full disk ------------------------------------------------------------------------

def _disk_full(*args: Any, **kwargs: Any) -> None:
    raise OSError(errno.ENOSPC, "No space left on device", "FULL/replay.json")


def test_a_full_disk_is_a_message_not_a_traceback(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text("")
    _header_only(tmp_path / "cassettes" / "a.jsonl", env_file="environments/none.py")
    from hermes_replay._corpus import manifest as _manifest

    monkeypatch.setattr(_manifest, "write_text_atomic", _disk_full)
    assert main(["replay", "cassettes", "--out", "FULL", "--no-report"]) == 1
    err = capsys.readouterr().err
    assert "hermes-replay replay: cannot write FULL/replay.json: No space left on device. " \
           "Next step: free space" in err
    monkeypatch.undo()
    monkeypatch.chdir(tmp_path)
    assert main(["replay", "cassettes", "--out", "out", "--no-report"]) == 1
    capsys.readouterr()
    from hermes_replay import _report

    monkeypatch.setattr(_report, "write_report", _disk_full)
    assert main(["results", "out", "-o", "FULL/report.html"]) == 1
    assert "hermes-replay results: cannot write FULL/replay.json: No space left on device" \
        in capsys.readouterr().err


# -- 22: x.jsonl and x.jsonl.zst side by side -----------------------------------------------

def test_a_cassette_and_its_compressed_copy_get_their_own_outputs(
        calc_project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plain = calc_project / CASSETTE_REL
    assert main(["compact", str(plain), "-o", str(plain) + ".zst"]) == 0
    assert main(["replay", "cassettes", "-j", "1", "--out", "out", "--no-report"]) == 0
    capsys.readouterr()
    first = calc_project / "out" / "calc_tool_env" / "process" / "result.json"
    second = calc_project / "out" / "calc_tool_env" / "process.zst" / "result.json"
    assert first.is_file() and second.is_file()
    assert json.loads(first.read_text())["cassette"].endswith("process.jsonl")
    assert json.loads(second.read_text())["cassette"].endswith("process.jsonl.zst")
    shutil.rmtree(calc_project / "out")


# -- also seen: --ray-upload shipped a .env when the project had no .gitignore ----------------

def test_ray_upload_never_ships_credentials_files(tmp_path: Path) -> None:
    """Through Ray's own matcher of ``excludes`` (what ``working_dir`` uploads)."""
    pytest.importorskip("ray")
    from ray._private.runtime_env.packaging import _get_excludes

    from hermes_replay._corpus.on_ray import upload_excludes

    root = tmp_path / "project"
    for name in (".env", ".env.local", "prod.env", ".envrc", "deploy/id_rsa", "certs/tls.key",
                 ".aws/credentials", "environments/e.py", "cassettes/e/process.jsonl"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("x")
    excluded = _get_excludes(root, upload_excludes(root, [root / "out" / "e"]))
    shipped = sorted(p.relative_to(root).as_posix() for p in root.rglob("*")
                     if p.is_file() and not any(excluded(q) for q in (p, *p.parents)
                                                if q.is_relative_to(root) and q != root))
    assert shipped == ["cassettes/e/process.jsonl", "environments/e.py"]

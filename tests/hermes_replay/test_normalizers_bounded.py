"""Normalizers kept in a header are data from outside: bounded in count and time, never
broader than what they name, and checked by ``verify`` exactly as a replay checks them
(issue 36, findings 01, 02, 03, 18, 19).

Each bad header is planted in a real recording; a replay must refuse it when it opens the
cassette (naming it), and ``verify`` must flag it with the same words.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from _reliability_helpers import read_records, record_sample, write_records

import hermes_replay
from hermes_replay._cassette import normalizer_checks
from hermes_replay._cassette.verify import verify_file
from hermes_replay.cli import main

BACKTRACKS = r"(?:\w+\s?)+QQQ"  # 14 characters: hung replay forever on a 750-char prompt


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("normalizers") / "sample.jsonl"
    record_sample(path, rollouts=2, turns=2)
    return path


def _with_normalizers(sample: Path, folder: Path, normalizers: Any) -> Path:
    records = copy.deepcopy(read_records(sample))
    records[0]["normalizers"] = normalizers
    path = folder / "c.jsonl"
    write_records(path, records)
    return path


def _refused_at_open(path: Path) -> str:
    started = time.monotonic()
    with pytest.raises(hermes_replay.CassetteError) as info:
        with hermes_replay.cassette(path, "replay"):
            pass
    assert time.monotonic() - started < 5
    text = str(info.value)
    assert f"{path}:1" in text and "normalizers" in text and "next step" in text.lower()
    return text


def _flagged_by_verify(path: Path) -> str:
    findings = [f for f in verify_file(path) if "normalizers" in f.message]
    assert len(findings) == 1, verify_file(path)
    assert findings[0].line == 1 and "replay refuses this cassette" in findings[0].message
    return findings[0].message


def test_a_backtracking_normalizer_is_refused_at_open_not_run(sample: Path,
                                                               tmp_path: Path) -> None:
    """Finding 01. In a child process: before the fix, opening the cassette never ended."""
    path = _with_normalizers(sample, tmp_path, [[BACKTRACKS, "x"]])
    code = ("import sys, hermes_replay\n"
            "try:\n"
            f"    with hermes_replay.cassette({str(path)!r}, 'replay'): pass\n"
            "except hermes_replay.CassetteError as e:\n"
            "    print(e); sys.exit(3)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=False)
    assert proc.returncode == 3, proc.stderr
    assert repr(BACKTRACKS) in proc.stdout and "can backtrack without end" in proc.stdout
    assert "can backtrack without end" in _flagged_by_verify(path)


@pytest.mark.parametrize(("normalizers", "says"), [
    ([["(?s).+", "x"]], "matches everything"),  # finding 03: a changed request was a hit
    ([[r"\S+", "x"]], "matches everything"),
    ([[r"\s*", " "]], "matches the empty string"),
    ([["(a)", "\\9"]], "the replacement '\\\\9' of '(a)' cannot be used"),  # finding 18
    ([["("]], "a normalizer is a built-in name"),  # finding 19: verify passed these four
    ([["(", "x"]], "'(' is not a regex"),
    ([["a" * 501, "x"]], "501 characters long (at most 500)"),
    (["nope"], "no built-in normalizer 'nope'"),
    ([[1, 2]], "a normalizer is a built-in name"),
    ([[f"x{i}", "y"] for i in range(5000)], "more than 64 normalizers"),  # finding 02
    # trust round 5, finding 04: zero-width, with a replacement to insert (a 41 KB header of
    # two of them made every request 4 MB: MemoryError in replay, verify 0 findings)
    ([["(?=.)", "x" * 2000], ["(?=[a-z])", "y" * 2000]], "2,000 characters long (at most 200)"),
    ([["(?=.)", "<x>"]], "it can match zero characters"),
    ([[r"\b", "|"]], "it can match zero characters"),
    # finding 05: erases everything after character 70 (the samples are shorter)
    ([["(?s)(?<=.{70}).+", "x"]], "it has an unbounded wildcard"),
    ([["Today is .*", "x"]], "it has an unbounded wildcard"),
    ([["(?<=.{70})[a-z]", "x"]], "its lookbehind is a count of characters, not text"),
    ([["(?<=[a-z ]{100})x", "y"]], "its lookbehind is a count of characters, not text"),
    ([["(?<=[a-z ]{40})[a-z]{1,30}", "w"]], "it erases ordinary text"),  # the probe
])
def test_replay_and_verify_refuse_the_same_normalizers(sample: Path, tmp_path: Path,
                                                       normalizers: Any, says: str) -> None:
    path = _with_normalizers(sample, tmp_path, normalizers)
    assert says in _refused_at_open(path)
    assert says in _flagged_by_verify(path)


def test_a_match_all_normalizer_never_makes_a_changed_request_a_hit(sample: Path,
                                                                     tmp_path: Path) -> None:
    """Finding 03 through the CLI: ``verify`` exits 1 naming it (it said 0 findings)."""
    path = _with_normalizers(sample, tmp_path, [["(?s).+", "x"]])
    assert main(["verify", str(path)]) == 1


def test_good_normalizers_still_pass(sample: Path, tmp_path: Path) -> None:
    path = _with_normalizers(sample, tmp_path, ["datetime", [r"\bREQ-\d+", "<req>"],
                                                [r"v(\d+\.)+\d+", r"v<\1>"],
                                                [r"(?<=id=)\d+", "<id>"], [r"\s{2,}", " "],
                                                [r"Today is [^\n.]{1,40}", "Today is <d>"]])
    assert verify_file(path) == []
    with hermes_replay.cassette(path, "replay") as session:
        assert session.normalizers[0] == "datetime"


def test_normalize_refuses_a_bad_replacement_and_removes_a_refused_one(
        sample: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _with_normalizers(sample, tmp_path, [])
    with pytest.raises(SystemExit) as info:  # finding 18: `normalize --add` accepted it
        main(["normalize", str(path), "--add", "(a)=\\9"])
    assert info.value.code == 2
    assert "invalid group reference 9" in capsys.readouterr().err
    bad = _with_normalizers(sample, tmp_path, [[BACKTRACKS, "x"], "uuid"])
    assert main(["normalize", str(bad), "--list"]) == 1
    assert "can backtrack without end" in capsys.readouterr().err
    assert main(["normalize", str(bad), "--remove", f"{BACKTRACKS}=x"]) == 0
    assert json.loads(bad.read_text().splitlines()[0])["normalizers"] == ["uuid"]
    assert verify_file(bad) == []


def test_one_use_is_bounded_in_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the static check lets through still cannot run without end: each use of a custom
    normalizer has a deadline and stops with an error naming it."""
    monkeypatch.setattr(normalizer_checks, "USE_TIMEOUT", 0.001)
    slow = normalizer_checks.bounded(r"\bREQ-\d+")
    with pytest.raises(normalizer_checks.NormalizerTooSlow) as info:
        slow.sub("<req>", "REQ-1 " * 2_000_000)
    assert "'\\\\bREQ-\\\\d+' ran longer than 0.001 s" in str(info.value)
    assert isinstance(info.value, BaseException) and not isinstance(info.value, Exception)


def test_what_one_use_adds_is_bounded(sample: Path, tmp_path: Path) -> None:
    """Trust round 5, finding 04: what the static checks let through still cannot inflate a
    request without end. ``a`` → 200 characters passes them (it matches one character, its
    replacement is short enough, it keeps every change), yet on a string of a's it grows it
    200-fold: the use stops, naming it, before the string is built; a replay refuses the
    cassette at open."""
    grows = normalizer_checks.bounded("a")
    assert grows.sub("<a>", "a" * 1000) == "<a>" * 1000  # 3-fold: a placeholder's growth
    with pytest.raises(normalizer_checks.NormalizerGrew) as info:
        grows.sub("y" * 200, "a" * 100_000)
    assert "'a' made a 100,000-character string longer than" in str(info.value)
    assert isinstance(info.value, normalizer_checks.NormalizerStopped)
    from hermes_replay._cassette.matching import Matcher
    from hermes_replay._cassette.normalizers import expand

    chain = Matcher.build(normalizers=expand([("a", "a" * 4), ("a", "a" * 4)]))
    with pytest.raises(normalizer_checks.NormalizerGrew):  # bounded along the chain too
        chain.canonical({"method": "POST", "url": "http://x/v1", "body": {"t": "a" * 5000}})
    # in a header: every 'e' of the recorded prompts becomes 200 characters (it passes the
    # static checks: one character matched, a replacement of 200, every change kept)
    path = _with_normalizers(sample, tmp_path, [["e", "y" * 200]])
    assert "made a" in _refused_at_open(path)
    assert "made a" in _flagged_by_verify(path)  # verify applies them as the replay does

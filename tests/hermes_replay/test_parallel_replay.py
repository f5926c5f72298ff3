"""``hermes-replay replay DIR -j N``: cassettes replayed in N worker processes, one table and
one exit code — the same verdicts, rows and outputs as ``-j 1``, a failure anywhere still a
failure (a broken cassette, a miss with its diff), never lost in a worker."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from conftest import trust

from hermes_replay import load_cassette
from hermes_replay._cassette import write_cassette
from hermes_replay.cli import main

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted((ROOT / "cassettes").glob("*/evaluate.jsonl"))


def _folder(tmp_path: Path) -> Path:
    """A project (its env files, a pyproject.toml) whose cassettes folder holds three good
    cassettes, one that misses (a recorded prompt edited) and one broken file."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'user-project'\n")
    (tmp_path / "environments").mkdir()
    folder = tmp_path / "cassettes"
    for cassette in SHIPPED:
        (folder / cassette.parent.name).mkdir(parents=True)
        shutil.copy(cassette, folder / cassette.parent.name / "evaluate.jsonl")
        shutil.copy(ROOT / "environments" / f"{cassette.parent.name}.py",
                    tmp_path / "environments" / f"{cassette.parent.name}.py")
    trust(tmp_path)  # the user's project (copied here, not recorded here), env files and all
    edited = load_cassette(SHIPPED[0])
    first = edited.interactions[0]
    first.request["body"]["messages"][-1]["content"] += " (edited)"
    first.fingerprint = ""  # recomputed from the edited body on load: the replay must miss
    write_cassette(folder / "edited" / "evaluate.jsonl", edited.header, edited.interactions,
                   edited.outcomes, edited.tool_calls)
    broken = folder / "zz_broken" / "evaluate.jsonl"
    broken.parent.mkdir()
    broken.write_text(SHIPPED[0].read_text().splitlines()[0] + "\n{not json\n")
    return folder


def _table(text: str) -> list[list[str]]:
    rows = [line.split() for line in text.splitlines() if re.match(r"\S+\.jsonl\s", line)]
    return [[r[0], r[1], r[-1]] for r in rows]  # cassette, mode, status


@pytest.mark.slow
def test_parallel_replay_gives_the_sequential_verdicts_in_one_table(tmp_path, monkeypatch,
                                                                     capsys) -> None:
    folder = _folder(tmp_path)
    monkeypatch.chdir(tmp_path)
    code = main(["replay", str(folder), "-j", "2", "--out", str(tmp_path / "par")])
    out, err = capsys.readouterr()
    assert code == 1
    names = [str(folder / c.parent.name / "evaluate.jsonl") for c in SHIPPED]
    expected = sorted([*[[n, "evaluate", "ok"] for n in names],
                       [str(folder / "edited" / "evaluate.jsonl"), "evaluate", "MISS"],
                       [str(folder / "zz_broken" / "evaluate.jsonl"), "?", "ERROR"]])
    assert _table(out) == expected  # every cassette once, in the folder's order
    assert "in 2 processes" in err
    assert "(edited)" in err  # the miss's diff, from the worker that replayed it
    assert "zz_broken/evaluate.jsonl:2" in err  # the bad line, named
    for name in names:
        rel = Path(name).relative_to(folder).parent
        assert (tmp_path / "par" / rel / "evaluate" / "result.json").is_file()

    code = main(["replay", str(folder), "-j", "1", "--out", str(tmp_path / "seq")])
    seq_out, _ = capsys.readouterr()
    assert code == 1 and _table(seq_out) == _table(out)
    mean = re.compile(r"(\S+\.jsonl)\s+evaluate\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\S+)")
    assert mean.findall(seq_out) == mean.findall(out)  # rollouts, turns, misses, rewards


def test_a_job_count_below_one_is_a_usage_error(tmp_path, capsys) -> None:
    assert main(["replay", str(tmp_path), "-j", "0"]) == 2
    assert "-j" in capsys.readouterr().err


def test_on_a_terminal_a_bar_counts_the_cassettes_and_the_summaries_stay_plain(
        tmp_path, monkeypatch, capsys) -> None:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'user-project'\n")
    (tmp_path / "environments").mkdir()
    folder = tmp_path / "cassettes"
    for cassette in SHIPPED[:2]:
        (folder / cassette.parent.name).mkdir(parents=True)
        shutil.copy(cassette, folder / cassette.parent.name / "evaluate.jsonl")
        shutil.copy(ROOT / "environments" / f"{cassette.parent.name}.py",
                    tmp_path / "environments" / f"{cassette.parent.name}.py")
    trust(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.stderr.isatty", lambda: True, raising=False)  # stderr: a terminal
    assert main(["replay", str(folder), "-j", "2", "--out", str(tmp_path / "o")]) == 0
    out, err = capsys.readouterr()
    screen = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", err)
    assert "2/2 cassettes" in screen and "━" in screen  # rich's bar, on stderr
    assert "\x1b[" not in out  # stdout is no terminal: summaries and table in plain text
    assert [row[2] for row in _table(out)] == ["ok", "ok"]
    assert out.count("hermes-replay replay · ") == 2

"""A cassette refused before it ran reads once (issue 47 item 7: the trust refusal was printed
twice — in full above the summary and again as its ``error:`` line), names no env log the env
never wrote, and the report line says nothing ran instead of proposing to record."""

from __future__ import annotations

import shutil
from pathlib import Path

from hermes_replay.cli import main

ROOT = Path(__file__).resolve().parents[2]


def test_a_refused_cassette_is_explained_once(tmp_path, monkeypatch, capsys):
    download = tmp_path / "download"  # a folder nobody trusted, holding a cassette
    (download / "cassettes" / "x").mkdir(parents=True)
    shutil.copy(ROOT / "cassettes" / "multi_signal_env" / "process.jsonl",
                download / "cassettes" / "x" / "process.jsonl")
    monkeypatch.chdir(download)
    out = tmp_path / "out"
    assert main(["replay", "cassettes", "-j", "1", "--out", str(out)]) == 1
    captured = capsys.readouterr()
    text = captured.out + captured.err
    refusal = "was not found in any folder you trust"
    assert text.count(refusal) == 1, text
    assert "  error: shown above" in captured.out
    assert "environment output:" not in text  # the env never ran: no log to look at
    assert "report: not written (no cassette ran)" in captured.out
    assert "record one with" not in text

"""A small ``.jsonl.zst`` that expands to gigabytes fails fast and small (issue 25, item 6).

The bomb is what the probe built: a 49 KB file that claims 1.5 GiB. Here it is the same zstd
frame of 16 MiB of short JSON lines repeated 96 times (concatenated frames are valid zstd), a
few dozen kilobytes on disk. ``load_cassette``, ``ls`` and ``verify`` must each stop with an
error naming the file, within a fraction of that memory, instead of expanding it all.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from hermes_replay import CassetteError, load_cassette
from hermes_replay._cassette import files as _files
from hermes_replay._cassette.verify import verify_paths
from hermes_replay.cli import main

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "cassettes" / "terminal_test_env" / "process.jsonl"


def _bomb(tmp_path: Path, frames: int = 96) -> Path:
    zstd = _files._zstd()
    header = SHIPPED.read_text(encoding="utf-8").split("\n", 1)[0] + "\n"
    filler = (json.dumps({"type": "note", "text": "x" * 4000}) + "\n").encode()
    block = zstd.compress(filler * ((16 << 20) // len(filler)), level=3)
    out = tmp_path / "cassettes" / "bomb" / "process.jsonl.zst"
    out.parent.mkdir(parents=True)
    out.write_bytes(zstd.compress(header.encode()) + block * frames)
    return out


def test_a_bomb_stops_early_in_load_ls_and_verify(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    bomb = _bomb(tmp_path)
    assert bomb.stat().st_size < 200_000  # it claims ~1.5 GiB
    # in a fresh interpreter, so its peak memory is the bomb's alone
    probe = ("import resource, sys, time\nfrom hermes_replay import CassetteError, "
             "load_cassette\nbase = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
             "t = time.process_time()\ntry:\n    load_cassette(sys.argv[1])\n"
             "except CassetteError as exc:\n    print(exc)\n"
             "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base, "
             "time.process_time() - t)\n")
    done = subprocess.run([sys.executable, "-c", probe, str(bomb)], capture_output=True,
                          text=True, timeout=120)
    *message, cost = done.stdout.strip().splitlines()
    grown_kib, cpu = cost.split()
    assert str(bomb) in message[0] and "decompresses to more than" in message[0], done
    assert int(grown_kib) < 400 * 1024, f"reading the bomb took {int(grown_kib) >> 10} MiB"
    assert float(cpu) < 20
    with pytest.raises(CassetteError, match="do not use it"):
        load_cassette(bomb)
    capsys.readouterr()
    assert main(["ls", str(bomb.parent)]) == 1
    assert "decompresses to more than" in capsys.readouterr().err
    _, findings = verify_paths([bomb])
    assert [f.kind for f in findings] == ["integrity"]
    assert "decompresses to more than" in findings[0].message


def test_one_overlong_line_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    zstd = _files._zstd()
    header = SHIPPED.read_text(encoding="utf-8").split("\n", 1)[0]
    text = header + "\n" + json.dumps({"type": "note", "text": "y" * 3_000_000}) + "\n"
    for name, data in (("long.jsonl.zst", zstd.compress(text.encode())),
                       ("long.jsonl", text.encode())):
        path = tmp_path / name
        path.write_bytes(data)
        monkeypatch.setattr(_files, "MAX_LINE_BYTES", 1 << 20)
        with pytest.raises(CassetteError, match="line 2 is longer than 1 MiB") as caught:
            load_cassette(path)
        assert caught.value.line == 2
        _, findings = verify_paths([path])
        assert findings and findings[0].line == 2 and "longer than" in findings[0].message


def test_lines_split_across_chunks_and_frames_read_back_whole(tmp_path: Path) -> None:
    zstd = _files._zstd()
    lines = [json.dumps({"n": i, "pad": "z" * (i * 7919 % 300_000)}) for i in range(40)]
    data = ("\n".join(lines) + "\n").encode()
    third = len(data) // 3
    path = tmp_path / "frames.jsonl.zst"  # three frames, cut mid-line
    path.write_bytes(b"".join(zstd.compress(part) for part in
                              (data[:third], data[third:2 * third], data[2 * third:])))
    assert _files.read_lines(path) == data.split(b"\n")
    assert _files.read_bytes(path) == data


def test_a_huge_plain_cassette_is_refused_before_it_is_read(tmp_path: Path) -> None:
    """Trust round 5, finding 07: a 3 GB ``.jsonl`` (sparse: 4 KB on disk) was read whole
    before any limit — a ``MemoryError`` traceback in ``verify``, ``ls``, ``show`` and
    ``replay``, where the same bytes as ``.zst`` stop cleanly at 1 GiB. Run in a child held to
    2 GiB of address space, so the code before the fix fails fast instead of eating memory."""
    folder = tmp_path / "cassettes"
    folder.mkdir()
    huge = folder / "process.jsonl"
    huge.write_text(SHIPPED.read_text(encoding="utf-8").split("\n", 1)[0] + "\n")
    with huge.open("r+b") as fh:
        fh.truncate(3 << 30)
    script = (
        "import resource, sys\n"
        "resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))\n"
        "from hermes_replay.cli import main\n"
        "for argv in (['verify', 'cassettes/process.jsonl'], ['ls', 'cassettes'],\n"
        "             ['show', 'cassettes/process.jsonl'],\n"
        "             ['replay', 'cassettes/process.jsonl', '--no-report', '--out', 'o']):\n"
        "    print('exit', argv[0], main(argv), file=sys.stderr, flush=True)\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)
    err = done.stderr + done.stdout
    assert "Traceback" not in err and "MemoryError" not in err, err
    assert err.count("is 3,221,225,472 bytes long (the limit: 1024 MiB") >= 3, err
    for command, code in (("verify", 1), ("ls", 1), ("show", 2), ("replay", 1)):
        assert f"exit {command} {code}" in err, err

"""The recorded world's capture, store and restore on hostile trees and hostile records
(issue 44 item 2): scrubbed, bounded, links never followed out, FIFOs never opened, stored
once, and a manifest or blob from a cassette never writes outside the sandbox."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from hermes_replay._world import (
    BlobStore,
    Workspace,
    WorkspaceError,
    capture_workspace,
    restore_workspace,
)

KEY = "sk-proj-" + "Ab3dE5gH7jK9mN1pQ3sT5vX7zB9dF1hJ3lN5pR7t"


def test_a_key_shaped_file_is_scrubbed_before_it_is_stored(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / ".env").write_text(f"OPENAI_API_KEY={KEY}\n")
    (work / "bin.dat").write_bytes(b"\xff\xfe" + KEY.encode() + b"\x00")
    store = BlobStore(tmp_path / "store")
    ws = capture_workspace(work, store)
    assert {f["path"] for f in ws.files} == {".env", "bin.dat"}
    for blob in (tmp_path / "store").rglob("*"):
        if blob.is_file():
            assert KEY.encode() not in blob.read_bytes()
            assert KEY[8:30].encode() not in blob.read_bytes()
    (work / f"{KEY}.txt").write_text("x")  # a secret in a name: neither name nor content
    ws = capture_workspace(work, store)
    assert all(KEY not in str(e) for e in ws.files + ws.omitted)
    assert any(e["reason"] == "its name holds a secret" for e in ws.omitted)


def test_a_50_mb_workspace_is_bounded_and_the_omission_listed(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    with open(work / "big.bin", "wb") as fh:
        fh.truncate(50 * 1024 * 1024)
    (work / "small.txt").write_text("kept")
    store = BlobStore(tmp_path / "store")
    ws = capture_workspace(work, store, limit=1024 * 1024)
    assert [f["path"] for f in ws.files] == ["small.txt"]
    assert ws.omitted == [{"path": "big.bin", "size": 50 * 1024 * 1024,
                           "reason": "over the workspace limit"}]
    stored = sum(p.stat().st_size for p in (tmp_path / "store").rglob("*") if p.is_file())
    assert stored == 4


def test_links_out_and_fifos_record_neither_target(tmp_path: Path) -> None:
    work = tmp_path / "work"
    (work / "sub").mkdir(parents=True)
    (work / "sub" / "a.txt").write_text("inside")
    os.symlink("/etc/passwd", work / "passwd")
    os.symlink("../../outside", work / "sub" / "up")
    os.symlink("a.txt", work / "sub" / "same")
    os.mkfifo(work / "pipe")  # opening it for reading would block: it must never be opened
    store = BlobStore(tmp_path / "store")
    ws = capture_workspace(work, store)
    record = str(ws.record())
    assert "/etc/passwd" not in record and "outside" not in record
    assert ws.links == [{"path": "sub/same", "target": "a.txt"}]
    reasons = {e["path"]: e["reason"] for e in ws.omitted}
    assert reasons == {"passwd": "a link that leaves the workspace (not followed)",
                       "sub/up": "a link that leaves the workspace (not followed)",
                       "pipe": "a FIFO"}
    passwd = Path("/etc/passwd").read_bytes()
    for blob in (tmp_path / "store").rglob("*"):
        if blob.is_file():
            assert blob.read_bytes() != passwd


def test_identical_files_of_many_rollouts_are_stored_once(tmp_path: Path) -> None:
    store = BlobStore(tmp_path / "store")
    for n in range(20):
        work = tmp_path / f"w{n}"
        work.mkdir()
        (work / "repo.py").write_text("print('same checkout')\n" * 100)
        (work / "answer.txt").write_text(str(n))
        capture_workspace(work, store)
    blobs = [p for p in (tmp_path / "store").rglob("*") if p.is_file()]
    assert len(blobs) == 21


def test_restore_round_trips_modes_links_and_folders(tmp_path: Path) -> None:
    work = tmp_path / "work"
    (work / "pkg" / "empty").mkdir(parents=True)
    (work / "pkg" / "run.sh").write_text("#!/bin/sh\necho hi\n")
    os.chmod(work / "pkg" / "run.sh", 0o755)
    os.symlink("run.sh", work / "pkg" / "alias")
    store = BlobStore(tmp_path / "store")
    ws = Workspace.parse(capture_workspace(work, store).record())
    target = tmp_path / "fresh"
    target.mkdir()
    assert restore_workspace(ws, store, target) == 1
    assert (target / "pkg" / "run.sh").read_text() == "#!/bin/sh\necho hi\n"
    assert os.stat(target / "pkg" / "run.sh").st_mode & 0o777 == 0o755
    assert os.readlink(target / "pkg" / "alias") == "run.sh"
    assert (target / "pkg" / "empty").is_dir()


@pytest.mark.parametrize("bad", [
    {"files": [{"path": "/etc/cron.d/x", "mode": 420, "size": 1, "sha256": "0" * 64}]},
    {"files": [{"path": "../escape", "mode": 420, "size": 1, "sha256": "0" * 64}]},
    {"files": [{"path": "a/../../escape", "mode": 420, "size": 1, "sha256": "0" * 64}]},
    {"links": [{"path": "l", "target": "/etc/passwd"}]},
    {"links": [{"path": "d/l", "target": "../../x"}]},
    {"files": [{"path": "a", "mode": 420, "size": 1, "sha256": "not-a-hash"}]},
    {"files": [{"path": "a", "mode": 420, "size": 1, "sha256": "0" * 64},
               {"path": "a", "mode": 420, "size": 1, "sha256": "0" * 64}]},
])
def test_a_hostile_manifest_is_refused(bad: dict) -> None:
    total = sum(f.get("size", 0) for f in bad.get("files", []))
    with pytest.raises(WorkspaceError):
        Workspace.parse({"v": 1, "limit": 100, "bytes": total, **bad})


def test_a_tampered_blob_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "answer.txt").write_text("59049\n")
    store = BlobStore(tmp_path / "store")
    ws = Workspace.parse(capture_workspace(work, store).record())
    sha = ws.files[0]["sha256"]
    store.path(sha).write_text("42\n\n\n")  # same size, other bytes
    assert hashlib.sha256(store.path(sha).read_bytes()).hexdigest() != sha
    target = tmp_path / "fresh"
    target.mkdir()
    with pytest.raises(WorkspaceError, match="does not match its hash"):
        restore_workspace(ws, store, target)
    assert not (target / "answer.txt").exists()
    store.path(sha).unlink()
    with pytest.raises(WorkspaceError, match="missing"):
        restore_workspace(ws, store, target)


def test_rollouts_over_one_checkout_share_its_folder_listings(tmp_path: Path) -> None:
    from hermes_replay._world.rescore import load_workspace
    from hermes_replay._world.trees import store_tree

    store = BlobStore(tmp_path / "store")
    records = []
    for n in range(3):
        work = tmp_path / f"w{n}"
        (work / "src" / "pkg").mkdir(parents=True)
        (work / "src" / "pkg" / "mod.py").write_text("x = 1\n")
        (work / "answer.txt").write_text(str(n))
        ws = capture_workspace(work, store)
        records.append((ws, store_tree(ws, store)))
    blobs_before = {p.name for p in (tmp_path / "store").rglob("*") if p.is_file()}
    # one content blob per answer, one for mod.py, two listings shared (src, src/pkg), and a
    # root listing per rollout
    assert len(blobs_before) == 3 + 1 + 2 + 3
    for ws, record in records:
        assert set(record) == {"v", "tree", "limit", "bytes", "files", "omitted"}
        back = load_workspace(record, store)
        assert sorted(map(str, back.files)) == sorted(map(str, ws.files))
        assert sorted(map(str, back.dirs)) == sorted(map(str, ws.dirs))


def test_a_hostile_tree_is_refused(tmp_path: Path) -> None:
    import json

    from hermes_replay._world.rescore import load_workspace
    from hermes_replay._world.trees import MAX_ENTRIES

    store = BlobStore(tmp_path / "store")

    def put(listing: dict) -> str:
        return store.put(json.dumps(listing).encode())

    empty = {"files": [], "links": [], "dirs": []}
    bad_name = put({**empty, "files": [["../up", 420, 0, "0" * 64]]})
    with pytest.raises(WorkspaceError, match="bad name"):
        load_workspace({"v": 2, "tree": bad_name}, store)
    # shared sub-trees describing 2**20 folders: refused at the bound, not expanded
    sha = put(empty)
    for level in range(20):
        sha = put({**empty, "dirs": [[f"a{level}", 493, sha], [f"b{level}", 493, sha]]})
    with pytest.raises(WorkspaceError, match=f"more than {MAX_ENTRIES}"):
        load_workspace({"v": 2, "tree": sha}, store)
    with pytest.raises(WorkspaceError, match="missing"):
        load_workspace({"v": 2, "tree": "f" * 64}, store)


def test_verify_scans_the_workspace_store_beside_the_cassettes(tmp_path: Path, capsys) -> None:
    """A blob edited after recording (or written by another tool) holds a key: verify says
    so, naming the blob, as it would for a cassette line."""
    import shutil

    from hermes_replay.cli import main

    root = Path(__file__).resolve().parents[2] / "cassettes"
    shutil.copytree(root / "terminal_test_env", tmp_path / "cassettes" / "terminal_test_env")
    shutil.copytree(root / ".workspaces", tmp_path / "cassettes" / ".workspaces")
    assert main(["verify", str(tmp_path / "cassettes")]) == 0
    blob = sorted(p for p in (tmp_path / "cassettes" / ".workspaces").rglob("*") if p.is_file())[0]
    with open(blob, "a") as fh:
        fh.write(f"\nOPENAI_API_KEY={KEY}\n")
    capsys.readouterr()
    assert main(["verify", str(tmp_path / "cassettes")]) == 1
    out = capsys.readouterr().out
    assert f"{blob}: secret: openai key" in out and KEY not in out

"""scripts/test, the README's test command: what a fresh machine lacks is installed, or named.

The script runs for real (bash) with ``--system-only``, on a PATH made for each case: the
tools it may call are stubs that log their argv (``apt-get``, ``sudo``, ``id``), and ``bwrap``,
``chromium`` or a working ``python3 -c 'import ensurepip'`` are there or not. Nothing is
installed on this machine. The full run (venv, uv, pytest) is proved in a namespace where the
packages are really absent (benchmarks/fresh_machine.sh; its output in docs/performance.md).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "test"
LOG_STUB = '#!/bin/sh\necho "$(basename "$0") $*" >> "$STUB_LOG"\n'


def _stub(folder: Path, name: str, body: str) -> None:
    path = folder / name
    path.write_text(body, encoding="utf-8")
    path.chmod(0o755)


def _machine(tmp_path: Path, *, have: tuple[str, ...], uid: int = 0, apt: bool = True,
             sudo: bool = True, ensurepip: bool = True) -> dict[str, str]:
    """A PATH holding the script's own needs plus exactly the tools this case has."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("bash", "dirname", "env", "basename"):
        found = shutil.which(tool)
        assert found, tool
        (bin_dir / tool).symlink_to(found)
    _stub(bin_dir, "id", f"#!/bin/sh\necho {uid}\n")
    _stub(bin_dir, "python3", f"#!/bin/sh\nexit {0 if ensurepip else 1}\n")
    for tool in have:
        _stub(bin_dir, tool, "#!/bin/sh\nexit 0\n")
    if apt:
        _stub(bin_dir, "apt-get", LOG_STUB)
    if sudo:
        _stub(bin_dir, "sudo", LOG_STUB + '"$@"\n')
    return {"PATH": str(bin_dir), "STUB_LOG": str(tmp_path / "calls.log"), "HOME": str(tmp_path)}


def _run(env: dict[str, str]) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    done = subprocess.run([env["PATH"] + "/bash", str(SCRIPT), "--system-only"], env=env,
                          capture_output=True, text=True, timeout=60)
    log = Path(env["STUB_LOG"])
    return done, log.read_text(encoding="utf-8").splitlines() if log.exists() else []


def test_a_machine_without_bwrap_and_chromium_gets_both_from_apt(tmp_path: Path) -> None:
    done, calls = _run(_machine(tmp_path, have=()))
    assert done.returncode == 0, done.stderr
    assert calls == ["apt-get update -q", "apt-get install -y -q bubblewrap chromium"]
    assert "bubblewrap chromium" in done.stdout


def test_a_machine_that_has_them_installs_nothing(tmp_path: Path) -> None:
    done, calls = _run(_machine(tmp_path, have=("bwrap", "chromium")))
    assert (done.returncode, calls) == (0, [])


def test_debians_chromium_browser_name_counts_and_python3_venv_is_added_when_missing(
        tmp_path: Path) -> None:
    done, calls = _run(_machine(tmp_path, have=("bwrap", "chromium-browser"), ensurepip=False))
    assert done.returncode == 0, done.stderr
    assert calls[-1] == "apt-get install -y -q python3-venv"


def test_a_user_goes_through_sudo(tmp_path: Path) -> None:
    done, calls = _run(_machine(tmp_path, have=("chromium",), uid=1000))
    assert done.returncode == 0, done.stderr
    assert calls[0] == "sudo apt-get update -q"
    assert "sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q bubblewrap" in calls


@pytest.mark.parametrize("case", ["no sudo", "no apt"])
def test_what_cannot_be_installed_is_named_with_the_next_step(tmp_path: Path, case: str) -> None:
    env = (_machine(tmp_path, have=("chromium",), uid=1000, sudo=False) if case == "no sudo"
           else _machine(tmp_path, have=(), apt=False))
    done, calls = _run(env)
    assert done.returncode == 1 and calls == []
    assert "bubblewrap" in done.stderr and "then run scripts/test again" in done.stderr

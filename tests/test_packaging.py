"""Installed as a wheel, the distribution never shadows the user's code (issue 35, item 3).

Users install hermes-replay into the venv of their Atropos checkout. The wheel used to put a
regular top-level package ``environments`` into site-packages, and then ``python -m
environments.community.x.y`` in the checkout failed ``No module named
'environments.community'``: a regular package anywhere on the path beats a namespace portion.
The layer is now a namespace portion itself. This builds the real wheel from a copy of the
sources (offline: ``--no-build-isolation``), installs it with ``--no-deps`` into a fresh venv
whose dependencies come from this venv (a ``.pth`` line, so nothing is downloaded), and runs
Python there the ways a user does.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHECKOUT = ROOT / "tests" / "plain_envs" / "namespace_checkout"
# one worker runs the module: its venv with the built wheel is made once, not per worker
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("test_packaging")]


def _run(argv: list[str], cwd: Path, timeout: int = 300) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV") and not k.startswith("PYTEST_")}
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("wheel")
    src = work / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    for package in ("hermes_replay", "environments"):
        shutil.copytree(ROOT / package, src / package,
                        ignore=shutil.ignore_patterns("__pycache__"))
    built = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                  "--no-index", "-w", str(work / "dist"), str(src)], work)
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    wheel = next((work / "dist").glob("hermes_replay-*.whl"))
    made = _run([sys.executable, "-m", "venv", str(work / "venv")], work)
    assert made.returncode == 0, made.stderr
    python = work / "venv" / "bin" / "python"
    installed = _run([str(python), "-m", "pip", "install", "--no-deps", "--no-index",
                      str(wheel)], work)
    assert installed.returncode == 0, installed.stdout[-2000:] + installed.stderr[-2000:]
    site = Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()"
                      "['purelib'])"], work).stdout.strip())
    # the dependencies (atroposlib, openai …) from this venv, after the wheel's own files
    (site / "zz_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n",
                                              encoding="utf-8")
    assert not (site / "environments" / "__init__.py").exists(), \
        "the wheel ships environments/ as a regular package: it would shadow a checkout's"
    return python


def test_the_layer_imports_from_the_wheel_anywhere(venv: Path, tmp_path: Path) -> None:
    probe = ("from environments.agent_loop import HermesAgentLoop; "
             "from environments.tool_call_parsers.hermes_parser import HermesToolCallParser; "
             "import environments.hermes_base_env as b; print(b.__file__)")
    done = _run([str(venv), "-c", probe], tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert Path(done.stdout.strip()).is_relative_to(venv.parents[1])
    cli = _run([str(venv.parent / "hermes-replay"), "--help"], tmp_path)
    assert cli.returncode == 0 and "record" in cli.stdout, cli.stderr[-2000:]


def test_an_atropos_checkout_runs_its_community_modules_beside_the_wheel(
        venv: Path, tmp_path: Path) -> None:
    checkout = tmp_path / "atropos"
    shutil.copytree(CHECKOUT, checkout, ignore=shutil.ignore_patterns("__pycache__"))
    ran = _run([str(venv), "-m", "environments.community.word_sums.scoring"], checkout)
    assert ran.returncode == 0, ran.stderr[-2000:]
    both = ("import environments.community.word_sums.scoring as s, "
            "environments.agent_loop as a; print(s.__file__); print(a.__file__)")
    done = _run([str(venv), "-c", both], checkout)
    assert done.returncode == 0, done.stderr[-2000:]
    mine, layer = map(Path, done.stdout.split())
    assert mine.is_relative_to(checkout) and layer.is_relative_to(venv.parents[1])


def test_a_users_own_environments_package_wins_and_the_layer_stays_reachable(
        venv: Path, tmp_path: Path) -> None:
    project = tmp_path / "mine"
    (project / "environments").mkdir(parents=True)
    (project / "environments" / "__init__.py").write_text("OWNER = 'user'\n", encoding="utf-8")
    (project / "environments" / "my_env.py").write_text("VALUE = 42\n", encoding="utf-8")
    own = _run([str(venv), "-c", "import environments, environments.my_env as m; "
                "print(environments.OWNER, m.VALUE)"], project)
    assert own.returncode == 0 and own.stdout.split() == ["user", "42"], own.stderr[-2000:]
    # a former-layer file in that project, run by the harness (which is imported first)
    former = ("import hermes_replay; import environments.my_env; "
              "from environments.agent_loop import AgentResult, ToolError; "
              "from environments.tool_call_parsers import get_parser; "
              "print(environments.OWNER, get_parser('hermes').__class__.__name__)")
    done = _run([str(venv), "-c", former], project)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["user", "HermesToolCallParser"]

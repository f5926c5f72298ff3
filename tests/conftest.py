"""Suite-wide settings: everything offline, nothing reaches a hub or wandb."""

import os

# Set before any test module imports transformers / datasets / wandb.
for _key, _value in {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "WANDB_MODE": "disabled",
    "WANDB_SILENT": "true",
    "TOKENIZERS_PARALLELISM": "false",
}.items():
    os.environ.setdefault(_key, _value)

# pytester runs real pytest sessions for the plugin's own tests.
# _xdist_groups: each xdist_group on one worker (see that module).
pytest_plugins = ["pytester", "_xdist_groups"]

# Bytecode for the fresh interpreters the suite starts. With PYTHONDONTWRITEBYTECODE set (as
# on these machines, and in many Docker images) nothing writes bytecode for hermes_replay and
# environments (site-packages got theirs from pip), so each of the ~200 fresh interpreters
# the suite starts (check, --twice, record subprocesses, benchmarks, sub-sessions) compiled
# them from source again: about 0.5 s of CPU each. For this run only, bytecode goes to a cache
# folder of its own (PYTHONPYCACHEPREFIX), never into the checkout; the first process to start
# sets it up, every later one (xdist workers, subprocesses) inherits it.
_PYCACHE_OWNER = False
if os.environ.get("PYTHONDONTWRITEBYTECODE") and not os.environ.get("PYTHONPYCACHEPREFIX"):
    import tempfile

    os.environ["PYTHONPYCACHEPREFIX"] = tempfile.mkdtemp(prefix="hermes-replay-pycache-")
    del os.environ["PYTHONDONTWRITEBYTECODE"]
    _PYCACHE_OWNER = True


import pytest  # noqa: E402


@pytest.fixture(scope="session", autouse=True)
def _env_logs_in_the_session_folder(tmp_path_factory: pytest.TempPathFactory):
    """The env logs of record/passthrough runs go under this session's temp folder, not the
    machine's /tmp (subprocesses inherit the variable)."""
    os.environ["HERMES_REPLAY_LOG_DIR"] = str(tmp_path_factory.mktemp("env-logs"))
    yield
    os.environ.pop("HERMES_REPLAY_LOG_DIR", None)


@pytest.fixture(scope="session", autouse=True)
def _trust_list_in_the_session_folder(tmp_path_factory: pytest.TempPathFactory):
    """The folders this session trusts (recordings add theirs) are kept under its own temp
    folder: never the machine's ~/.config, so what lies in $HOME changes nothing, and a test's
    project is trusted only by what the test itself does (subprocesses inherit the variable)."""
    os.environ["HERMES_REPLAY_HOME"] = str(tmp_path_factory.mktemp("hermes-home"))
    os.environ.pop("HERMES_REPLAY_TRUST", None)
    yield
    os.environ.pop("HERMES_REPLAY_HOME", None)


def trust(folder) -> None:
    """Trust ``folder`` as a user would with ``hermes-replay trust`` (tests whose project was
    copied, not recorded, in place)."""
    from hermes_replay._runner.trust import add_trusted

    add_trusted(folder)


@pytest.fixture(scope="session")
def _calc_recording(tmp_path_factory: pytest.TempPathFactory):
    from _calc_project import record_project

    return record_project(tmp_path_factory.mktemp("calc-recorded"))


@pytest.fixture
def calc_project(_calc_recording, tmp_path, monkeypatch):
    """A fresh copy of a project holding ``calc_tool_env`` (a user env with its own tool) and
    its recorded process cassette (4 rollouts); the working directory is its root. Tools the
    env registers are dropped afterwards, so other tests see the built-in toolsets only."""
    from _calc_project import copy_project

    from environments.tools import registry

    # the env registers its tool in the process-wide registry: gone again after the test
    monkeypatch.setattr(registry, "_TOOLS", dict(registry._TOOLS))
    monkeypatch.setattr(registry, "_TASK_CLEANUPS", list(registry._TASK_CLEANUPS))
    monkeypatch.delenv("CALC_ENV_LEAK", raising=False)
    root = copy_project(_calc_recording, tmp_path / "project")
    trust(root)  # a copy of the recorded project: the user's own, trusted as after `trust`
    monkeypatch.chdir(root)
    return root


def pytest_unconfigure(config: pytest.Config) -> None:
    if _PYCACHE_OWNER and not hasattr(config, "workerinput"):
        import shutil

        shutil.rmtree(os.environ.pop("PYTHONPYCACHEPREFIX"), ignore_errors=True)

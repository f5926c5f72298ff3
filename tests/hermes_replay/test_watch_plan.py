"""What a save makes ``hermes-replay watch`` replay (``_corpus.watch_plan``): the cassettes whose
last run imported the saved file, a cassette's own file, every cassette not run yet; what it
watches (never a virtual environment's folders); how a syntax error is shown."""

from __future__ import annotations

import shutil
from pathlib import Path

from conftest import trust

from hermes_replay._corpus.watch_plan import WatchPlan, syntax_error, watched_dirs

SHIPPED = Path(__file__).resolve().parents[2] / "cassettes"


def _project(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text("")
    trust(tmp_path)  # the user's project (copied here, not recorded here)
    for env in ("multi_signal_env", "terminal_test_env"):
        (tmp_path / "cassettes" / env).mkdir(parents=True)
        shutil.copy(SHIPPED / env / "process.jsonl", tmp_path / "cassettes" / env)
    (tmp_path / "environments").mkdir()
    return tmp_path


def test_a_save_replays_the_cassettes_whose_run_imported_it(tmp_path: Path) -> None:
    root = _project(tmp_path)
    plan = WatchPlan.from_target(root / "cassettes")
    multi, term = sorted(plan.cassettes)
    helper, other = root / "environments" / "helper.py", root / "environments" / "other.py"
    assert plan.affected([helper]) == plan.cassettes  # nothing ran yet: deps unknown
    plan.ran(multi, [str(helper)])
    plan.ran(term, [str(other)])
    assert plan.affected([helper]) == [multi]
    assert plan.affected([other]) == [term]
    assert plan.affected([root / "environments" / "unused.py"]) == []
    assert plan.affected([term]) == [term]  # a cassette's own file
    assert plan.affected([], removed=[helper]) == [multi]


def test_an_env_file_names_its_own_cassettes(tmp_path: Path) -> None:
    root = _project(tmp_path)
    env = root / "environments" / "terminal_test_env.py"
    env.write_text("from atroposlib.envs.base import BaseEnv\nclass E(BaseEnv):\n    pass\n")
    trust(root)  # again, with its env file (trust vouches for what the folder holds)
    plan = WatchPlan.from_target(env)
    assert [c.parent.name for c in plan.cassettes] == ["terminal_test_env"]


def test_a_virtual_environment_and_outputs_are_not_watched(tmp_path: Path) -> None:
    root = _project(tmp_path)
    (root / ".venv" / "lib").mkdir(parents=True)
    (root / "venv2" / "lib").mkdir(parents=True)
    (root / "venv2" / "pyvenv.cfg").write_text("")
    (root / "out" / "x").mkdir(parents=True)
    dirs = {d.relative_to(root).as_posix() for d in watched_dirs(root, skip=[root / "out"])}
    assert dirs == {".", "cassettes", "cassettes/multi_signal_env",
                    "cassettes/terminal_test_env", "environments"}


def test_a_syntax_error_names_file_line_and_column(tmp_path: Path) -> None:
    broken = tmp_path / "env.py"
    broken.write_text("def f():\n    return min(1, 2 +)\n")
    message = syntax_error(broken)
    assert message is not None
    first, code, caret = message.splitlines()
    assert first.startswith(f"{broken}:2:") and "SyntaxError" in first, message
    assert code.strip() == "return min(1, 2 +)"
    assert caret.index("^") - 4 == code.strip().index(")")
    broken.write_text("def f():\n    return 1\n")
    assert syntax_error(broken) is None


def test_a_saves_cassettes_are_handed_out_heaviest_first(tmp_path: Path) -> None:
    """Workers take the next cassette as they free up, so the save waits for the last one:
    the costly ones go first (last run's CPU; never run yet: first, biggest file first)."""
    from hermes_replay._corpus.watch import heaviest_first

    files = {}
    for name, size in (("a", 10), ("b", 300), ("c", 20), ("new-small", 5), ("new-big", 900)):
        files[name] = tmp_path / f"{name}.jsonl"
        files[name].write_bytes(b"x" * size)
    costs = {files["a"]: 0.4, files["b"]: 0.1, files["c"]: 0.9}
    order = heaviest_first([files[n] for n in ("a", "b", "c", "new-small", "new-big")], costs)
    assert [p.stem for p in order] == ["new-big", "new-small", "c", "a", "b"]
    assert heaviest_first([], costs) == []

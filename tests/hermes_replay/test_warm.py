"""The warm process (``hermes_replay._runner.warm``): every run a fresh fork, the user's modules
imported fresh in each, what a run imported from libraries learned for the next one, and a
run that dies or raises reported, never lost. Small preloads (no atroposlib): what is tested is
the forking, not the stack."""

from __future__ import annotations

import importlib
import os
import sys
import time
from pathlib import Path

import pytest
from _proc_table import alive

from hermes_replay._runner.warm import WarmProcess


def bump_user_module(folder: str) -> tuple[bool, int]:
    """Imports ``user_mod`` from ``folder`` and adds to its module-level list."""
    was_loaded = "user_mod" in sys.modules
    sys.path.insert(0, folder)
    module = importlib.import_module("user_mod")
    module.SEEN.append(1)
    return was_loaded, len(module.SEEN) + module.BASE


def import_colorsys() -> bool:
    was_loaded = "colorsys" in sys.modules
    import colorsys  # noqa: F401  (any library module: the run only has to import one)

    return was_loaded


def import_library(name: str) -> bool:
    """Imports library module ``name``; whether it was loaded before."""
    was_loaded = name in sys.modules
    importlib.import_module(name)
    return was_loaded


def _library_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A library module (on sys.path, outside the user's roots) nothing can have imported
    before: a stdlib one (it was colorsys) is imported by whatever else ran in the worker's
    interpreter or the warm process's start, so "not yet loaded" was not the test's to
    decide — that made the test fail after some others."""
    import uuid

    name = f"probe_library_{uuid.uuid4().hex}"
    site = tmp_path / "site-library"
    site.mkdir()
    (site / f"{name}.py").write_text("VALUE = 1\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(site))  # the warm process starts with this sys.path
    return name


def unjudged_modules(roots: list[str]) -> list[str]:
    """The modules a fresh child would still have to resolve to tell the user's apart."""
    from hermes_replay._runner import warm

    key = tuple(Path(r) for r in roots)
    return [name for name, m in list(sys.modules.items())
            if getattr(m, "__file__", None) and (m.__file__, key) not in warm._USERS]


def die(code: int) -> None:
    os._exit(code)


def fail() -> None:
    raise ValueError("the reward raised on purpose")


def _run(warm: WarmProcess, func, *args):
    [done] = list(warm.run([("k", func, args)]))
    return done


def test_each_run_is_a_fresh_fork_with_the_users_modules_read_from_disk(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    module = tmp_path / "user_mod.py"
    module.write_text("SEEN = []\nBASE = 0\n")
    monkeypatch.syspath_prepend(str(tmp_path))  # the warm process could import it: it must not
    with WarmProcess(["json"], user_roots=[tmp_path]) as warm:
        first = _run(warm, bump_user_module, str(tmp_path))
        second = _run(warm, bump_user_module, str(tmp_path))
        module.write_text("SEEN = []\nBASE = 10\n")
        third = _run(warm, bump_user_module, str(tmp_path))
    # never preloaded, never learned; the list another run grew is not seen; the edit is
    assert first.value == (False, 1), first
    assert second.value == (False, 1), second
    assert third.value == (False, 11), third


def test_library_modules_a_run_imported_are_warm_for_the_next(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    name = _library_module(tmp_path, monkeypatch)
    project = tmp_path / "project"
    project.mkdir()
    with WarmProcess(["json"], user_roots=[project]) as warm:
        first = _run(warm, import_library, name)
        second = _run(warm, import_library, name)
    assert (first.value, second.value) == (False, True)
    assert first.cpu > 0 and first.seconds > 0


def test_a_run_that_dies_or_raises_is_reported(tmp_path: Path) -> None:
    with WarmProcess(["json"], user_roots=[tmp_path]) as warm:
        died = _run(warm, die, 3)
        raised = _run(warm, fail)
        after = _run(warm, import_colorsys)  # the warm process itself is unharmed
        pid = warm.pid
    assert died.error is not None and "exit code 3" in died.error, died
    assert raised.error is not None and "ValueError: the reward raised on purpose" in raised.error
    assert after.error is None
    assert pid is not None and not Path(f"/proc/{pid}").exists(), "close() left it running"


def test_runs_go_in_parallel_and_each_reports_under_its_key(tmp_path: Path) -> None:
    with WarmProcess(["json"], user_roots=[tmp_path]) as warm:
        done = list(warm.run([(n, die, (n,)) for n in (4, 5, 6)], parallel=2))
    assert sorted(d.key for d in done) == [4, 5, 6]
    assert all(f"exit code {d.key}" in (d.error or "") for d in done), done


def test_a_child_finds_which_modules_are_the_users_already_judged(tmp_path: Path) -> None:
    """Resolving every imported module's path (about 2,000 with atroposlib's stack) was a
    fifth of a forked run's CPU: the warm process judges its modules before it forks."""
    root = tmp_path.resolve()
    with WarmProcess(["json", "email.parser"], user_roots=[root]) as warm:
        done = _run(warm, unjudged_modules, [str(root)])
    assert done.error is None, done.error
    assert done.value == [], done.value


# -- batches: a save's runs share a few workers, each job as a fresh fork would see it ------


def pid_and_user_module(folder: str) -> tuple[int, tuple[bool, int]]:
    return os.getpid(), bump_user_module(folder)


def spin(seconds: float) -> int:
    """Burns ``seconds`` of CPU (not wall: a loaded machine cannot shorten the work)."""
    import time

    end = time.process_time() + seconds
    while time.process_time() < end:
        pass
    return os.getpid()


def note_package_file(path: str) -> list[str]:
    """A package env's run forgets its modules after it (``envrun.FORGOTTEN_FILES``); what
    this job depended on is what ``user_module_files`` reports."""
    from hermes_replay._runner import envrun
    from hermes_replay._runner.warm import user_module_files

    envrun.FORGOTTEN_FILES.add(path)
    return user_module_files([Path(path).parent])


def package_files(root: str) -> list[str]:
    from hermes_replay._runner.warm import user_module_files

    return user_module_files([Path(root)])


def test_a_batch_shares_its_workers_and_each_job_imports_the_users_modules_anew(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Forking once per job paid the fork's first-run cost (pages copied, libraries set up:
    about 0.1 s of CPU for a shipped cassette) per cassette; a batch pays it per worker."""
    (tmp_path / "user_mod.py").write_text("SEEN = []\nBASE = 0\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with WarmProcess(["json"], user_roots=[tmp_path]) as warm:
        done = list(warm.run([(n, pid_and_user_module, (str(tmp_path),)) for n in range(6)],
                             parallel=2))
    assert sorted(d.key for d in done) == list(range(6))
    assert all(d.error is None for d in done), done
    pids = {d.value[0] for d in done}
    assert 1 <= len(pids) <= 2, pids  # two workers at most, not six forks
    # every job found the user's module unloaded and its list empty, as in a fresh fork
    assert [d.value[1] for d in done] == [(False, 1)] * 6


def test_a_job_reports_the_package_files_of_its_own_run_only(tmp_path: Path) -> None:
    root = tmp_path.resolve()
    first, second = root / "pkg" / "a.py", root / "pkg" / "b.py"
    with WarmProcess(["json"], user_roots=[root]) as warm:
        done = list(warm.run([(1, note_package_file, (str(first),)),
                              (2, package_files, (str(root),)),
                              (3, note_package_file, (str(second),))], parallel=1))
    by_key = {d.key: d for d in done}
    assert all(d.error is None for d in done), done
    assert by_key[1].value == [str(first)]
    assert by_key[2].value == []  # the earlier job's file is not this one's
    assert by_key[3].value == [str(second)]


def test_a_worker_that_dies_costs_only_its_job_and_the_batch_goes_on(tmp_path: Path) -> None:
    with WarmProcess(["json"], user_roots=[tmp_path]) as warm:
        done = list(warm.run([("a", spin, (0.0,)), ("dies", die, (3,)), ("b", spin, (0.0,)),
                              ("c", spin, (0.0,))], parallel=1))
    by_key = {d.key: d for d in done}
    assert sorted(by_key) == ["a", "b", "c", "dies"]
    assert "exit code 3" in (by_key["dies"].error or ""), by_key["dies"]
    assert by_key["dies"].status == 3
    assert all(by_key[k].error is None for k in "abc"), done
    # the job after the death ran in a new worker; the ones after it shared that one
    assert by_key["a"].value != by_key["b"].value == by_key["c"].value


def test_each_job_is_charged_its_own_cpu(tmp_path: Path) -> None:
    with WarmProcess(["json"], user_roots=[tmp_path]) as warm:
        done = {d.key: d for d in warm.run([("busy", spin, (0.3,)), ("idle", spin, (0.0,))],
                                           parallel=1)}
    assert done["busy"].value == done["idle"].value  # one worker ran both
    assert done["busy"].cpu >= 0.3, done["busy"]
    assert done["idle"].cpu < done["busy"].cpu / 2, done  # not the worker's total so far


# -- spares: workers forked after a batch warm up while the user edits ---------------------


def mark_warm(log: str, seconds: float) -> None:
    """A warm-up: leaves a mark in this process (never reaching the warm process) and a line
    in ``log``, and burns ``seconds`` of CPU that no job may be charged."""
    import json

    json.warmed_here = True  # type: ignore[attr-defined]
    with open(log, "a", encoding="utf-8") as f:
        f.write(f"{os.getpid()}\n")
    spin(seconds)


def failing_warm_up(log: str) -> None:
    with open(log, "a", encoding="utf-8") as f:
        f.write(f"{os.getpid()}\n")
    raise RuntimeError("the warm-up broke on purpose")


def warmed() -> tuple[int, bool]:
    import json

    return os.getpid(), getattr(json, "warmed_here", False)


def test_after_a_batch_spares_warm_up_and_take_the_next_batch(tmp_path: Path) -> None:
    log = tmp_path / "warm-ups.log"
    with WarmProcess(["json"], user_roots=[tmp_path],
                     warmup=(mark_warm, (str(log), 0.3))) as warm:
        first = list(warm.run([(n, warmed, ()) for n in range(2)], parallel=2))
        second = list(warm.run([(n, warmed, ()) for n in range(2)], parallel=2))
        third = list(warm.run([(0, warmed, ())], parallel=2))
    # the first batch has no spares yet (warming up first would only delay it)
    assert [d.value[1] for d in first] == [False, False], first
    # the second runs in the spares, never in a worker of the first
    assert [d.value[1] for d in second] == [True, True], second
    assert not {d.value[0] for d in first} & {d.value[0] for d in second}
    assert {d.value[0] for d in second} <= {int(p) for p in log.read_text().split()}
    # a job is charged its own CPU, never the warm-up's 0.3 s
    assert all(d.cpu < 0.15 for d in second), second
    # a spare left unused by a one-job batch is kept; the used one is replaced
    assert third[0].value[1] is True and third[0].value[0] not in {d.value[0] for d in second}


def test_a_failing_warm_up_is_said_once_and_the_runs_go_on(
        tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "warm-ups.log"
    with WarmProcess(["json"], user_roots=[tmp_path],
                     warmup=(failing_warm_up, (str(log),))) as warm:
        batches = [list(warm.run([(n, warmed, ()) for n in range(2)], parallel=2))
                   for _ in range(4)]
    assert all(d.error is None for batch in batches for d in batch), batches
    tried = log.read_text().split()
    # the spares forked after the first batch tried; the failure stopped any later warm-up
    assert 1 <= len(tried) <= 2, tried
    err = capfd.readouterr().err
    assert err.count("the workers' warm-up failed (RuntimeError: the warm-up broke on "
                     "purpose); runs go on without it") == 1, err


def test_watchs_warm_up_replays_the_packages_own_cassette_whole(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch
                                                                 ) -> None:
    """The warm-up a spare runs is a real replay (no miss, every recorded rollout) and leaves
    nothing behind: the working folder as it was, no output kept."""
    import json
    import tempfile

    from hermes_replay._corpus.watch_run import WARMUP_CASSETTE, warm_up

    recorded = set()
    with WARMUP_CASSETTE.open(encoding="utf-8") as f:
        for line in f:
            record = json.loads(line)
            if record.get("type") == "interaction":
                recorded.add(record["rollout"])
    assert len(recorded) >= 2, recorded  # a warm-up of nothing would warm nothing up
    # wandb makes two temporary folders when these modules are first imported (and removes
    # them at exit): theirs, not the warm-up's, so imported before the count starts
    import wandb.sdk.artifacts.artifact
    import wandb.sdk.data_types._private  # noqa: F401

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    assert warm_up() == sorted(recorded)
    assert Path.cwd() == tmp_path
    assert list((tmp_path / "tmp").iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tmp"]


def make_module_temp_folder(name: str) -> str:
    """What wandb does at import: a temporary folder held by a module, removed at exit."""
    import tempfile

    holder = tempfile.TemporaryDirectory(prefix=name)
    sys.modules[__name__].__dict__.setdefault("_HELD", []).append(holder)
    return holder.name


def test_a_worker_cleans_up_its_own_temporary_folders_never_the_warm_processes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "holds_a_folder.py").write_text(
        "import tempfile\nHELD = tempfile.TemporaryDirectory(prefix='warm-held-')\n")
    monkeypatch.syspath_prepend(str(site))
    with WarmProcess(["json", "holds_a_folder"], user_roots=[tmp_path / "project"]) as warm:
        [mine] = list(warm.run([("k", make_module_temp_folder, ("worker-held-",))]))
        [warms] = list(warm.run([("k", import_library, ("holds_a_folder",))]))
        [held_run] = list(warm.run([("k", _held_folder, ())]))
        held = held_run.value
        assert warms.value is True  # preloaded: the folder is the warm process's
        assert Path(held).is_dir(), "a worker removed the warm process's folder"
    assert mine.error is None and not Path(mine.value).exists(), mine
    assert not Path(held).exists()  # and the warm process's own exit removed its one


class _Holder:
    pass


def make_slowly_removed_folder(where: str) -> str:
    """A library's module-level temporary folder whose cleanup at exit takes a while (a big
    folder to remove)."""
    import shutil
    import tempfile
    import time
    import weakref

    path = tempfile.mkdtemp(prefix="worker-slow-", dir=where)
    holder = _Holder()
    sys.modules[__name__].__dict__.setdefault("_HELD", []).append(holder)

    def remove(folder: str = path) -> None:
        time.sleep(0.5)
        shutil.rmtree(folder, ignore_errors=True)

    weakref.finalize(holder, remove)
    return path


def test_a_watch_closed_right_after_a_save_lets_its_workers_clean_up(tmp_path: Path) -> None:
    """Ctrl-C just after a save's verdicts: the workers of that save are still exiting,
    removing what their runs left; ending them with a signal left it all in /tmp."""
    with WarmProcess(["json"], user_roots=[tmp_path / "project"]) as warm:
        [made] = list(warm.run([("k", make_slowly_removed_folder, (str(tmp_path),))]))
    assert made.error is None, made
    assert not Path(made.value).exists(), "the worker was stopped before its cleanup ran"


def _held_folder() -> str:
    import holds_a_folder  # type: ignore[import-not-found]

    return holds_a_folder.HELD.name


def dying_warm_up(seconds: float) -> None:
    """A spare killed while it warms up (the kernel's OOM killer, say), after a job was
    already handed to it."""
    import time

    time.sleep(seconds)
    os._exit(3)


def test_a_spare_that_dies_warming_up_costs_no_job(
        tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    with WarmProcess(["json"], user_roots=[tmp_path], warmup=(dying_warm_up, (0.5,))) as warm:
        first = list(warm.run([(n, warmed, ()) for n in range(2)], parallel=2))
        # handed to the two spares at once, while they still warm up; they die
        second = list(warm.run([(n, warmed, ()) for n in range(2)], parallel=2))
        third = list(warm.run([(n, warmed, ()) for n in range(2)], parallel=2))
    assert all(d.error is None for d in first + second + third), second
    assert sorted(d.key for d in second) == [0, 1]
    err = capfd.readouterr().err
    assert err.count("the workers' warm-up failed (the spare worker died (exit code 3)); "
                     "runs go on without it") == 1, err


def start_a_process_pool() -> list[int]:
    """What an env's ``setup`` may do (math_server_zero grades in one): a process pool of its
    own, used once and never shut down. Returns the pool's worker pids."""
    from concurrent.futures import ProcessPoolExecutor

    pool = ProcessPoolExecutor(max_workers=2)
    sys.modules[__name__].__dict__.setdefault("_HELD", []).append(pool)
    list(pool.map(abs, [-1, -2, -3]))
    return sorted(pool._processes)  # type: ignore[attr-defined]


def test_a_process_pool_a_run_left_ends_with_the_worker() -> None:
    with WarmProcess(["json"]) as warm:
        [run] = list(warm.run([("k", start_a_process_pool, ())]))
    assert run.error is None and len(run.value) == 2, run
    # A worker ends with os._exit: a pool's idle processes, blocked on a queue whose other end
    # they hold themselves, ran on for good with no parent (one more per save under watch).
    deadline = time.monotonic() + 10
    while any(alive(pid) for pid in run.value) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(alive(pid) for pid in run.value), run.value


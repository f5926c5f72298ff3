"""``replay DIR --executor ray`` on a real two-node Ray cluster (``ray start --head`` and a
second ``ray start --address``, on loopback, started once for this module — see
``_ray_cluster``): every cassette replayed exactly once, rows in the folder's order, a worker
that dies retried once on another worker (an ERROR row when it dies again), Ctrl-C cancels and
leaves the cluster's CPUs free, ``--ray-upload`` ships the project and brings the outputs back.

The cassettes are copies of the calc project's recording (made once per test session against
the scripted endpoint) at different paths; ``CALC_ENV_JOURNAL`` has the env note every run it
starts (its out folder and process id), which is how "exactly once" is counted, and
``CALC_ENV_DIE`` has it kill its own process — the worker — for chosen cassettes.
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from _ray_cluster import ADDRESS, RayCluster

HERMES = str(Path(sys.executable).parent / "hermes-replay")

# Ray clusters (this module's and the scale benchmark's local one) run one at a time on one
# xdist worker: two at once on a 2-core machine starve each other's raylets and workers
# (measured: this module took 445 s of a full suite beside the other, 107 s alone)
pytestmark = pytest.mark.xdist_group("ray")
ROWS = re.compile(r"^(corpus/\S+\.jsonl)\s.*\s(ok|ERROR|MISS|CHANGED)\s*$", re.M)


@pytest.fixture(scope="module")
def cluster():
    ray_cluster = RayCluster()
    try:
        yield ray_cluster.start()
    finally:
        ray_cluster.stop()


@pytest.fixture(scope="module")
def project(_calc_recording, tmp_path_factory) -> Path:
    """The calc project with 50 cassettes under corpus/ (run-00 … run-49): the run Ctrl-C
    interrupts; other tests replay subsets of it."""
    from _calc_project import CASSETTE_REL, copy_project

    root = copy_project(_calc_recording, tmp_path_factory.mktemp("ray") / "project")
    recorded = root / CASSETTE_REL
    for k in range(50):
        (root / "corpus" / f"run-{k:02d}").mkdir(parents=True)
        shutil.copy(recorded, root / "corpus" / f"run-{k:02d}" / "process.jsonl")
    return root


def _subset(project: Path, name: str, runs: range) -> Path:
    """A corpus folder of its own with the cassettes ``runs`` (paths as in corpus/)."""
    folder = project / name
    for k in runs:
        (folder / f"run-{k:02d}").mkdir(parents=True)
        shutil.copy(project / "corpus" / f"run-{k:02d}" / "process.jsonl",
                    folder / f"run-{k:02d}" / "process.jsonl")
    return folder


def _journal(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _replay(cluster, project: Path, corpus: str, out: Path, *extra: str, env=None):
    return cluster.run([HERMES, "replay", corpus, "--executor", "ray", "--ray-address",
                        ADDRESS, "--out", str(out), "--no-report", *extra],
                       cwd=project, env=env or {})


def test_a_corpus_on_two_nodes_each_cassette_replayed_exactly_once(cluster, project,
                                                                   tmp_path) -> None:
    # 16 cassettes: eight per actor through depth-1 queues, so each actor is handed task
    # after task as with 50, at a third of the time; order, exactly-once and both nodes are
    # what is proved, and none of them needs more
    count = 16
    corpus = _subset(project, "corpus-16", range(count))
    journal = tmp_path / "journal.jsonl"
    done = _replay(cluster, project, corpus.name, tmp_path / "out",
                   env={"CALC_ENV_JOURNAL": str(journal)})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert f"{count} cassettes on 2 Ray actors (shared filesystem)" in done.stderr
    rows = re.findall(r"^(corpus-16/\S+\.jsonl)\s.*\s(ok|ERROR|MISS|CHANGED)\s*$",
                      done.stdout, re.M)
    table = rows[-count:]
    expected = [f"corpus-16/run-{k:02d}/process.jsonl" for k in range(count)]
    assert [name for name, _ in table] == expected and {s for _, s in table} == {"ok"}
    # the summaries as they came back: also in the folder's order, each once
    streamed = re.findall(r"^hermes-replay replay · (\S+)$", done.stdout, re.M)
    assert streamed == expected
    # exactly once: one run per cassette started in an env, none twice, none lost
    runs = Counter(entry["out"] for entry in _journal(journal))
    assert len(runs) == count and set(runs.values()) == {1}
    for k in range(count):
        assert (tmp_path / "out" / f"run-{k:02d}" / "process" / "result.json").is_file()
    # on both nodes of the cluster (one actor each: one CPU per node)
    manifest = json.loads((tmp_path / "out" / "replay.json").read_text())
    nodes = Counter(row["summary"]["worker"].split(":")[0] for row in manifest["rows"])
    assert len(nodes) == 2, nodes
    assert len({entry["pid"] for entry in _journal(journal)}) == 2


def test_a_worker_that_dies_is_retried_once_and_an_error_when_it_dies_again(
        cluster, project, tmp_path) -> None:
    corpus = _subset(project, "corpus-die", range(6))
    journal, marker = tmp_path / "journal.jsonl", tmp_path / "died-once"
    done = _replay(cluster, project, corpus.name, tmp_path / "out", env={
        "CALC_ENV_JOURNAL": str(journal),
        # run-01 kills its worker the first time only; run-04 every time
        "CALC_ENV_DIE": f"run-01@{marker},run-04"})
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    statuses = dict(re.findall(r"^(corpus-die/\S+\.jsonl)\s.*\s(ok|ERROR)\s*$",
                               done.stdout, re.M))
    assert statuses == {f"corpus-die/run-{k:02d}/process.jsonl":
                        "ERROR" if k == 4 else "ok" for k in range(6)}
    err = done.stderr
    assert re.search(r"ERROR \S+run-01/process\.jsonl: its Ray worker died .*retrying once",
                     err)
    assert re.search(r"ERROR \S+run-04/process\.jsonl: its Ray worker died .*retrying once",
                     err)
    assert "its Ray worker died, and again on the retry" in done.stdout
    retried = re.findall(r"^hermes-replay replay · (\S+)\n(?:  .*\n)*?  retried: its first "
                         r"Ray worker died", done.stdout, re.M)
    assert retried == ["corpus-die/run-01/process.jsonl"]
    starts = Counter(Path(entry["out"]).parent.parent.name for entry in _journal(journal))
    assert starts["run-01"] == 2 and starts["run-04"] == 2  # died, then once more
    assert all(starts[f"run-{k:02d}"] == 1 for k in (0, 2, 3, 5))
    died = [e["pid"] for e in _journal(journal) if "run-01" in e["out"]]
    assert died[0] != died[1]  # the retry ran in another worker process


def test_ctrl_c_cancels_the_run_and_frees_the_cluster(cluster, project, tmp_path) -> None:
    journal = tmp_path / "journal.jsonl"
    proc = cluster.popen([HERMES, "replay", "corpus", "--executor", "ray", "--ray-address",
                          ADDRESS, "--out", str(tmp_path / "out"), "--no-report"],
                         cwd=project, stdout=__import__("subprocess").PIPE,
                         stderr=__import__("subprocess").PIPE,
                         env={"CALC_ENV_JOURNAL": str(journal)})
    deadline = time.monotonic() + 300
    while len(_journal(journal)) < 3 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
    assert proc.poll() is None, "the run ended before it could be interrupted"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, out[-2000:] + err[-2000:]
    assert "interrupted; cancelling the Ray tasks" in err
    replayed = len(ROWS.findall(out))
    # what finished is shown; the rest never ran
    assert 0 < replayed < 50, out[-3000:] + err[-3000:] + json.dumps(_journal(journal))
    assert json.loads((tmp_path / "out" / "replay.json").read_text())["complete"] is False
    # the actors are gone: both CPUs free again, and no run starts after the interrupt
    started = len(_journal(journal))
    free = cluster.probe(
        "import time\n"
        "for _ in range(120):\n"
        "    if ray.available_resources().get('CPU', 0) == 2: break\n"
        "    time.sleep(0.5)\n"
        "print(ray.available_resources().get('CPU', 0))")
    assert float(free.strip()) == 2.0
    assert len(_journal(journal)) == started


def test_ray_upload_through_auto_ships_the_project_and_brings_the_outputs_back(
        cluster, project, tmp_path) -> None:
    """Also ``auto`` as a user on a cluster's machine has it: no RAY_ADDRESS and no
    RAY_AUTH_MODE, only the address file ``ray start`` left and the cluster's token where Ray
    looks for one — which Ray takes only for a cluster it found itself (``ray.init("auto")``),
    not for the address read from that file and passed on."""
    corpus = _subset(project, "corpus-up", range(3))
    done = cluster.run([HERMES, "replay", corpus.name, "--executor", "ray", "--ray-address",
                        "auto", "--out", str(tmp_path / "out"), "--no-report", "--ray-upload"],
                       cwd=project, env={"RAY_ADDRESS": None, "RAY_AUTH_MODE": None})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert f"on the Ray cluster at {ADDRESS} (2 CPUs)" in done.stderr
    assert f"(project shipped from {project})" in done.stderr
    for k in range(3):
        result = json.loads((tmp_path / "out" / f"run-{k:02d}" / "process" /
                             "result.json").read_text())
        # replayed from the copy Ray unpacked on the worker, not from this folder
        assert "runtime_resources" in result["cassette"]
        assert not result["cassette"].startswith(str(project))
        assert (tmp_path / "out" / f"run-{k:02d}" / "process" / "groups.jsonl").is_file()


def test_a_cluster_that_wants_a_token_it_was_not_given_is_a_next_step(cluster, project,
                                                                     tmp_path) -> None:
    """An explicit address with token authentication off on the driver's side: Ray refuses
    it; the CLI says so with what to set, exit 2, and runs nothing."""
    journal = tmp_path / "journal.jsonl"
    done = _replay(cluster, project, "corpus", tmp_path / "out",
                   env={"RAY_AUTH_MODE": None, "CALC_ENV_JOURNAL": str(journal)})
    assert done.returncode == 2, done.stdout[-3000:] + done.stderr[-3000:]
    assert f"the Ray cluster at {ADDRESS} refused this driver's token" in done.stderr
    assert "set RAY_AUTH_MODE=token" in done.stderr and "RAY_AUTH_TOKEN_PATH" in done.stderr
    assert "Traceback" not in done.stderr
    assert not journal.exists()


def test_actors_never_import_from_the_drivers_working_folder(cluster, project,
                                                             tmp_path) -> None:
    """Issue 46, finding 01: ``ray.init`` puts the driver's working folder first on every
    worker's ``sys.path``; replayed from a folder holding a planted ``hermes_replay/`` and
    ``multiprocessing/`` (each writing a mark at import), an actor imported them. The
    driver now joins from the folder the package was imported from."""
    from test_child_interpreters_path import _marks, _plant

    corpus = _subset(project, "corpus-planted", range(2))
    here = tmp_path / "downloads"
    here.mkdir()
    _plant(here)
    done = _replay(cluster, here, str(corpus), tmp_path / "out")
    assert _marks(here) == [], done.stdout[-2000:] + done.stderr[-2000:]
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "2 cassettes on 2 Ray actors" in done.stderr

"""The ``ray`` executor (``replay DIR --executor ray``): each cassette a task on warm actors of a
Ray cluster.

We schedule nothing ourselves beyond keeping each actor busy: Ray places the actors on the
cluster's nodes (one CPU each), and each actor replays one cassette at a time exactly as a
``-j`` worker process does (``job.replay_job``: its recorded command, outputs under the out
folder, the env's output in ``env.log``).

- **Cluster**: ``--ray-address ADDR``, else ``auto`` (``RAY_ADDRESS``, or the cluster a
  ``ray start`` on this machine joined); when there is none, a local cluster of this
  machine's cores (or ``-j N``) that ends with the run.
- **Warm actors**: an actor imports the environment stack (atroposlib, the SDK, tokenizers,
  this package) once when it starts, then replays cassette after cassette; the pool is one
  actor per CPU of the cluster (at most ``-j N``, at most one per cassette).
- **Files**: by default the nodes share a filesystem (a Slurm cluster's home or scratch, one
  machine): the actors read the cassettes and write the outputs at the paths given here.
  ``--ray-upload`` is for nodes that share none: the cassettes' project goes to the workers
  as Ray's runtime environment ``working_dir`` (so it must fit Ray's upload limit), and each
  cassette's out folder comes back to the driver as a tar in the task's result.
- **Order**: results come back as they finish and print in the folder's order (a row waits
  only for the rows before it); one table and exit code at the end, as with ``-j``.
- **Failures**: an actor that dies (its process killed, its node lost) is an ERROR line for
  that cassette, which is retried once on a fresh actor; if that dies too, its row is ERROR.
- **Ctrl-C**: tasks not started are cancelled, the actors are killed, a local cluster is
  shut down; what finished is shown, exit 130.
"""

from __future__ import annotations

import io
import os
import sys
import tarfile
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hermes_replay._corpus.errors import ExecutorError
from hermes_replay._corpus.job import Job
from hermes_replay._corpus.one import CassetteResult
from hermes_replay._corpus.processes import default_jobs, without_progress
from hermes_replay._corpus.summary import RunSummary

__all__ = ["replay_on_ray"]

# One task at a time per actor: a task queued behind one whose actor dies would die with it
# and spend its one retry without having started (measured: the round trip between two tasks
# is a few ms against a cassette's hundreds).
_DEPTH = 1
_REPLY_GRACE = 0.5  # s a Ctrl-C waits for replies already on their way to the driver
_UPLOAD_LIMIT = 256 << 20  # bytes of one cassette's outputs sent back with --ray-upload
# variables of the driver's machine that must not replace the worker's own
_MACHINE_VARS = ("HOSTNAME", "PWD", "OLDPWD", "TMPDIR", "SHLVL", "_")
_EXCLUDES = [".git", ".venv*", "**/__pycache__", "replay-out", "node_modules", "*.egg-info",
             # credentials never leave this machine, .gitignore or not (Ray honours one only
             # when the project has it): a project's .env shipped with the code
             ".env", ".env.*", "*.env", ".envrc", ".netrc", ".pypirc", ".npmrc", ".aws",
             ".ssh", ".docker", "*.pem", "*.key", "*.p12", "*.pfx", "id_rsa*", "id_ed25519*",
             "id_ecdsa*", ".git-credentials"]


class _Worker:
    """A warm replay worker (made a Ray actor class in :func:`_actor_class`)."""

    def __init__(self) -> None:
        # The environment stack, imported once per actor: what makes the first cassette of a
        # cold process slow (seconds), paid here instead of per task.
        # (``environments``, our agent layer, comes with the first env file: this package
        # never imports it)
        import atroposlib.envs.base  # noqa: F401
        import openai  # noqa: F401
        import transformers  # noqa: F401

        import hermes_replay._corpus.job  # noqa: F401  (the replay path itself)

        self.started = time.time()

    def where(self) -> tuple[str, int]:
        import ray

        return ray.get_runtime_context().get_node_id(), os.getpid()

    def replay(self, job: Job, upload_root: str | None) -> tuple[CassetteResult, bytes | None]:
        node, pid = self.where()
        archive = None
        if upload_root is None:
            outcome = _run_job(job, job.cassette, job.out_dir, Path(job.cwd))
        else:  # paths below the uploaded project (this actor's working directory)
            import shutil
            import tempfile

            here = Path.cwd()
            cassette = here / job.cassette.relative_to(upload_root)
            cwd = Path(job.cwd)
            cwd = here / cwd.relative_to(upload_root) if cwd.is_relative_to(upload_root) \
                else here
            out_dir = Path(tempfile.mkdtemp(prefix="hermes-replay-out-"))
            import dataclasses

            job = dataclasses.replace(
                job, environ=_trust_moved(job.environ, Path(upload_root), here))
            try:
                outcome = _run_job(job, cassette, out_dir, cwd)
                archive = _tar(out_dir)
            finally:
                shutil.rmtree(out_dir, ignore_errors=True)
        outcome.summary.worker = f"{node[:12]}:{pid}"
        return outcome, archive


def _run_job(job: Job, cassette: Path, out_dir: Path, cwd: Path) -> CassetteResult:
    """One cassette in this actor: the driver's environment laid over the worker's own (not
    replacing it: the worker's machine and Ray's variables stay), its stderr captured."""
    import dataclasses
    from contextlib import redirect_stderr

    from hermes_replay._corpus.job import replay_job

    saved = dict(os.environ)
    os.environ.update({k: v for k, v in job.environ.items()
                       if not k.startswith("RAY_") and k not in _MACHINE_VARS})
    os.chdir(cwd)
    err = io.StringIO()
    try:
        with redirect_stderr(err):
            result = replay_job(dataclasses.replace(job, cassette=cassette, out_dir=out_dir))
    finally:
        os.environ.clear()
        os.environ.update(saved)
    result.output = without_progress(err.getvalue())
    # the row names the cassette and out folder the driver gave, not this actor's copies
    result.cassette, result.out_dir = job.cassette, job.out_dir
    return result.detached()


def _trust_moved(environ: dict[str, str], upload_root: Path, here: Path) -> dict[str, str]:
    """The driver's trusted folders (``_runner/trust.py``) as this actor sees them: a folder
    inside the shipped project is now below this actor's copy of it. Only what the driver
    trusted is trusted here; the copy gains nothing of its own."""
    from hermes_replay._runner.trust import TRUST_VARIABLE

    moved = []
    for raw in environ.get(TRUST_VARIABLE, "").split(os.pathsep):
        if not raw:
            continue
        folder = Path(raw)
        moved.append(str(here / folder.relative_to(upload_root))
                      if folder.is_relative_to(upload_root) else raw)
    return {**environ, TRUST_VARIABLE: os.pathsep.join(moved)}


def _tar(folder: Path) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        if folder.is_dir():
            tar.add(folder, arcname=".")
    data = buf.getvalue()
    if len(data) > _UPLOAD_LIMIT:
        raise RuntimeError(f"the outputs of one cassette are {len(data) >> 20} MiB, over the "
                           f"{_UPLOAD_LIMIT >> 20} MiB --ray-upload sends back; replay on a "
                           "shared filesystem instead (no --ray-upload)")
    return data


def _untar(data: bytes, out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        tar.extractall(out_dir, filter="data")  # no links out, no absolute paths


def _actor_class() -> Any:
    import ray

    return ray.remote(num_cpus=1, max_restarts=0, max_task_retries=0)(_Worker)


def _project_root(cassettes: list[Path]) -> Path:
    """The folder ``--ray-upload`` ships, found as a replay finds env files: the working
    directory when every cassette is inside it, else the cassettes' project (the nearest
    ancestor with a pyproject.toml, setup file or .git), which holds their env files too."""
    from hermes_replay._runner.plan import _PROJECT_MARKERS

    paths = [c.resolve() for c in cassettes]
    cwd = Path.cwd().resolve()
    if all(p.is_relative_to(cwd) for p in paths):
        return cwd
    for parent in paths[0].parents:
        if any((parent / m).exists() for m in _PROJECT_MARKERS):
            outside = [c for c in paths if not c.is_relative_to(parent)]
            if outside:
                raise ExecutorError(f"--ray-upload ships one project ({parent}); "
                                    f"{outside[0]} is outside it: replay each project on "
                                    "its own")
            return parent
    raise ExecutorError(f"--ray-upload ships the cassettes' project, but {paths[0]} is in "
                        "none (no pyproject.toml, setup file or .git above it): run from "
                        "the folder that holds the cassettes and their env files")


def upload_excludes(root: Path, outs: list[Path]) -> list[str]:
    """What ``--ray-upload`` leaves out of ``root``: tooling, secrets, and the outputs of this
    very run (they are not inputs)."""
    return [*_EXCLUDES, *(f"/{o.resolve().relative_to(root).as_posix()}"
                          for o in {p.parent for p in outs}
                          if o.resolve().is_relative_to(root))]


def _current_cluster_file() -> Path:
    """Where ``ray start --head`` leaves its address: Ray's own default temp folder
    (``RAY_TMPDIR``, else ``TMPDIR`` on Linux, else /tmp) + ``ray/ray_current_cluster`` —
    the file ``ray.init("auto")`` reads."""
    base = os.environ.get("RAY_TMPDIR") or (
        os.environ.get("TMPDIR") if sys.platform.startswith("linux") else None) or "/tmp"
    return Path(base) / "ray" / "ray_current_cluster"


def _auto_address() -> str | None:
    """What ``auto`` would join: ``RAY_ADDRESS``, else ``"auto"`` when the address ``ray
    start`` left answers — only then: a cluster that crashed leaves that file behind, and
    ``ray.init("auto")`` then waits on it for minutes instead of failing."""
    import socket

    given = os.environ.get("RAY_ADDRESS")
    if given:
        return given
    try:
        text = _current_cluster_file().read_text().strip()
    except OSError:
        return None
    host, _, port = text.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=2):
            # "auto", not the address read: Ray takes the token of a cluster it found on its
            # own (~/.ray/auth_token, RAY_AUTH_TOKEN_PATH), never one of an explicit address
            return "auto"
    except (OSError, ValueError):
        return None


def _connect(address: str | None, jobs: int | None, runtime_env: dict[str, Any] | None,
             log: Any) -> bool:
    """Join the cluster (True) or start a local one (False): ``address`` is a cluster's
    address, ``auto``/None (the one this machine is part of, else local) or ``local``.

    ``ray.init`` puts the driver's working folder first on every worker's ``sys.path``
    (unless a ``working_dir`` is shipped): run from a downloaded folder of cassettes, a
    ``hermes_replay/`` planted there would be what an actor imports (issue 46, finding 01).
    While it joins, the working folder is the one this package was imported from, on every
    worker's path already."""
    common = {"runtime_env": runtime_env, "log_to_driver": False,
              "logging_level": "ERROR", "configure_logging": True}
    here = os.getcwd()
    os.chdir(Path(__file__).resolve().parents[2])
    try:
        return _init(address, jobs, common, log)
    finally:
        os.chdir(here)


def _init(address: str | None, jobs: int | None, common: dict[str, Any], log: Any) -> bool:
    import ray
    from ray.exceptions import AuthenticationError

    explicit = address not in (None, "auto", "local")
    target = address if explicit else (_auto_address() if address != "local" else None)
    if target is not None:
        shown = "this machine's cluster" if target == "auto" else target
        try:
            ray.init(address=target, **common)
        except (ConnectionError, AuthenticationError) as exc:
            # ray.init turns the GCS's refusal of a driver without the cluster's token into
            # a ConnectionError; the refusal itself is its cause
            if any(isinstance(e, AuthenticationError) or "InvalidAuthToken" in str(e)
                   for e in _chain(exc)):
                mode = os.environ.get("RAY_AUTH_MODE", "unset")
                raise ExecutorError(
                    f"the Ray cluster at {shown} refused this driver's token (RAY_AUTH_MODE "
                    f"is {mode}); next step: that cluster uses token authentication — set "
                    "RAY_AUTH_MODE=token and give its token as RAY_AUTH_TOKEN_PATH=FILE (or "
                    "RAY_AUTH_TOKEN); Ray reads ~/.ray/auth_token by itself only for a "
                    "cluster it finds (--ray-address auto), never for an address given"
                ) from None
            raise ExecutorError(
                f"no Ray cluster answers at {shown} ({_reason(exc)}); next step: check the "
                "address `ray start --head` printed, or pass --ray-address local for a "
                "cluster of this machine alone") from None
        where = ray.get_runtime_context().gcs_address if target == "auto" else target
        log(f"hermes-replay replay: on the Ray cluster at {where} "
            f"({int(ray.cluster_resources().get('CPU', 0))} CPUs)")
        return True
    cpus = jobs or default_jobs()
    ray.init(num_cpus=cpus, include_dashboard=False, **common)
    log(f"hermes-replay replay: started a local Ray cluster ({cpus} CPUs)"
        + ("" if address == "local" else "; no cluster found to join"))
    return False


def replay_on_ray(jobs: list[Job], on_done: Callable[[CassetteResult], None], *,
                  note: Callable[[str], None], workers: int | None = None,
                  address: str | None = None,
                  upload: bool = False) -> tuple[list[CassetteResult], bool]:
    """Replay ``jobs`` on Ray; ``on_done`` hears each result in the jobs' order as soon as
    the ones before it are in, ``note`` what the executor has to say (the cluster joined, the
    actors made, a retry). Returns the results in order and whether Ctrl-C stopped the run."""
    import ray

    if not jobs:
        return [], False
    root = _project_root([j.cassette for j in jobs]) if upload else None
    runtime_env = None
    if root is not None:  # the outputs of this very run are not shipped with the inputs
        runtime_env = {"working_dir": str(root),
                       "excludes": upload_excludes(root, [j.out_dir for j in jobs])}
    _connect(address, workers, runtime_env, note)
    todo = deque(jobs)
    cpus = int(ray.cluster_resources().get("CPU", 1))
    size = max(1, min(cpus, workers or cpus, len(jobs)))
    note(f"hermes-replay replay: {len(jobs)} cassettes on {size} Ray actors"
         + (f" (project shipped from {root})" if root else " (shared filesystem)"))
    pool = _Pool(_actor_class(), size, None if root is None else str(root))
    printer = _InOrder(on_done)
    interrupted = False
    try:
        for outcome, archive in pool.run(todo, note):
            if upload and archive is not None:
                _untar(archive, jobs[outcome.index].out_dir)
            printer.add(outcome)
    except KeyboardInterrupt:
        interrupted = True
        # results an actor had already returned when Ctrl-C came are shown, not cancelled
        for outcome, archive in pool.finished():
            if upload and archive is not None:
                _untar(archive, jobs[outcome.index].out_dir)
            printer.add(outcome)
        printer.flush_rest()
        note("hermes-replay replay: interrupted; cancelling the Ray tasks")
    finally:
        pool.stop()
        ray.shutdown()  # a local cluster ends here; a joined one only loses this driver
    done = sorted(printer.done, key=lambda o: o.index)  # after Ctrl-C some came out of order
    return done, interrupted


class _InOrder:
    """Hands on each result once every result before it in the corpus' order has come."""

    def __init__(self, on_done: Callable[[CassetteResult], None]) -> None:
        self.on_done = on_done
        self.waiting: dict[int, CassetteResult] = {}
        self.done: list[CassetteResult] = []
        self.next = 0

    def add(self, outcome: CassetteResult) -> None:
        self.waiting[outcome.index] = outcome
        while self.next in self.waiting:
            ready = self.waiting.pop(self.next)
            self.done.append(ready)  # first: a Ctrl-C while it prints still keeps it
            self.next += 1
            self.on_done(ready)

    def flush_rest(self) -> None:
        """On Ctrl-C: what finished out of order is still shown — handed on like the rest
        (the caller names each cassette as it found it and prints its row; kept out of
        ``on_done``, they showed only in the final table, under the actor's absolute path)."""
        for index in sorted(self.waiting):
            ready = self.waiting.pop(index)
            self.done.append(ready)
            self.on_done(ready)


class _Pool:
    """Actors kept ``_DEPTH`` tasks deep; a dead actor replaced and its cassettes retried once."""

    def __init__(self, actor_cls: Any, size: int, upload_root: str | None) -> None:
        self.cls = actor_cls
        self.upload_root = upload_root
        self.actors = [actor_cls.remote() for _ in range(size)]
        self.pending: dict[Any, tuple[Job, Any, int]] = {}  # ref -> job, actor, attempt
        self.deaths: dict[int, str] = {}  # job index -> why its first worker died

    def _submit(self, actor: Any, job: Job, attempt: int) -> None:
        ref = actor.replay.remote(job, self.upload_root)
        self.pending[ref] = (job, actor, attempt)

    def _load(self, actor: Any) -> int:
        return sum(1 for _, a, _ in self.pending.values() if a is actor)

    def run(self, todo: deque[Job], log: Any) -> Any:
        import ray
        from ray.exceptions import RayError, RayTaskError

        retry: deque[tuple[Job, int]] = deque()
        while todo or retry or self.pending:
            for actor in list(self.actors):
                while self._load(actor) < _DEPTH and (retry or todo):
                    job, attempt = retry.popleft() if retry else (todo.popleft(), 0)
                    self._submit(actor, job, attempt)
            ready, _ = ray.wait(list(self.pending), num_returns=1)
            for ref in ready:
                job, actor, attempt = self.pending[ref]
                try:
                    outcome, error = ray.get(ref), None
                except RayError as exc:
                    outcome, error = None, exc
                del self.pending[ref]  # only now: after a Ctrl-C in ray.get, finished() has it
                if isinstance(error, RayTaskError):  # the replay itself raised in the actor
                    yield _failed(job, f"the replay raised in its Ray worker: "
                                  f"{_reason(error)}"), None
                    continue
                if error is not None:  # the actor died: killed, out of memory, node lost
                    if actor in self.actors:  # replace it once, for all its lost tasks
                        self.actors.remove(actor)
                        self.actors.append(self.cls.remote())
                    if attempt == 0:
                        log(f"ERROR {job.cassette}: its Ray worker died "
                            f"({_reason(error)}); retrying once on another worker")
                        self.deaths[job.index] = _reason(error)
                        retry.append((job, 1))
                    else:
                        yield _failed(job, f"its Ray worker died, and again on the retry "
                                      f"({_reason(error)}) — see the Ray logs of the nodes "
                                      "(/tmp/ray/session_latest/logs)"), None
                    continue
                outcome, archive = outcome
                yield self._noted(job, outcome), archive

    def finished(self) -> Any:
        """The results already returned and not yet taken (none is waited for)."""
        import ray

        if not self.pending:
            return
        # A replay that ended as Ctrl-C came may have its reply still on the way to this
        # driver: a short grace shows it as done rather than cancelling finished work.
        ready, _ = ray.wait(list(self.pending), num_returns=len(self.pending),
                            timeout=_REPLY_GRACE)
        for ref in ready:
            job, _, _ = self.pending.pop(ref)
            try:
                outcome, archive = ray.get(ref, timeout=10)
            except Exception:  # it raised or its actor died: no result to show
                continue
            yield self._noted(job, outcome), archive

    def _noted(self, job: Job, outcome: CassetteResult) -> CassetteResult:
        """``outcome``, saying so when it ran on a retry after its first worker died."""
        if job.index in self.deaths:
            outcome.summary.retried = f"its first Ray worker died ({self.deaths[job.index]})"
        return outcome

    def stop(self) -> None:
        import ray

        for ref in list(self.pending):
            try:
                ray.cancel(ref)
            except Exception:  # already finished, or its actor is gone
                pass
        for actor in self.actors:
            ray.kill(actor, no_restart=True)
        self.pending.clear()


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and the exceptions it was raised from (bounded: a chain may loop)."""
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen and len(seen) < 20:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:300]


def _failed(job: Job, message: str) -> CassetteResult:
    summary = RunSummary(mode="replay", cassette=str(job.cassette))
    summary.error = message
    return CassetteResult(job.cassette, job.out_dir, "?", summary, index=job.index,
                          rel=job.rel)

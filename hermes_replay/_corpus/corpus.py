"""``replay_corpus``: replay a set of cassettes — a folder, a file, several — and join the
results; what ``hermes-replay replay DIR`` runs, callable from Python (a notebook, a pipeline,
a CI script of one's own).

The steps, each in its own module: find the cassettes (``discover``), keep one shard of them
(``shard``), run each (``job.replay_job``: here, in ``-j`` worker processes
(``processes``) or on Ray actors (``on_ray``)), write ``<out>/replay.json`` (``manifest``, for
``hermes-replay results``) and the HTML report. A :class:`CorpusObserver` hears it happen; the
command line's observer prints the rows and progress, the default one is silent.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from hermes_replay._corpus.arguments import (
    CorpusArgumentError,
    check_observer,
    check_out,
    check_rescore,
    check_shard,
    check_switches,
)
from hermes_replay._corpus.discover import Corpus, discover
from hermes_replay._corpus.errors import CorpusError, ExecutorError
from hermes_replay._corpus.job import Job, replay_job
from hermes_replay._corpus.manifest import Manifest, ManifestRow, write_manifest
from hermes_replay._corpus.one import CassetteResult, RunHooks
from hermes_replay._corpus.shard import Shard, take_shard
from hermes_replay._corpus.summary import exit_code
from hermes_replay._runner.options import RunOptions

__all__ = ["EXECUTORS", "Corpus", "CorpusError", "CorpusObserver", "CorpusResult", "default_out",
           "replay_corpus"]

EXECUTORS = ("local", "ray")
_INTERRUPTED = (130, 143)  # Ctrl-C, SIGTERM


class CorpusObserver:
    """Hears a corpus replay as it happens; every method does nothing here. Subclass it and
    override what you need (the command line prints rows and progress this way)."""

    def started(self, count: int, workers: int, executor: str) -> None:
        """``count`` cassettes are about to run on ``workers`` at once."""

    def cassette_started(self, job: Job) -> RunHooks | None:
        """A cassette starts in this process (one worker only): return hooks to watch it
        live (its rollouts, where its output goes), or None."""
        return None

    def cassette_done(self, result: CassetteResult) -> None:
        """A cassette finished (in the corpus' order on Ray; as they finish with ``-j``)."""

    def note(self, text: str) -> None:
        """Something the executor has to say (the shard taken, the cluster joined, a retry)."""

    def finished(self) -> None:
        """Every cassette has run, or Ctrl-C stopped the run."""


@dataclass
class CorpusResult:
    """What ``replay_corpus`` did: one :class:`CassetteResult` per cassette replayed (in the
    corpus' order), where the outputs went, and the exit code the command line gives."""

    corpus: str
    out: Path
    results: list[CassetteResult]
    total: int  # cassettes in the whole corpus, every shard's
    shard: Shard | None = None
    interrupted: bool = False
    fail_on_change: bool = False
    manifest: Path | None = None  # <out>/replay.json
    report: Path | None = None  # <out>/report.html, when written
    report_note: str | None = None  # the report's line: its path, or why it was not written

    @property
    def exit_code(self) -> int:
        """0 every cassette replayed (changed rewards too, unless ``fail_on_change``); 1 a
        miss, an error, unused recordings under ``strict``; 130/143 stopped by a signal."""
        if self.interrupted:
            last = self.results[-1].summary.exit_code if self.results else 0
            return last if last else 130
        return exit_code([r.summary for r in self.results], self.fail_on_change)

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    @property
    def changed(self) -> bool:
        """Some reward moved from its recorded value."""
        return any(r.summary.changed for r in self.results)

    def table(self) -> list[dict[str, Any]]:
        """The joined table, a dict per cassette (the columns the command line prints)."""
        return [{"cassette": str(r.cassette), "mode": r.mode, "rollouts": r.summary.rollouts,
                 "turns": r.summary.turns, "misses": r.summary.misses,
                 "unused": r.summary.unused, "mean_reward": r.summary.mean_reward,
                 "changed": len(r.summary.changed), "status": r.status}
                for r in self.results]


def replay_corpus(
    paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] = "cassettes",
    options: RunOptions | None = None,
    *,
    out: str | os.PathLike[str] | None = None,
    jobs: int | None = None,
    shard: Shard | str | None = None,
    executor: str = "local",
    ray_address: str | None = None,
    ray_upload: bool = False,
    fail_on_change: bool = False,
    verbose: bool = False,
    rescore: int | None = None,
    report: bool = True,
    observer: CorpusObserver | None = None,
    **keywords: Any,
) -> CorpusResult:
    """Replay every cassette under ``paths`` offline and return a :class:`CorpusResult`.

    ``paths``: a cassette, a folder of them (``*.jsonl``/``*.jsonl.zst`` below it), or a
    list of either. ``options`` (:class:`RunOptions`, ``keywords`` laid over it by name:
    ``strict=True``, ``tools="execute"``, ``normalizers=[…]``) say how each is run. ``out``:
    the outputs' folder (default a new ``./replay-out/<UTC time>/``), a folder per cassette
    plus ``replay.json`` and ``report.html`` (``report=False``: none; needs the ``report``
    extra). ``jobs``: processes (``executor="local"``, default the cores) or Ray actors at
    most (``executor="ray"``, on the cluster at ``ray_address``, with ``ray_upload`` for
    nodes that share no filesystem). ``shard``: only the I-th of N (``"2/8"``), a stable
    split by path. ``rescore``: with ``live=…`` options, K replays per cassette.

    A cassette that fails is a row, never an exception; a corpus that cannot be replayed at
    all (no cassette, a path that is not there, an executor that cannot run) raises
    ``CorpusError``, and so does an argument of the wrong shape, before anything runs (its
    ``CorpusArgumentError`` is a ``ValueError`` too).
    """
    from hermes_replay._corpus.processes import default_jobs

    options = RunOptions.of(options, where="replay_corpus()", **keywords)
    # every argument checked before anything runs: its name and what it takes (``arguments``)
    check_switches(fail_on_change=fail_on_change, verbose=verbose, report=report,
                   ray_upload=ray_upload)
    check_observer(observer, CorpusObserver)
    observer = observer or CorpusObserver()
    if not isinstance(executor, str) or executor not in EXECUTORS:
        raise CorpusArgumentError(f"replay_corpus(): executor {executor!r:.60} is not one of "
                                  f"{', '.join(EXECUTORS)}")
    if jobs is not None and (isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1):
        raise CorpusArgumentError(f"replay_corpus(): jobs={jobs!r:.60}: give 1 or more "
                                  "(default: the number of cores)")
    if ray_address is not None and not isinstance(ray_address, str):
        raise CorpusArgumentError(f"replay_corpus(): ray_address={ray_address!r:.60}: give "
                                  "the cluster's address as a string, or None")
    check_rescore(rescore, options.live)
    if executor == "ray" and options.live is not None:
        raise ExecutorError("live calls run with executor local only: the live key would "
                            "have to travel to the Ray workers; run the shards with jobs "
                            "instead")
    shard = check_shard(shard)
    check_out(out)
    corpus = discover(paths)
    manifest = Manifest(corpus=corpus.name, shard=None if shard is None else str(shard),
                        corpus_cassettes=list(corpus.rels))
    chosen = list(range(len(corpus.cassettes)))
    if shard is not None:
        chosen = take_shard([Path(r) for r in corpus.rels], shard)
        observer.note(f"hermes-replay replay: shard {shard}: {len(chosen)} of "
                      f"{len(corpus.rels)} cassettes")
    where = Path(out) if out is not None else default_out(shard)
    check_out(where)  # ./replay-out may be a file too
    workers = min(jobs or default_jobs(), max(1, len(chosen)))
    in_process = executor == "local" and workers == 1
    here = str(Path.cwd())
    environ: dict[str, str] = {}
    if not in_process:  # a worker gets the driver's trusted folders (``_runner.trust``)
        from hermes_replay._runner.trust import with_trusted_roots

        environ = with_trusted_roots(dict(os.environ))
    found = [corpus.cassettes[i] for i in chosen]
    job_list = [Job(n, c if in_process else c.resolve(),
                    (where / corpus.outputs[i]) if in_process
                    else (where / corpus.outputs[i]).resolve(),
                    options, corpus.rels[i], verbose, rescore, here, environ)
                for n, (i, c) in enumerate(zip(chosen, found, strict=True))]
    results: list[CassetteResult] = []

    def done(result: CassetteResult) -> None:
        result.cassette = found[result.index]  # as found, not as a worker saw it
        result.summary.cassette = str(result.cassette)
        results.append(result)
        observer.cassette_done(result)

    observer.started(len(job_list), 1 if in_process else workers, executor)
    try:
        if executor == "ray":
            from hermes_replay._corpus.on_ray import replay_on_ray

            finished, interrupted = replay_on_ray(job_list, done, note=observer.note,
                                                  workers=jobs, address=ray_address,
                                                  upload=ray_upload)
        elif not in_process:
            observer.note(f"hermes-replay replay: {len(job_list)} cassettes in {workers} "
                          "processes")
            from hermes_replay._corpus.processes import replay_in_processes

            finished, interrupted = replay_in_processes(job_list, workers, done)
        else:
            finished, interrupted = [], False
            for job in job_list:
                result = replay_job(job, observer.cassette_started(job))
                done(result)
                finished.append(result)
                if result.summary.exit_code in _INTERRUPTED:  # stop; show what was done
                    interrupted = True
                    break
    finally:
        observer.finished()
    finished.sort(key=lambda r: r.index)
    manifest.rows = [ManifestRow(r.rel, str(r.cassette), r.mode, r.summary) for r in finished]
    manifest.complete = not interrupted
    outcome = CorpusResult(corpus.name, where, finished, len(corpus.rels), shard, interrupted,
                           fail_on_change, manifest=write_manifest(where, manifest))
    if report and not interrupted:
        from hermes_replay._report import report_line

        outcome.report_note = report_line(where)
        if (where / "report.html").is_file():
            outcome.report = where / "report.html"
    return outcome


def default_out(shard: Shard | None = None) -> Path:
    """A new ``./replay-out/<UTC time>/``; a shard's goes below its Slurm array job's id
    when there is one (``replay-out/slurm-<job id>/shard-2-of-8``), so one array's shards
    sit side by side for ``hermes-replay results replay-out/slurm-<job id>/*``."""
    array_job = os.environ.get("SLURM_ARRAY_JOB_ID")
    if shard is not None and array_job:
        return Path("replay-out") / f"slurm-{array_job}" / shard.folder_name
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    if shard is not None:
        stamp += f"-{shard.folder_name}"
    out = Path("replay-out") / stamp
    n = 1
    while out.exists():
        n += 1
        out = Path("replay-out") / f"{stamp}-{n}"
    return out


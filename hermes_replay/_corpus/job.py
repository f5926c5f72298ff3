"""One cassette of a corpus as a unit of work: a ``Job`` (plain data: it crosses to ``-j``
worker processes and Ray actors) and :func:`replay_job`, which every executor runs — in this
process, a worker or an actor alike — so a cassette's row is the same wherever it ran.

A cassette not recorded with ``hermes-replay record`` (no env file or command in its header)
and a ``serve`` recording (it needs a live Atropos API) are skipped, saying how to replay them;
the rest go to the one runner (``one.run_one``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from hermes_replay._corpus.one import CassetteResult, RunHooks, run_one
from hermes_replay._corpus.summary import RunSummary
from hermes_replay._runner.options import RunOptions

__all__ = ["ENV_MODES", "Job", "replay_job"]

ENV_MODES = ("serve", "process", "evaluate")


@dataclass(frozen=True)
class Job:
    index: int
    cassette: Path
    out_dir: Path
    options: RunOptions
    rel: str = ""
    verbose: bool = False
    rescore: int | None = None
    # where the driver runs, as it is when the job is handed out (a worker may have started
    # earlier, elsewhere)
    cwd: str = ""
    environ: dict[str, str] = field(default_factory=dict)


def replay_job(job: Job, hooks: RunHooks | None = None) -> CassetteResult:
    """Replay the job's cassette (or say why it is skipped)."""
    from hermes_replay._cassette.load import load_cassette
    from hermes_replay._errors import CassetteError
    from hermes_replay._terminal.render import sanitize

    fail = RunSummary(mode="replay", cassette=str(job.cassette))

    def done(mode: str, message: str = "") -> CassetteResult:
        return CassetteResult(job.cassette, job.out_dir, mode, fail, message, index=job.index,
                              rel=job.rel)

    try:
        header = load_cassette(job.cassette).header
    except CassetteError as exc:
        fail.error = str(exc)
        return done("?", f"hermes-replay replay: {sanitize(str(exc))}")
    command = list(header.command or [])
    if not header.env_file or not command or command[0] not in ENV_MODES:
        fail.skipped = (
            "not recorded with `hermes-replay record` (no env file/command in its header); "
            "replay it from its test, or with `hermes-replay replay ENV_FILE --cassette "
            f"{job.cassette} -- MODE …`"
        )
        return done(command[0] if command else "?")
    if command[0] == "serve":
        fail.skipped = (
            "a serve run needs a live Atropos API; replay it while the API runs with "
            f"`hermes-replay replay {header.env_file} --cassette {job.cassette} -- "
            f"{' '.join(command)}`"
        )
        return done("serve")
    if job.options.live is not None:  # re-scored with a live judge: K runs, one row
        from hermes_replay._corpus.rescore import rescore_cassette

        result = rescore_cassette(job.cassette, job.out_dir.resolve(), job.options,
                                  runs=job.rescore or 1, verbose=job.verbose, hooks=hooks,
                                  mode=command[0])
    else:
        result = run_one(job.cassette, job.out_dir.resolve(), job.options,
                         verbose=job.verbose, hooks=hooks, mode=command[0])
    result.index, result.rel = job.index, job.rel
    return result

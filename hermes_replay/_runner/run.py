"""The one runner: run an environment file's CLI under a cassette and collect a ``RunResult``.

Everything that runs an environment goes through here — ``hermes-replay replay`` (a folder of
cassettes, or ``ENV_FILE -- MODE``), ``record``, ``passthrough``, ``check`` (through the CLI)
and the pytest plugin's ``replay_run`` — so they behave alike; the CLI only adds presentation.

- :func:`run_cassette` re-runs the command a cassette's header recorded: it finds the env file,
  points output flags into ``out_dir``, runs from the folder the command was recorded in, and
  writes ``out_dir/result.json`` (for ``hermes-replay diff``).
- :func:`run_env` runs a given env file and argv in a mode: wandb captured (and kept off the
  network in replay), non-loopback sockets refused in replay, rewards and annotations heard
  from the session, and — when recording — a failed or empty run never replaces the cassette.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager
from pathlib import Path
from typing import Any

from hermes_replay._cassette import partial_path
from hermes_replay._errors import (
    CassetteError,
    HermesReplayError,
    LiveCallsFailed,
    RecordingFailed,
    UnknownFlags,
)
from hermes_replay._runner.dead_endpoint import DEFAULT_FIRST_ANSWER_TIMEOUT
from hermes_replay._runner.fast_cli import fast_cli
from hermes_replay._runner.flags import checked_flags
from hermes_replay._runner.options import RunOptions
from hermes_replay._runner.plan import flag_value
from hermes_replay._runner.result import RolloutOutcome, RunResult, recorded_rewards
from hermes_replay._runner.run_notes import by_position, name_refusals, skipped_groups
from hermes_replay._runner.seed import run_seed, seed_globals, seeded_setup
from hermes_replay._session.isolation import tool_isolation

__all__ = ["read_eval_metrics", "read_groups", "run_cassette", "run_env"]


def run_cassette(
    path: str | Path,
    options: RunOptions | None = None,
    *,
    out_dir: str | Path,
    command: Sequence[str] | None = None,
    raise_errors: bool = True,
    output: AbstractContextManager[Any] | None = None,
    on_rollout: Callable[[str, dict[str, Any]], None] | None = None,
    on_event: Callable[[Any], None] | None = None,
    rescored: Path | None = None,
    **keywords: Any,
) -> RunResult:
    """Re-run the command recorded in cassette ``path`` (or ``command``) as ``options`` say.

    ``options`` is a :class:`RunOptions` (mode, strict, tools, matching, offline bounds, seed,
    a live judge); ``keywords`` are laid over it by name (``run_cassette(p, out_dir=o,
    strict=True)``), so either way works. Misses raise ``CassetteMiss`` when the run ends
    (with a diff per request); a replay that did not really run (the env exited non-zero or
    raised, recorded rollouts never ran) raises ``ReplayFailed``. ``raise_errors=False`` is
    the explicit opt-out for callers that want the raw result: the error is then returned in
    ``result.error`` instead. In replay mode non-loopback sockets and DNS lookups are refused
    unless ``block_network=False``, and a run that misses ``max_misses`` times with no
    progress stops with ``ReplayStalled``. The env's own output goes to ``out_dir/env.log``
    unless ``output`` (a context manager redirecting it) is given. Tool commands that execute
    run inside bubblewrap unless ``trust_cassette=True``; ``seed`` overrides the recorded
    seed (see :func:`run_env`).
    """
    from hermes_replay._cassette.files import name_too_long
    from hermes_replay._cassette.load import load_cassette
    from hermes_replay._runner.out_dir import fresh_out_dir
    from hermes_replay._runner.plan import find_env_file, redirect_outputs, replay_argv
    from hermes_replay._session.options import check_options

    check_options({"raise_errors": raise_errors}, where="run_cassette()")
    options = RunOptions.of(options, where="run_cassette()", **keywords)
    cassette_path = Path(path).resolve()
    given = Path(out_dir)
    # the folder itself resolved, never a link planted at its name (fresh_out_dir refuses it)
    out = (given.resolve() if given.name in ("", ".", "..")
           else given.parent.resolve() / given.name)
    recorded_run = load_cassette(cassette_path)
    header = recorded_run.header
    if not header.env_file:
        raise CassetteError(
            "the header names no env_file, so there is no command to re-run", path=path, line=1,
            hint="record it with `hermes-replay record ENV_FILE … -- process …`, or use "
                 "hermes_replay.cassette() around your own code")
    too_long = name_too_long(header.env_file)
    if too_long:
        raise CassetteError(
            f"the header's env_file {too_long}, so no file has that name "
            f"({header.env_file[:60]!r}…)", path=path, line=1,
            hint="the header is damaged: restore the cassette from git, or re-record it")
    rewards = recorded_rewards(recorded_run)
    del recorded_run  # the replay loads its own copy; a huge reply need not be held twice
    env_file = find_env_file(header.env_file, Path(path))
    if env_file is None:
        from hermes_replay._runner.plan import _shown

        raise CassetteError(
            f"the recorded env file {_shown(header.env_file)} was not found in any folder you "
            f"trust that holds the working directory ({Path.cwd()}) or the cassette",
            path=path, line=1,
            hint="run from the project the environment lives in, once trusted (hermes-replay "
                 "trust DIR; recording there or pip install -e trusts it too), or name the "
                 "environment yourself: hermes-replay replay ENV_FILE --cassette CASSETTE -- "
                 "MODE …")
    # Run where it was recorded (the folder env_file is relative to), so other relative paths
    # in the command (--config, datasets) resolve as they did.
    from hermes_replay._runner.plan import OUTPUT_FLAGS, recorded_cwd, recorded_module
    from hermes_replay._runner.portable import local_command

    recorded = Path(header.env_file)
    root = env_file.resolve().parents[len(recorded.parts) - 1]
    base = recorded_cwd(root, header.extra)
    module = recorded_module(env_file, root, header.extra)
    argv = replay_argv(list(header.command or []), None if command is None else list(command))
    argv = redirect_outputs(local_command(argv, header.tokenizer, cassette_path, base,
                                          skip=OUTPUT_FLAGS), out)
    fresh_out_dir(out, argv)  # one run per folder, nothing written through a planted link
    with _working_dir(base):
        result = run_env(env_file.resolve(), argv, cassette=cassette_path, options=options,
                         output=output, log_path=out / "env.log", on_rollout=on_rollout,
                         on_event=on_event, env_name=header.env_name, raise_errors=False,
                         as_recorded=command is None, rescored=rescored, module=module)
    result.out_dir = out
    result.recorded_rewards = rewards
    from hermes_replay._runner.result_io import write_run_result

    write_run_result(result, out)
    if raise_errors and result.error is not None:
        raise result.error
    return result


def run_env(
    env_file: Path,
    argv: Sequence[str],
    *,
    cassette: Path | None,
    options: RunOptions | None = None,
    output: AbstractContextManager[Any] | None = None,
    log_path: Path | None = None,
    on_rollout: Callable[[str, dict[str, Any]], None] | None = None,
    on_event: Callable[[Any], None] | None = None,
    env_name: str | None = None,
    raise_errors: bool = False,
    as_recorded: bool = False,
    first_answer_timeout: float = DEFAULT_FIRST_ANSWER_TIMEOUT,
    rescored: Path | None = None,
    module: tuple[str, Path] | None = None,
    **keywords: Any,
) -> RunResult:
    """Run ``env_file`` with ``argv`` (``[mode, flags…]``) inside a cassette session.

    A miss, a bad cassette, a refused recording or a replay that did not really run
    (``ReplayFailed``: the env exited non-zero or raised, or recorded rollouts never ran) is
    ``result.error`` (raised instead with ``raise_errors=True``); ``as_recorded`` says ``argv``
    is the cassette's own command, so every recorded rollout must run. ``KeyboardInterrupt``
    propagates. ``cassette=None`` only for ``passthrough``, which reads and writes nothing.
    ``options`` (:class:`RunOptions`, ``keywords`` laid over it by name) say how to run.
    ``module`` (``(name, folder)``) runs the file as ``python -m name`` from ``folder`` would
    (a module in a namespace package, as Atropos runs its community envs); by default a file
    in a package that imports relatively runs so too.

    Tools that execute run inside bubblewrap (``_session.isolation``); ``trust_cassette=True`` runs
    them on the host. Before the environment starts, ``random`` and numpy are seeded
    (``_runner.seed``): with ``seed``, else the recorded seed, else (recording) a new one, which the
    header keeps.

    A recording whose endpoint does not answer (connections refused, or no answer to the first
    request within ``first_answer_timeout`` seconds) is stopped at once (``_runner.dead_endpoint``);
    a failed recording leaves no ``groups.jsonl``/``.html`` of its own behind, and puts an
    ``evaluate`` run's eval folder back as it was (``_runner.run_outputs``).

    ``live={"patterns": [...], "base_url": URL, "api_key_env": VAR, "call_timeout": S}``
    (replay only; ``call_timeout`` optional, 120 s) sends the calls the patterns select to
    that endpoint while the rest replay (``_session.live_calls``): the network block lets
    exactly that host through, the dead-endpoint guard watches it and each call's deadline, a
    run whose patterns selected nothing or whose live calls got no answer (or not the API's
    JSON) fails (``LiveCallsFailed``), and a clean run writes what it ran to ``rescored``.
    """
    import hermes_replay
    from hermes_replay._runner.dead_endpoint import dead_endpoint_guard
    from hermes_replay._runner.envrun import (
        OutcomeCollector,
        library_output_with_env,
        redirected_to,
        run_env_file,
    )
    from hermes_replay._runner.netblock import block_network as _block
    from hermes_replay._runner.plain_env import plain_env_support
    from hermes_replay._runner.run_outputs import RunOutputs, run_outputs
    from hermes_replay._runner.scrub_outputs import scrubbed_run
    from hermes_replay._runner.stall import stall_guard
    from hermes_replay._runner.wandb import capture_wandb
    from hermes_replay._session.options import check_options

    check_options({"raise_errors": raise_errors}, where="run_env()")
    # one checked value: a truthy non-boolean would run tools on the host (trust="no")
    options = RunOptions.of(options, where="run_env()", **keywords)
    mode, block_network = options.mode, options.block_network
    session_options: dict[str, Any] = options.session_options()
    if on_event is not None:
        session_options["on_event"] = on_event
    collector = OutcomeCollector(on_rollout=on_rollout)
    session = None
    plain: Any = None
    code = 0
    error: HermesReplayError | None = None
    captured: Any = None
    outputs: RunOutputs | None = None
    path = cassette if cassette is not None else Path("(passthrough)")
    live_calls = None
    if options.live is not None:
        from hermes_replay._session.live_calls import LiveCalls

        try:
            live_calls = session_options["live"] = LiveCalls.build(options.live)
        except ValueError as exc:
            raise LiveCallsFailed(str(exc), cassette=path,
                                  hint="fix the --llm/--live-* flags") from None
    try:
        with ExitStack() as stack:
            # Replay is offline: keep wandb off the network (the user's own setting wins).
            stack.enter_context(_env_default("WANDB_MODE",
                                             "disabled" if mode == "replay" else None))
            if block_network if block_network is not None else mode == "replay":
                stack.enter_context(_block(
                    allow=[live_calls.host_port()] if live_calls is not None else ()))
            captured = stack.enter_context(capture_wandb())
            stack.enter_context(tool_isolation(mode, options.trust_cassette))
            session = stack.enter_context(hermes_replay.cassette(path, mode=mode,  # type: ignore[arg-type]
                                                                 **session_options))
            session.observe(collector)
            plain = stack.enter_context(plain_env_support(mode))
            run_seed_value = _seed_run(session, mode, options.seed)
            if run_seed_value is not None:
                stack.enter_context(seeded_setup(run_seed_value))
            stack.enter_context(output if output is not None else redirected_to(log_path))
            stack.enter_context(library_output_with_env())
            stack.enter_context(checked_flags())  # a misspelt flag stops the run here
            # the CLI's fixed costs cut; the TLS context shared only where no real TLS is due
            stack.enter_context(fast_cli(reuse_tls=mode == "replay"))
            if mode == "replay":  # a run that keeps missing is stopped (ReplayStalled)
                stack.enter_context(stall_guard(session, max_misses=options.max_misses))
                if live_calls is not None:  # and a dead live endpoint, naming it
                    stack.enter_context(dead_endpoint_guard(
                        session, first_answer_timeout=first_answer_timeout))
            else:  # live: real keys around, so what it prints and writes is scrubbed
                stack.enter_context(scrubbed_run(argv))
            if mode in ("record", "auto"):  # a dead endpoint stops the run (RecordingFailed)
                outputs = stack.enter_context(run_outputs(argv))
                stack.enter_context(dead_endpoint_guard(
                    session, first_answer_timeout=first_answer_timeout))
            code = run_env_file(env_file, argv, module,
                                _offline_rerun(env_file, argv, cassette, module)
                                if mode == "replay" else None)
            if mode in ("record", "auto"):
                # Raising inside the block makes the session keep the old cassette and leave
                # the completed interactions in <path>.partial.
                _check_recording(code, session, path, empty_ok=mode == "auto")
    except HermesReplayError as exc:
        error = exc
        if isinstance(exc, UnknownFlags):  # a usage error, as argparse's own
            code = UnknownFlags.exit_code
    if mode in ("record", "auto") and session is not None and (error is not None or code != 0):
        # a failed run that recorded nothing leaves nothing behind (only a journal this run
        # opened: one refused at start may belong to another recorder)
        _drop_empty_journal(path)
        if isinstance(error, RecordingFailed) and error.partial and \
                not partial_path(path).exists():  # name no file that is not there
            error = error.without_partial()
        if error is not None:
            name_refusals(error, session)
    if outputs is not None:  # a failed recording's files would look like data, or hide one
        if error is not None or code != 0:
            outputs.take_back()
        else:
            outputs.discard()
    if mode == "replay" and error is None and session is not None and cassette is not None:
        from hermes_replay._runner.verdict import replay_verdict

        log = log_path if log_path is not None and log_path.is_file() else None
        error = replay_verdict(cassette, session.summary(), code, env_file, argv, log,
                               as_recorded=as_recorded)
        if error is None and live_calls is not None:
            from hermes_replay._runner.verdict import live_verdict

            error = live_verdict(cassette, live_calls)
        if error is None and live_calls is not None and rescored is not None:
            try:
                session.write_rescored(rescored)
            except HermesReplayError as exc:
                error = exc
    result = _result(argv, code, error, session, collector, captured, cassette, env_name)
    result.handled = list(plain.handled) if plain is not None else []
    result.handled.extend(skipped_groups(plain))
    if mode == "replay" and session is not None:
        result.handled.extend(by_position(session.summary()))
    if raise_errors and error is not None:
        raise error
    return result


def _drop_empty_journal(cassette: Path) -> None:
    """Remove a recording journal that holds no recording (its header and annotations only):
    a run refused before anything ran leaves nothing behind. A journal with anything
    recorded in it (or one that cannot be read) is kept."""
    journal = partial_path(cassette)
    try:
        with journal.open("rb") as fh:
            data = fh.read(2_000_000)
        kinds = {json.loads(line).get("type") for line in data.splitlines() if line.strip()}
    except (OSError, ValueError, AttributeError):
        return
    if kinds <= {"header", "annotate"}:
        journal.unlink(missing_ok=True)


def _seed_run(session: Any, mode: str, given: int | None) -> int | None:
    """Seed the generators for this run (a recording keeps the seed in its header); the seed,
    for ``seeded_setup`` to apply again before the environment's ``setup()``."""
    recorded = session.header.seed if mode in ("replay", "auto") else None
    seed = run_seed(mode, given, recorded)
    if seed is None:
        return None
    if mode in ("record", "auto") and recorded != seed:
        session.annotate({"seed": seed})
    seed_globals(seed)
    return seed


def _check_recording(code: int, session: Any, path: Path, *, empty_ok: bool = False) -> None:
    """Refuse to replace a cassette with a failed or empty recording (``auto`` may record
    nothing new: everything was already in the cassette)."""
    if getattr(session, "write_error", None) is not None:
        raise session.write_error  # disk full: say so, not "check the endpoint"
    if code != 0:
        raise RecordingFailed(f"the environment exited with code {code}", cassette=path)
    core = session.summary()
    if core.recorded == 0 and not empty_ok:
        why = f" ({core.failed_attempts} attempts failed)" if core.failed_attempts else ""
        raise RecordingFailed(
            f"no LLM request was recorded{why} — check the endpoint URL, model name and key",
            cassette=path)


def _result(argv: Sequence[str], code: int, error: HermesReplayError | None, session: Any,
            collector: Any, captured: Any, cassette: Path | None,
            env_name: str | None) -> RunResult:
    from hermes_replay._cassette.labels import labels

    summary = session.summary() if session is not None else None
    names = labels({**collector.groups, **collector.outcomes})
    return RunResult(
        command=list(argv),
        exit_code=code,
        env_name=env_name or collector.annotations.get("env_name"),
        cassette=cassette,
        rollouts=[RolloutOutcome.from_outcome(rid, o, names.get(rid))
                  for rid, o in collector.outcomes.items()],
        groups=read_groups(argv),
        eval_metrics=read_eval_metrics(argv),
        wandb=captured.latest() if captured is not None else {},
        wandb_steps=[dict(s.metrics) for s in captured.steps] if captured is not None else [],
        misses=[m.describe() for m in summary.misses] if summary is not None else [],
        unused=[f"{r or '<no rollout>'}#{s}" for r, s in summary.unused]
        if summary is not None else [],
        error=error,
        summary=summary,
    )


@contextmanager
def _env_default(name: str, value: str | None) -> Iterator[None]:
    """Set an environment variable unless the user set it; undo afterwards."""
    if value is None or name in os.environ:
        yield
        return
    os.environ[name] = value
    try:
        yield
    finally:
        os.environ.pop(name, None)


@contextmanager
def _working_dir(path: Path) -> Iterator[None]:
    saved = Path.cwd()
    if path.resolve() == saved.resolve():
        yield
        return
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(saved)


def read_groups(argv: Sequence[str]) -> list[dict[str, Any]]:
    path = flag_value(argv, "--env.data_path_to_save_groups")
    if not path or not Path(path).is_file():
        return []
    from hermes_replay._runner.json_ints import shared_int_decoder

    decoder = shared_int_decoder()  # a huge reply's token lists: 8 bytes per id, not 36
    with open(path, encoding="utf-8") as fh:
        return [decoder.decode(line) for line in fh if line.strip()]


def read_eval_metrics(argv: Sequence[str]) -> dict[str, Any]:
    folder = flag_value(argv, "--env.data_dir_to_save_evals")
    metrics = Path(folder) / "metrics.json" if folder else None
    if metrics is None or not metrics.is_file():
        return {}
    data = json.loads(metrics.read_text(encoding="utf-8"))
    return dict(data.get("results", {}).get("all", {}))


def _offline_rerun(env_file: Path, argv: Sequence[str], cassette: Path | None,
                   module: tuple[str, Path] | None) -> str:
    """How to debug a replay's crash offline: the same run, its output shown (``-v``). The
    env's own CLI with the recorded flags would send live requests to the recorded endpoint
    (a paid API, in real use)."""
    import shlex

    from hermes_replay._runner.plan import PLACEHOLDER_KEY

    env = f"-m {module[0]}" if module is not None else str(env_file)
    flags = [a for a in argv if a != PLACEHOLDER_KEY]
    where = f" --cassette {shlex.quote(str(cassette))}" if cassette is not None else ""
    return f"hermes-replay replay {env}{where} -v -- {shlex.join(flags)}"

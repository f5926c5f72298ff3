"""Run ``process`` and ``evaluate`` of an environment for the dynamic checks, in subprocesses,
and ``check_dynamic``, which runs them beside the import test (``_dynamic``) and reads them.

Offline, each mode replays a cassette: ``hermes-replay replay ENV --cassette C -- <the recorded
command>`` with its output paths moved into a temporary folder. Live, each mode is recorded
into a temporary cassette: ``hermes-replay record ENV --endpoint URL --model M -- MODE …`` with
one item (``process``: one step, two rollouts; ``evaluate``: two items). Either way the run is
the environment's own CLI, and what it sent to the model is read back with
``hermes-replay show --raw`` — the public CLI, nothing private of the replay core.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import tempfile
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hermes_replay._check import _outputs as outputs
from hermes_replay._check._argv import live_argv, run_folder
from hermes_replay._check._dynamic import (
    DYNAMIC_RULES,
    MODEL_RULES,
    PLAIN_FIXES,
    PLAIN_RULES,
    Target,
    dynamic_finding,
    import_check,
    project_root,
    skipped_rows,
)
from hermes_replay._check._findings import RuleRow
from hermes_replay._interpreter import python_command
from hermes_replay._terminal.render import shown_path

if TYPE_CHECKING:
    from hermes_replay._runner.twice import Difference

RUN_TIMEOUT = float(os.environ.get("HERMES_CHECK_TIMEOUT", "900"))
TRACE_FILE = "trace.jsonl"  # what a replayed mode did (``replay --trace``)
OUTPUT_FLAG = {
    "process": "--env.data_path_to_save_groups",
    "evaluate": "--env.data_dir_to_save_evals",
}


@dataclass
class ModeRun:
    """One mode's run: how it ended, where its outputs are, and what it asked the model."""

    mode: str
    skipped: str | None = None  # why it did not run (no cassette for this mode …)
    exit_code: int = 0
    log_tail: str = ""
    output: Path | None = None
    cassette: Path | None = None
    header: dict[str, Any] = field(default_factory=dict)
    command: list[str] = field(default_factory=list)
    trace: Path | None = None  # what a replayed mode did (``replay --trace``)

    @property
    def ok(self) -> bool:
        return self.skipped is None and self.exit_code == 0


def read_header(cassette: Path) -> dict[str, Any]:
    """Line 1 of a cassette (documented JSON): env file, command, tokenizer, endpoint."""
    from hermes_replay._cassette.files import first_line
    from hermes_replay._cassette.merge import expand_shards

    if cassette.is_dir():  # a folder of shards: they share one header (merge checks it)
        shards = expand_shards([cassette])
        return read_header(shards[0]) if shards else {}
    try:
        header = json.loads(first_line(cassette) or b"{}")
    except (OSError, ValueError):
        return {}
    return header if isinstance(header, dict) and header.get("type") == "header" else {}


def cassettes_by_mode(path: Path) -> dict[str, Path]:
    """Cassette per mode: ``path`` itself, then its folder (``cassettes/<env>/<mode>.jsonl``)."""
    from hermes_replay._cassette.files import is_cassette_name
    from hermes_replay._cassette.merge import SHARDS_SUFFIX

    if path.is_dir() and path.name.endswith(SHARDS_SUFFIX):  # one sharded cassette
        folder, candidates = path.parent, [path]
    else:
        folder = path if path.is_dir() else path.parent
        candidates = [] if path.is_dir() else [path]
    candidates += sorted(p for p in folder.iterdir()
                         if is_cassette_name(p.name) or p.name.endswith(SHARDS_SUFFIX))
    found: dict[str, Path] = {}
    for candidate in candidates:
        command = read_header(candidate).get("command") or []
        if command and command[0] in OUTPUT_FLAG and command[0] not in found:
            found[command[0]] = candidate
    return found


def set_flag(argv: list[str], flag: str, value: str) -> list[str]:
    """``argv`` with ``flag`` set to ``value`` (both ``--f v`` and ``--f=v`` forms replaced)."""
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg == flag:
            skip = True
        elif not arg.startswith(flag + "="):
            out.append(arg)
    return [*out, flag, value]


def _subprocess_env(root: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(root), env.get("PYTHONPATH", "")) if p)
    env.setdefault("WANDB_MODE", "disabled")  # a check never logs a real wandb run
    return env


def run_mode(env_file: Path, mode: str, target: Target, work: Path,
             api_key_env: str | None = None) -> ModeRun:
    # Absolute paths: the run's working directory is the project root, not the caller's.
    env_file, work = env_file.resolve(), work.resolve()
    out_dir = work / mode
    out_dir.mkdir(parents=True, exist_ok=True)
    output = out_dir / ("groups.jsonl" if mode == "process" else "evals")
    cli = python_command("-m", "hermes_replay.cli")
    if target.cassette is not None:
        by_mode = cassettes_by_mode(target.cassette)
        cassette = by_mode.get(mode)
        if cassette is None:  # name what is there: "no evaluate cassette at …/process.jsonl"
            folder = target.cassette if target.cassette.is_dir() else target.cassette.parent
            there = f" (it holds {', '.join(sorted(by_mode))} only)" if by_mode else ""
            shown = shown_path(env_file)  # as the user would type it from here
            return ModeRun(mode, skipped=f"no {mode} cassette in {folder}{there}: record one "
                           f"with `hermes-replay record {shown} --endpoint URL --model M -- "
                           f"{mode} …` to check {mode} offline")
        header = read_header(cassette)
        argv = set_flag(list(header.get("command") or [mode]), OUTPUT_FLAG[mode], str(output))
        # the trace is one of the two fresh-interpreter runs the twice row compares
        trace = out_dir / TRACE_FILE
        command = [*cli, "replay", str(env_file), "--cassette", str(cassette.resolve()),
                   "--trace", str(trace), "--", *argv]
    else:
        cassette = work / f"{mode}.jsonl"  # side by side, so `--cassette WORK` finds both
        argv = set_flag(live_argv(mode, env_file, target.env_flags), OUTPUT_FLAG[mode],
                        str(output))
        key = ["--api-key-env", api_key_env] if api_key_env else []
        command = [*cli, "record", str(env_file), "--endpoint", str(target.endpoint), "--model",
                   str(target.model), *key, "--cassette", str(cassette), "--", *argv]
        header, trace = {}, None
    root = project_root(env_file)
    where = run_folder(env_file, header) or root  # replay's folder: the recorded env_cwd
    try:
        proc = subprocess.run(command, cwd=where, env=_subprocess_env(root), capture_output=True,
                              text=True, timeout=RUN_TIMEOUT, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return ModeRun(mode, exit_code=-1, log_tail=f"{mode} ran longer than {RUN_TIMEOUT:.0f}s "
                       "(set HERMES_CHECK_TIMEOUT to allow more)", output=output,
                       command=command, trace=trace)
    if not header:
        header = read_header(cassette)
    return ModeRun(mode, exit_code=proc.returncode, log_tail=_tail(proc.stderr, proc.stdout),
                   output=output, cassette=cassette, header=header, command=command,
                   trace=trace)


def _tail(stderr: str, stdout: str) -> str:
    """The most telling last line: an error line if there is one, else the last line."""
    lines = [ln.strip() for ln in (stderr + "\n" + stdout).splitlines() if ln.strip()]
    for line in reversed(lines):
        if any(word in line for word in ("Error", "error", "miss", "Traceback", "raised")):
            return line
    return lines[-1] if lines else "no output"


def recorded_requests(cassette: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(request of every interaction, reward per rollout) via ``hermes-replay show --raw``."""
    proc = subprocess.run(python_command("-m", "hermes_replay.cli", "show", str(cassette),
                                         "--raw"), capture_output=True, text=True, timeout=120)
    decoder = json.JSONDecoder()
    text, pos = proc.stdout, 0
    requests: list[dict[str, Any]] = []
    rewards: dict[str, Any] = {}
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos >= len(text):
            break
        try:
            record, pos = decoder.raw_decode(text, pos)
        except ValueError:
            break
        if "request" in record:
            requests.append(record["request"] or {})
        elif "outcome" in record:
            rewards[str(record.get("rollout"))] = (record["outcome"] or {}).get("reward")
    return requests, rewards


def load_vocab(header: dict[str, Any]) -> tuple[outputs.Vocab | None, str | None]:
    """The tokenizer the run used (named in the cassette header), loaded offline."""
    info = header.get("tokenizer") or {}
    name, fingerprint = info.get("name"), info.get("fingerprint")
    try:
        from hermes_replay._tokenizers.bundled import load_tokenizer, tokenizer_fingerprint

        if fingerprint and fingerprint == tokenizer_fingerprint():
            return outputs.Vocab.from_tokenizer(load_tokenizer()), None
        if not name:
            return None, "the cassette names no tokenizer"
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(name, local_files_only=True)
        return outputs.Vocab.from_tokenizer(tokenizer), None
    except Exception as exc:  # any loading failure only weakens the check; say so
        return None, f"could not load tokenizer {name!r} offline ({type(exc).__name__})"


def _row(rule: str, display: str, problems: list[outputs.Problem],
         fix: str | None = None, plain: bool = False) -> RuleRow:
    title = PLAIN_RULES.get(rule, DYNAMIC_RULES[rule]) if plain else DYNAMIC_RULES[rule]
    fix = fix or (PLAIN_FIXES.get(rule) if plain else None)
    return RuleRow(rule, title,
                   [dynamic_finding(rule, sev, display, msg, fix=fix) for sev, msg in problems],
                   kind="dynamic")


def _rerun_fix(run: ModeRun, target: Target) -> str:
    """What to do about a run that did not finish: how to reproduce it, and the usual cause."""
    if run.skipped:
        article = "an" if run.mode.startswith(tuple("aeiou")) else "a"
        return (f"record {article} {run.mode} cassette next to the one you passed, or check live "
                "with --endpoint URL --model M")
    again = f"reproduce it with `{shlex.join(['hermes-replay', *run.command[3:]])}`"
    if target.cassette is not None:
        return (f"{again}; a cassette miss means the environment now sends other requests than "
                "were recorded: re-record with `hermes-replay record`")
    return f"{again}, and check the endpoint and the environment's traceback"


def _failed(run: ModeRun) -> list[outputs.Problem]:
    if run.skipped:
        return [("warn", run.skipped)]
    how = "replayed" if run.header else "run"
    return [("fail", f"{run.mode} {how} with exit code {run.exit_code}: {run.log_tail}")]


def start_runs(env_file: Path, target: Target, api_key_env: str | None,
               work: Path) -> dict[str, Future[ModeRun]]:
    """Both modes at once (separate processes, outputs and rollout ids): half the wait."""
    pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="hermes-check")
    futures = {mode: pool.submit(run_mode, env_file, mode, target, work, api_key_env)
               for mode in ("process", "evaluate")}
    pool.shutdown(wait=False)
    return futures


def analyse_runs(display: str, target: Target, process: ModeRun,
                 evaluate: ModeRun, plain: bool = False) -> list[RuleRow]:
    """The process, evaluate and rewards rows. ``plain``: a plain atroposlib env, judged by
    what any trainer needs (finite scores, groups that are not all alike), not by the Hermes
    layer's rules (scores in [0, 1], an agent loop with tools in evaluate)."""
    rewards: list[tuple[str, Any]] = []
    groups: list[dict[str, Any]] = []
    process_fix = evaluate_fix = None
    if not process.ok:
        process_problems, process_fix = _failed(process), _rerun_fix(process, target)
    else:
        assert process.output is not None
        groups = outputs.read_jsonl(process.output) if process.output.is_file() else []
        vocab, why = load_vocab(process.header)
        process_problems = outputs.check_groups(groups, vocab, unit=not plain)
        if vocab is None:
            process_problems.append(("warn", f"vocabulary bounds and roles not checked: {why}"))
        rewards += [(f"process group {g} rollout {n}", s) for g, group in enumerate(groups)
                    for n, s in enumerate(group.get("scores") or [])]

    if not evaluate.ok:
        evaluate_problems, evaluate_fix = _failed(evaluate), _rerun_fix(evaluate, target)
    elif plain:  # atroposlib's evaluate has no contract beyond finishing: it ran, that's all
        evaluate_problems = []
    else:
        assert evaluate.output is not None and evaluate.cassette is not None
        evaluate_problems = outputs.check_eval_dir(evaluate.output)
        requests, recorded = recorded_requests(evaluate.cassette)
        evaluate_problems += outputs.check_eval_requests(requests)
        samples_file = evaluate.output / "samples.jsonl"
        samples = outputs.read_jsonl(samples_file) if samples_file.is_file() else []
        sample_rewards = outputs.sample_rewards(samples)
        rewards += sample_rewards
        if target.cassette is None and not sample_rewards:
            # A fresh recording: its outcomes are today's rewards (samples carry none).
            rewards += [(f"rollout {rid}", r) for rid, r in recorded.items() if r is not None]

    rewards_fix = None
    if not process.ok and not evaluate.ok:
        reward_problems: list[outputs.Problem] = [
            ("warn", "no run finished, so there are no rewards to check")]
        rewards_fix = "fix the process/evaluate rows above, then check again"
    elif plain:
        reward_problems = outputs.check_plain_rewards(rewards, groups)
    else:
        reward_problems = outputs.check_rewards(rewards)
    broken = isolation_failures([c for c in (target.cassette, process.cassette,
                                             evaluate.cassette) if c is not None])
    if broken:  # the rewards measure a missing sandbox: range advice would mislead
        reward_problems = [("fail", broken)]
        rewards_fix = ("install bubblewrap (`apt-get install bubblewrap`) and record the "
                       "cassette again; its tool calls never ran")
    return [_row("process", display, process_problems, process_fix, plain),
            _row("evaluate", display, evaluate_problems, evaluate_fix, plain),
            _row("rewards", display, reward_problems, rewards_fix, plain)]


def isolation_failures(cassettes: list[Path]) -> str | None:
    """What to say of cassettes whose tool calls failed because no sandbox could be made."""
    from hermes_replay._cassette import load_cassette

    seen: set[Path] = set()
    failed = total = 0
    for path in cassettes:
        if path in seen or not Path(path).is_file():
            continue
        seen.add(path)
        try:
            calls = load_cassette(path).tool_calls
        except Exception:
            continue
        total += len(calls)
        failed += sum(1 for c in calls if "IsolationUnavailableError" in str(c.raised)
                      or "must run inside bubblewrap" in str(c.result))
    if not failed:
        return None
    return (f"{failed} of {total} recorded tool results are sandbox isolation errors "
            "(bubblewrap was missing when it was recorded): the rewards score a broken sandbox, "
            "not the model")


def traced_twice_row(display: str, process: ModeRun, rerun: Path,
                     runs: list[dict[str, Any]] | str | None) -> RuleRow | None:
    """Is the replay deterministic? The check has already replayed the process cassette in
    two fresh interpreters — the process run and the first run of the rerun subprocess —
    each writing a trace; they are compared as ``replay --twice`` compares its two runs, so
    the checked env file is the one judged, at no extra run. None when either run left no
    trace or failed (then ``twice_row`` replays twice itself and says why)."""
    from hermes_replay._runner.twice import compare_traces, read_trace

    if not process.ok or process.trace is None:
        return None
    traces = [process.trace, rerun / "trace-1.jsonl"]
    if not all(t.is_file() for t in traces) or not isinstance(runs, list) or not runs \
            or runs[0].get("error"):
        return None
    a, b = (read_trace(t) for t in traces)
    difference, compared = compare_traces(a, b)
    cassette = process.cassette
    if difference is not None:
        return _row("twice", display, _twice_problems(cassette, [], difference))
    if not any(compared.values()):  # two runs that did nothing agree and prove nothing
        return _row("twice", display, [("fail", f"{cassette}: the two replays made no request, "
                                         "tool call or reward to compare")])
    return _row("twice", display, [])


def twice_row(display: str, cassette: Path, work: Path, process_failed: bool = False) -> RuleRow:
    """Is the replay deterministic? The process cassette (else any) replayed twice.

    When the process row failed and both replays here fail too, they failed for the cause
    that row shows: the row says so once, as a warning pointing there, instead of a third
    failure of one cause; if the two failed runs also differ, that difference is named as
    the likely cause of them all (the run errors are the process row's to show). One replay
    failing and the other not is still this row's own failure: that is the non-determinism
    it looks for."""
    from hermes_replay._runner.twice import replay_twice

    found = cassettes_by_mode(cassette)
    chosen = found.get("process") or next(iter(found.values()), None)
    if chosen is None:
        return _row("twice", display, [("warn", f"no replayable cassette at {cassette}")])
    report = replay_twice(chosen, work)
    if process_failed and len(report.errors) == 2:
        if report.difference is None:
            first = report.errors[0].split(":", 1)[-1].strip().splitlines()[0][:160]
            return _row("twice", display, [("warn", f"{chosen}: not judged: both replays "
                                             f"failed, as the process run did ({first})")],
                        "fix the process row above, then check again")
        # two failed runs that also differ: the difference is the likely cause of all three
        return _row("twice", display, [("fail", f"{chosen}: the two replays differ from each "
                                         "other, the likely cause of the process row's failure "
                                         "too: " + "; ".join(
                                             line.strip()
                                             for line in report.difference.lines()))])
    return _row("twice", display, _twice_problems(chosen, report.errors, report.difference))


def _twice_problems(cassette: Path | None, errors: list[str],
                    difference: Difference | None) -> list[outputs.Problem]:
    problems: list[outputs.Problem] = [("fail", f"{cassette}: {e}") for e in errors]
    if difference is not None:
        problems.append(("fail", f"{cassette}: " + "; ".join(
            line.strip() for line in difference.lines())))
    return problems


def _rerun_row(display: str, env_file: Path, process: ModeRun, work: Path
               ) -> tuple[RuleRow, list[dict[str, Any]] | str | None]:
    """Replay the process run's cassette twice in one process (see ``_rerun``); the row, and
    the two runs' results (None: not run)."""
    from hermes_replay._check._rerun import diagnose, rerun_twice

    if not process.ok or process.cassette is None or not process.cassette.is_file():
        return _row("rerun", display, [("warn", "not run: process did not finish")],
                    "fix the process row above, then check again"), None
    env_file, root = env_file.resolve(), project_root(env_file)
    argv = set_flag(list(process.header.get("command") or ["process"]), OUTPUT_FLAG["process"],
                    str(work.resolve() / "rerun" / "groups.jsonl"))
    out = (work / "rerun").resolve()  # the subprocess runs where replay runs it
    runs = rerun_twice(env_file, process.cassette.resolve(), argv, root, out,
                       _subprocess_env(root), RUN_TIMEOUT,
                       cwd=run_folder(env_file, process.header))
    problems, fix = diagnose(runs, out)
    return _row("rerun", display, problems, fix), runs


def check_dynamic(env_file: Path, display: str, target: Target,
                  keep: Path | None = None, plain: bool = False) -> list[RuleRow]:
    """The import row, then process/evaluate/rewards (run only with a cassette or endpoint).

    The two runs start together with the import test (each is a separate process) so a check
    waits for the slowest, not the sum; if the import fails their results are not reported.
    """
    if not target.available:
        return [import_check(env_file, display), *skipped_rows(display)]
    work = keep or Path(tempfile.mkdtemp(prefix="hermes-check-"))
    try:
        futures = start_runs(env_file, target, target.api_key_env, work)
        imported = import_check(env_file, display)
        process, evaluate = futures["process"].result(), futures["evaluate"].result()
        if imported.status == "fail":
            return [imported, *[
                RuleRow(rule, DYNAMIC_RULES[rule],
                        [dynamic_finding(rule, "warn", display, "not run: the file does not import",
                                  fix="fix the import row above, then check again")],
                        kind="dynamic")
                for rule in MODEL_RULES
            ]]
        rerun, runs = _rerun_row(display, env_file, process, work)
        rows = [imported, *analyse_runs(display, target, process, evaluate, plain), rerun]
        if target.cassette is not None:
            rows.append(traced_twice_row(display, process, (work / "rerun").resolve(), runs)
                        or twice_row(display, target.cassette, work / "twice",
                                     process_failed=not process.ok))
        return rows
    finally:
        if keep is None:
            shutil.rmtree(work, ignore_errors=True)

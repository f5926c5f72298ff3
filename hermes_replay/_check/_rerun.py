"""The ``rerun`` check: the environment runs twice in one process and gives the same results.

A folder replay, two pytest tests of one env and ``check`` itself run an environment file
more than once in one interpreter. State an env keeps outside its module body — a cache in an
imported helper module, a class attribute, a registry — survives into the next run and
silently changes its rewards (or makes it fail). This replays the ``process`` cassette twice
in one subprocess and compares the two runs rollout by rollout.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from hermes_replay._check import _outputs as outputs
from hermes_replay._interpreter import python_command

__all__ = ["RERUN_FIX", "compare_runs", "diagnose", "rerun_twice"]

RERUN_FIX = ("keep per-run state on the environment instance (set it in setup), not in "
             "module-level caches of imported modules, class attributes or registries; tools "
             "registered at import are fine (the same definition again is accepted)")

_SCRIPT = """
import json, sys
from pathlib import Path
from hermes_replay._runner.envrun import module_of
from hermes_replay._runner.plan import replay_argv
from hermes_replay._runner.run import run_env

env_file, cassette, argv, out = Path(sys.argv[1]), Path(sys.argv[2]), json.loads(sys.argv[3]), \\
    Path(sys.argv[4])
# run as `python -m` would run a package env from the check's root
module = module_of(env_file.resolve(), root=Path(sys.argv[5]).resolve())
runs = []
for n in (1, 2):
    result = run_env(env_file, replay_argv(argv), cassette=cassette, mode="replay",
                     module=module,
                     log_path=out / f"run-{n}.log", as_recorded=True,
                     trace=out / f"trace-{n}.jsonl")
    error = result.error
    runs.append({"rewards": result.rewards,
                 "error": None if error is None else
                 f"{type(error).__name__}: {str(error).splitlines()[0]}"})
print("HERMES-RERUN " + json.dumps(runs))
"""


def rerun_twice(env_file: Path, cassette: Path, argv: list[str], root: Path, work: Path,
                env: dict[str, str], timeout: float,
                cwd: Path | None = None) -> list[dict[str, Any]] | str:
    """Both runs' rewards and errors, or why the subprocess itself failed. They run in
    ``cwd`` (where replay runs the recording) else ``root``; a package env as a module of
    ``root``, as ``python -m`` runs it from there."""
    work.mkdir(parents=True, exist_ok=True)
    try:
        proc = subprocess.run(python_command("-c", _SCRIPT, str(env_file), str(cassette),
                                             json.dumps(argv), str(work), str(root)),
                              cwd=cwd or root, env=env,
                              capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return f"two runs took longer than {timeout:.0f}s (set HERMES_CHECK_TIMEOUT)"
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("HERMES-RERUN "):
            return list(json.loads(line[len("HERMES-RERUN "):]))
    tail = [ln for ln in (proc.stderr or proc.stdout).splitlines() if ln.strip()][-1:]
    return f"the two runs did not finish (exit {proc.returncode}): {' '.join(tail)}"


def diagnose(runs: list[dict[str, Any]] | str, work: Path) -> tuple[list[outputs.Problem],
                                                                   str | None]:
    """What differs between the two runs and the fix: the first request field, tool result or
    reward that differs (their traces, compared as ``replay --twice`` compares) is named
    before any cause is guessed — a clock in the prompt is a normalizer, not leaked state."""
    problems = compare_runs(runs)
    if not problems or isinstance(runs, str):
        return problems, RERUN_FIX if problems else None
    from hermes_replay._runner.twice import compare_traces, read_trace

    traces = [work / f"trace-{n}.jsonl" for n in (1, 2)]
    if not all(t.is_file() for t in traces):
        return problems, RERUN_FIX
    difference, _ = compare_traces(*(read_trace(t) for t in traces))
    if difference is None or difference.what in ("reward", "rollouts"):
        return problems, RERUN_FIX  # every request agreed: state decided the outcome
    where = f"rollout {difference.rollout}" if difference.rollout else "outside any rollout"
    named = (f"the second run differs first at {difference.what} · {where} · "
             f"{difference.position} · field {difference.field}: "
             f"{_short(difference.first)} then {_short(difference.second)}")
    return [(problems[0][0], f"{named} ({problems[0][1]})")], difference.suggestion


def _short(value: Any, limit: int = 100) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False,
                                                           default=str)
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")


def compare_runs(runs: list[dict[str, Any]] | str) -> list[outputs.Problem]:
    """What differs between the first and the second run in one process."""
    if isinstance(runs, str):
        return [("fail", runs)]
    first, second = runs
    if first["error"] and first["error"] == second["error"]:
        return [("warn", f"both runs failed alike, see the process row: {first['error']}")]
    if second["error"] and not first["error"]:
        return [("fail", "the environment ran once, but a second run in the same process "
                 f"failed: {second['error']}")]
    if first["error"]:
        return [("fail", f"the first run failed ({first['error']}) and the second did not: "
                 "state from earlier in the process decides whether it works")]
    a, b = first["rewards"], second["rewards"]
    changed = sorted(r for r in set(a) | set(b) if a.get(r) != b.get(r))
    if not changed:
        return []
    shown = "; ".join(f"{r}: {a.get(r)} then {b.get(r)}" for r in changed[:5])
    more = f" and {len(changed) - 5} more" if len(changed) > 5 else ""
    return [("fail", f"state leaks between runs in one process: {len(changed)} rollout "
             f"reward(s) changed on the second run ({shown}{more})")]

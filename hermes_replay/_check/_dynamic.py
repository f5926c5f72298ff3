"""Dynamic checks: the seed's testing checklist, run in subprocesses.

* ``import``  — the environment file imports (always run; needs no model).
* ``process`` — ``process`` with one item: JSONL tokens are ints inside the tokenizer's
  vocabulary, masks have the same length with -100 on every non-assistant token, scores in [0, 1].
* ``evaluate`` — ``evaluate`` runs the full agent loop with tools and writes its metrics.
* ``rewards`` — over the run, rewards stay in [0, 1] and are not all equal.
* ``rerun`` — the ``process`` cassette replayed twice in one process gives the same rewards
  (no state leaks between runs; a second run does not fail).
* ``twice`` — with a cassette: replayed twice in fresh interpreters, the two runs send the same
  requests and tool calls and score the same rewards (``replay --twice``).

The last three need a model: a cassette (offline replay) or an endpoint the user names. With
neither they are reported as warnings that say so — never as passes.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

from hermes_replay._check._findings import Finding, RuleRow
from hermes_replay._interpreter import python_command

IMPORT_TIMEOUT = 120.0
NEEDS_MODEL = ("needs a cassette or an endpoint: pass --cassette PATH (offline replay) or "
               "--endpoint URL --model M (live)")

MODEL_RULES = ("process", "evaluate", "rewards", "rerun")  # the rows that need a model
DYNAMIC_RULES: dict[str, str] = {
    "import": "the environment file imports (python -c 'import …')",
    "process": "process with one item: int tokens in vocab, aligned masks, -100 off-assistant, "
               "scores in [0, 1]",
    "evaluate": "evaluate runs the agent loop with tools and writes metrics",
    "rewards": "rewards are in [0, 1] and not all equal",
    "rerun": "run twice in one process, the same rewards (no state leaks between runs)",
    "twice": "the cassette replays the same twice (fresh interpreters): requests, tools, rewards",
}
#: the titles of a plain atroposlib env's rows, where the Hermes layer's rules do not hold
PLAIN_RULES: dict[str, str] = {
    "process": "process with one item: int tokens in vocab, aligned masks, -100 off-assistant, "
               "finite scores, one per rollout",
    "evaluate": "evaluate runs",
    "rewards": "rewards are finite and a group's rollouts are not all scored the same",
}
PLAIN_FIXES: dict[str, str] = {
    "process": "see the message: tokens/masks are what score() builds (tokenize_for_trainer); "
               "scores must be finite numbers, one per rollout",
    "evaluate": "see the message: evaluate() should finish offline from the cassette",
    "rewards": "make score() return finite numbers; a group whose rollouts all score the same "
               "teaches nothing (check the reward on a known-good and a known-bad reply)",
}
_FIXES: dict[str, str] = {
    "import": "import the file yourself and fix the traceback (a missing package, a typo, or "
              "code that runs at import time)",
    "process": "see the message: tokens/masks come from the base class's chat template; scores "
               "come from compute_reward (clamp them to [0, 1])",
    "evaluate": "build the eval rollouts with `await self.run_eval_rollouts(items)` (or "
                "HermesAgentLoop with tools) and report metrics with `await self.evaluate_log("
                "metrics=..., samples=...)`",
    "rewards": "clamp compute_reward to [0, 1]; if every reward is equal, the reward does not "
               "discriminate (check it on a known-good and a known-bad rollout)",
    "rerun": "keep per-run state on the environment instance (set it in setup)",
    "twice": "see the message: normalize or ignore the volatile field, or seed the randomness; "
             "`hermes-replay replay CASSETTE --twice` shows it again",
}


@dataclass(frozen=True)
class Target:
    """What the dynamic checks run against: a cassette, or a live endpoint and model."""

    cassette: Path | None = None
    endpoint: str | None = None
    model: str | None = None
    api_key_env: str | None = None  # live only: NAME of the variable holding the key
    env_flags: tuple[str, ...] = ()  # live only: the env's flags given after `--`

    @property
    def available(self) -> bool:
        return self.cassette is not None or (self.endpoint is not None and bool(self.model))


def dynamic_finding(rule: str, severity: str, file: str, message: str, line: int | None = None,
                    fix: str | None = None) -> Finding:
    return Finding(rule, severity, file, line, message, fix or _FIXES[rule])  # type: ignore[arg-type]


_finding = dynamic_finding


def _module(env_file: Path) -> tuple[str, Path] | None:
    """The module ``env_file`` runs as (a package env that imports relatively; below the
    working directory, a namespace package as ``python -m`` from there sees it), or None."""
    from hermes_replay._runner.envrun import module_of

    where, cwd = env_file.resolve(), Path.cwd().resolve()
    return module_of(where, root=cwd if where.is_relative_to(cwd) else None)


def project_root(env_file: Path) -> Path:
    """The directory to import from: where ``python -m`` runs a package env from, else the
    parent of the ``environments`` package, if any."""
    module = _module(env_file)
    if module is not None:
        return module[1]
    env_file = env_file.resolve()
    for parent in env_file.parents:
        if (parent / "environments" / "__init__.py").is_file():
            return parent
    return env_file.parent


def import_check(env_file: Path, display: str, timeout: float = IMPORT_TIMEOUT) -> RuleRow:
    """Import the file in a fresh interpreter (no ``__main__`` block runs)."""
    row = RuleRow("import", DYNAMIC_RULES["import"], kind="dynamic")
    module = _module(env_file)
    code = (
        "import importlib.util, sys\n"
        "spec = importlib.util.spec_from_file_location('hermes_check_target', sys.argv[1])\n"
        "module = importlib.util.module_from_spec(spec)\n"
        "sys.modules[spec.name] = module\n"
        "spec.loader.exec_module(module)\n"
    ) if module is None else (  # relative imports: imported as its package's module
        "import importlib, sys\nimportlib.import_module(sys.argv[2])\n")
    root = project_root(env_file)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(root), env.get("PYTHONPATH", "")) if p)
    try:
        proc = subprocess.run(python_command("-c", code, str(env_file.resolve()),
                                             module[0] if module else ""), cwd=root,
                              env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        row.findings.append(_finding("import", "fail", display,
                                     f"importing the file took more than {timeout:.0f}s: "
                                     "something runs at import time (a download, a server?)"))
        return row
    if proc.returncode != 0:
        again = f"python -c {shlex.quote(f'import runpy; runpy.run_path({str(env_file)!r})')}"
        row.findings.append(_finding("import", "fail", display,
                                     _last_error(proc.stderr), _error_line(proc.stderr, env_file),
                                     fix=f"run `{again}` from {root} and fix the traceback (a "
                                     "missing package, a typo, or code that runs at import time)"))
    return row


def _last_error(stderr: str) -> str:
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    tail = lines[-1].strip() if lines else "the interpreter exited with an error"
    return f"import failed: {tail}"


def _error_line(stderr: str, env_file: Path) -> int | None:
    """The last traceback line inside the env file itself, if the traceback passes through it."""
    marker = f'File "{env_file.resolve()}", line '
    line: int | None = None
    for text in stderr.splitlines():
        text = text.strip()
        if text.startswith(marker):
            number = text[len(marker):].split(",")[0]
            if number.isdigit():
                line = int(number)
    return line


def skipped_rows(display: str) -> list[RuleRow]:
    """The model-needing checks, reported as warnings because nothing can drive the model."""
    return [
        RuleRow(rule, DYNAMIC_RULES[rule],
                [_finding(rule, "warn", display, NEEDS_MODEL,
                          fix="record a cassette once (`hermes-replay record …`) and pass "
                              "--cassette, or pass --endpoint URL --model M")],
                kind="dynamic")
        for rule in MODEL_RULES
    ]

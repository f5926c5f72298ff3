"""Synthetic but realistic agent traffic: what a GRPO run of a tool-calling env sends.

Each *item* is a task drawn from a dataset; a *group* of ``group`` rollouts samples it (same
prompt, different samples, as in GRPO); each rollout is ``turns`` chat requests long. Turn k's
request repeats the whole conversation so far (system prompt + user task + k assistant
tool-call messages + k tool results) and the fixed tool schemas, exactly as an agent loop does;
its response is a full ``chat.completion`` object (tool calls on every turn but the last).

Everything is seeded, so the same sizes give byte-identical traffic in every run and mode.
Sizes are in *interactions* (requests); a 10,000-interaction run is 1,000 rollouts of 10 turns,
i.e. 125 items × group 8 — the scale of one RL evaluation sweep.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any

MODEL = "NousResearch/Hermes-4-14B"

SYSTEM_PROMPT = (
    "You are Hermes, an autonomous agent working inside a sandboxed Linux machine. "
    "You solve the user's task by calling the tools you are given, one step at a time. "
    "Rules:\n"
    "1. Think briefly before each tool call and say what you expect to learn from it.\n"
    "2. Never invent file contents or command output; read or run to find out.\n"
    "3. Prefer small, verifiable steps. If a command fails, read the error and adapt.\n"
    "4. Keep the working directory clean; write scratch files under ./tmp only.\n"
    "5. When the task is done, answer with a short summary and the final result, and stop "
    "calling tools.\n"
    "6. If the task is impossible with the tools given, say so plainly and explain why.\n"
    "The machine has Python 3.11, git, curl (no network), ripgrep and the usual coreutils. "
    "Files you create persist for the whole task. Tool output longer than 4,000 characters "
    "is truncated; use head/tail/grep to look at large files in parts. Timeouts are 120 "
    "seconds per command. You are evaluated on correctness first, then on the number of "
    "tool calls you needed, so do not repeat a call whose result you already have.\n"
)


def _fn(name: str, description: str, props: dict[str, Any], required: list[str]) -> dict:
    return {"type": "function", "function": {
        "name": name, "description": description,
        "parameters": {"type": "object", "properties": props, "required": required}}}


TOOLS: list[dict[str, Any]] = [
    _fn("terminal", "Run a shell command in the task's sandbox and return its exit code and "
        "combined stdout/stderr. Commands run in the task's working directory with a "
        "120-second timeout; background processes are killed when the command returns.",
        {"command": {"type": "string", "description": "The bash command line to run."},
         "timeout": {"type": "integer", "description": "Seconds before the command is killed.",
                     "minimum": 1, "maximum": 600}}, ["command"]),
    _fn("read_file", "Read a text file from the sandbox. Returns at most 4,000 characters "
        "starting at `offset`; use the offset to page through large files.",
        {"path": {"type": "string", "description": "Path relative to the working directory."},
         "offset": {"type": "integer", "description": "Character offset to start at."}},
        ["path"]),
    _fn("write_file", "Create or overwrite a text file in the sandbox with `content`. Parent "
        "directories are created as needed.",
        {"path": {"type": "string", "description": "Path relative to the working directory."},
         "content": {"type": "string", "description": "The full new content of the file."}},
        ["path", "content"]),
    _fn("search_files", "Search file contents under a directory with a regular expression "
        "(ripgrep syntax). Returns matching lines as path:line:text, at most 200 matches.",
        {"pattern": {"type": "string", "description": "The regular expression."},
         "path": {"type": "string", "description": "Directory to search, default '.'."},
         "glob": {"type": "string", "description": "Only files matching this glob."}},
        ["pattern"]),
    _fn("python", "Execute a Python 3.11 snippet in a fresh interpreter inside the sandbox "
        "and return what it printed. Use it for calculations and quick data processing.",
        {"code": {"type": "string", "description": "The Python source to run."}}, ["code"]),
    _fn("submit", "Submit the final answer to the task. Call it exactly once, at the end.",
        {"answer": {"type": "string", "description": "The final answer."}}, ["answer"]),
]

_WORDS = ("alpha beta gamma delta config parser module handler request cache index record "
          "stream buffer worker queue schema token vector matrix report metric error value "
          "window batch shard replica server client socket thread process signal").split()
_TASKS = (
    "Find every TODO in the repository under ./src, count them per file, and write the "
    "counts as CSV to ./report/todo_counts.csv sorted by count descending.",
    "The test suite in ./tests fails on test_parse_dates. Find the cause in ./src/dates.py, "
    "fix it without changing the public API, and confirm that the tests pass.",
    "Compute the median and the 95th percentile of the latency column of ./data/requests.csv "
    "and report both in milliseconds with two decimals.",
    "Rename the function load_config to read_config across the project, including its "
    "callers and the docs, and make sure nothing else named load_config_* is touched.",
)


def _text(rng: random.Random, n_words: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(n_words))


def _tool_output(rng: random.Random, turn: int) -> str:
    lines = [f"src/{rng.choice(_WORDS)}/{rng.choice(_WORDS)}.py:{rng.randint(1, 900)}: "
             f"{_text(rng, rng.randint(4, 12))}" for _ in range(rng.randint(3, 25))]
    return json.dumps({"exit_code": 0 if rng.random() > 0.15 else 1,
                       "output": "\n".join(lines)[: 600 + 150 * turn]})


def _call(rng: random.Random, rollout: str, turn: int, index: int) -> dict[str, Any]:
    name = rng.choice(("terminal", "terminal", "read_file", "search_files", "python"))
    if name == "terminal":
        args: dict[str, Any] = {"command": f"grep -rn '{rng.choice(_WORDS)}' src | head -"
                                f"{rng.randint(5, 50)}"}
    elif name == "read_file":
        args = {"path": f"src/{rng.choice(_WORDS)}/{rng.choice(_WORDS)}.py"}
    elif name == "search_files":
        args = {"pattern": f"def {rng.choice(_WORDS)}_\\w+", "path": "src"}
    else:
        args = {"code": f"import statistics\nprint(statistics.median([{rng.randint(1, 99)}, "
                        f"{rng.randint(1, 99)}, {rng.randint(1, 99)}]))"}
    return {"id": f"call_{rollout[-14:]}_{turn}_{index}", "type": "function",
            "function": {"name": name, "arguments": json.dumps(args)}}


@dataclass
class Rollout:
    """One rollout: its id, the request body of every turn, and the response body."""

    id: str
    group: int
    requests: list[dict[str, Any]] = field(default_factory=list)
    responses: list[dict[str, Any]] = field(default_factory=list)


def _completion(rng: random.Random, rollout: str, turn: int, message: dict[str, Any],
                prompt_chars: int) -> dict[str, Any]:
    completion_tokens = max(1, len(json.dumps(message)) // 4)
    return {
        "id": f"chatcmpl-{rollout[-12:]}{turn:02d}{rng.getrandbits(32):08x}",
        "object": "chat.completion", "created": 1764400000 + turn, "model": MODEL,
        "system_fingerprint": "fp_synthetic",
        "choices": [{"index": 0, "message": message, "logprobs": None,
                     "finish_reason": "tool_calls" if message.get("tool_calls") else "stop"}],
        "usage": {"prompt_tokens": prompt_chars // 4, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_chars // 4 + completion_tokens},
    }


def build_traffic(interactions: int, *, turns: int = 10, group: int = 8,
                  seed: int = 0) -> list[Rollout]:
    """``interactions // turns`` rollouts of ``turns`` chat requests each, grouped by item."""
    n_rollouts = max(1, interactions // turns)
    rollouts: list[Rollout] = []
    for r in range(n_rollouts):
        item, slot = divmod(r, group)
        rid = f"train-{item:012x}-0-{slot}"
        rng = random.Random(f"{seed}:{rid}")
        task = f"{_TASKS[item % len(_TASKS)]} (item {item}: {_text(random.Random(item), 12)})"
        messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM_PROMPT},
                                          {"role": "user", "content": task}]
        ro = Rollout(rid, item)
        for turn in range(turns):
            body = {"messages": list(messages), "model": MODEL, "max_tokens": 2048, "n": 1,
                    "temperature": 1.0, "tools": TOOLS}
            prompt_chars = sum(len(str(m.get("content") or "")) for m in messages)
            if turn < turns - 1:
                calls = [_call(rng, rid, turn, i) for i in range(1 + (rng.random() < 0.2))]
                message: dict[str, Any] = {
                    "role": "assistant", "tool_calls": calls,
                    "content": f"<think>{_text(rng, rng.randint(15, 60))}</think>"}
                results = [{"role": "tool", "tool_call_id": c["id"],
                            "content": _tool_output(rng, turn)} for c in calls]
            else:
                message = {"role": "assistant", "content": "Done. " + _text(rng, 80)}
                results = []
            ro.requests.append(body)
            ro.responses.append(_completion(rng, rid, turn, message, prompt_chars))
            messages = [*messages, message, *results]
        rollouts.append(ro)
    return rollouts


def groups(rollouts: list[Rollout]) -> list[list[Rollout]]:
    """Rollouts grouped by item, in order (one GRPO group each)."""
    out: dict[int, list[Rollout]] = {}
    for ro in rollouts:
        out.setdefault(ro.group, []).append(ro)
    return list(out.values())


def count(rollouts: list[Rollout]) -> int:
    return sum(len(ro.requests) for ro in rollouts)

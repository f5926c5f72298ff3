"""A user's project holding ``tests/world/answer_env.py`` (a Hermes env whose reward reads the
agent's sandbox), recorded against the scripted endpoint, for the reward-truth tests.

Also the tests' independent oracle: what each rollout's reward must be, recomputed from that
rollout's own recorded agent command and the env's rule — never read off the output checked."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

from hermes_replay import load_cassette
from hermes_replay.cli import main
from hermes_replay.scripted_endpoint import ScriptedEndpoint

WORLD = Path(__file__).resolve().parents[1] / "world"
ENV_REL = "environments/answer_env.py"
CASSETTE_REL = "cassettes/answer_env/process.jsonl"
ARGS = ["process", "--env.total_steps", "2", "--env.group_size", "2",
        "--env.data_path_to_save_groups", "data/groups.jsonl"]
_ECHO = re.compile(r"echo (?:\$\(\((?P<expr>[0-9*]+)\)\)|(?P<lit>\d+)) > answer\.txt\Z")


def make_project(root: Path) -> Path:
    (root / "environments").mkdir(parents=True)
    shutil.copy(WORLD / "answer_env.py", root / ENV_REL)
    (root / "pyproject.toml").write_text("")
    return root


def edit_env(root: Path, old: str, new: str) -> None:
    path = root / ENV_REL
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new))


def record(*extra: str) -> int:
    with ScriptedEndpoint(script=str(WORLD / "answer_script.toml"), seed=0) as ep:
        return main(["record", ENV_REL, *extra, "--endpoint", ep.base_url, "--model", "m",
                     "--server-type", "openai", "--", *ARGS])


def rollouts(path: str | Path = CASSETTE_REL) -> dict[str, Any]:
    return load_cassette(path).rollouts


def written_value(record: Any) -> str | None:
    """What the rollout's own agent left in answer.txt, from its recorded command (None: the
    agent never wrote the file)."""
    value = None
    for call in record.tool_calls:
        if call.source != "agent":
            continue
        match = _ECHO.match(call.arguments["command"])
        assert match, call.arguments
        if match["expr"]:
            base, exp = match["expr"].split("**")
            value = str(int(base) ** int(exp))
        else:
            value = match["lit"]
    return value


def expected_reward(record: Any, answer: int, read: Any = lambda text: text.strip()) -> float:
    """The env's rule (``answer_env.score``) on this rollout's own actions; ``read`` is what the
    reward command makes of the file's text."""
    value = written_value(record)
    used_tool = any(c.source == "agent" for c in record.tool_calls)
    turns = record.outcome["turns_used"]
    correct = value is not None and read(value + "\n") == str(answer)
    return 0.6 * correct + 0.2 * used_tool + 0.2 * (turns <= 2)


ANSWERS = {"pow_3_10": 59049, "pow_2_16": 65536, "pow_7_5": 16807}


def item_answer(record: Any) -> int:
    prompt = next(i.request["body"]["messages"][-1]["content"] for i in record.interactions)
    return ANSWERS[re.search(r"Task (\w+):", prompt)[1]]


def workspace_files(record: Any, cassette: str | Path = CASSETTE_REL) -> dict[str, bytes]:
    """The rollout's recorded workspace: path → content, read back from the store."""
    from hermes_replay._world.rescore import load_workspace
    from hermes_replay._world.store import store_for

    store = store_for(cassette)
    ws = load_workspace(record.outcome["workspace"], store)
    return {f["path"]: store.get(f["sha256"], 1 << 24) for f in ws.files}

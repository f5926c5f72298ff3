"""Inputs for the report's tests, made from the shipped cassettes through the cassette API.

A changed copy of a recording is what a re-recording after a code change looks like: some
rewards moved, a model reply differs at some turn. It is written with ``write_cassette`` (the
same writer the recorder uses), so it is a cassette like any other.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from hermes_replay._cassette import load_cassette, write_cassette
from hermes_replay._cassette.matching import Matcher

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "cassettes"
MULTI = SHIPPED / "multi_signal_env" / "process.jsonl"


def state_of(html: str) -> dict:
    """The JSON the page renders (what the page script reads)."""
    match = re.search(r'<script type="application/json" id="report-state">(.*?)</script>',
                      html, re.S)
    assert match, "the page holds no state"
    return json.loads(match.group(1))


def changed_copy(out: Path, *, reward_of: str, new_reward: float, reply_of: str,
                 reply_turn: int, new_reply: str) -> Path:
    """A copy of MULTI with one reward and one assistant reply changed."""
    cassette = load_cassette(MULTI)
    outcomes = {rid: dict(rec.outcome) for rid, rec in cassette.rollouts.items()}
    outcomes[reward_of]["reward"] = new_reward
    for inter in cassette.interactions:
        if inter.rollout == reply_of and inter.seq == reply_turn:
            message = inter.response["body"]["choices"][0]["message"]
            message["content"] = new_reply
            message["tool_calls"] = None
    write_cassette(out, cassette.header, cassette.interactions, outcomes, cassette.tool_calls)
    return out


def planted_copy(out: Path, rollout: str, text: str) -> Path:
    """A copy of MULTI whose rollout's first user message ends with ``text`` (fingerprints
    made again, as a recording of that conversation would hold them)."""
    cassette = load_cassette(MULTI)
    matcher = Matcher.build()
    done: set[int] = set()  # turns share the message objects they repeat
    for inter in cassette.interactions:
        if inter.rollout == rollout:
            for message in inter.request["body"]["messages"]:
                if message.get("role") == "user" and id(message) not in done:
                    done.add(id(message))
                    message["content"] = f"{message['content']} {text}"
            inter.fingerprint = matcher.fingerprint(inter.request)
    write_cassette(out, cassette.header, cassette.interactions,
                   {rid: rec.outcome for rid, rec in cassette.rollouts.items()},
                   cassette.tool_calls)
    return out


def recordings(folder: Path) -> Path:
    """A copy of the shipped process/evaluate recordings alone: the probe cassettes beside them
    (``probe-*.jsonl``) reuse one rollout id per item in every probe."""
    for path in SHIPPED.glob("*/*.jsonl"):
        if path.stem in ("process", "evaluate"):
            target = folder / path.parent.name / path.name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, target)
    return folder


def project(folder: Path) -> Path:
    """A small project of its own: replaying a folder runs only env files inside the project
    (the folder with a pyproject.toml), so a test's cassettes live beside a copy of the env."""
    (folder / "environments").mkdir(parents=True)
    shutil.copy(ROOT / "environments" / "multi_signal_env.py", folder / "environments")
    (folder / "pyproject.toml").write_text("", encoding="utf-8")
    from hermes_replay._runner.trust import add_trusted

    add_trusted(folder)  # the user's own project (copied here, not recorded here)
    return folder


def tool_result_changed(source: Path, out: Path) -> tuple[str, int]:
    """A copy of ``source`` whose first recorded reward-time tool call answered differently;
    returns that call's (rollout, seq)."""
    cassette = load_cassette(source)
    call = next(c for c in cassette.tool_calls if c.source != "agent")
    call.result = {"exit_code": 1, "output": "FAILED (changed)"}
    call.exit_code = 1
    write_cassette(out, cassette.header, cassette.interactions,
                   {rid: rec.outcome for rid, rec in cassette.rollouts.items()},
                   cassette.tool_calls)
    return str(call.rollout), call.seq

"""The stand-in's script for the plain test environments (``tests/plain_envs``).

Each rule plays a model that is right about half the time, so a group of four sees different
rewards (and a reward change moves some of them): sums in ``\\boxed{}``, strings for a regex,
moves in a grid game as ``<tool_call>`` text. Replies are long enough to pass the length and
trained-token checks community environments apply in ``score()``.
"""

from __future__ import annotations

import random
import re

from hermes_replay.scripted_endpoint import Conversation, Reply, Rule, Script

_SUM = re.compile(r"(\d+)\s*\+\s*(\d+)")
_REGEX = re.compile(r"matches the regular expression\s+(\S+)")
_GRID = re.compile(r"GRID GAME")
_MOVES = ("left", "right", "up", "down")
# a string matching each pattern of managed_regex_env (anchors stripped)
_MATCHING = {"[a-z]+[0-9]+": "abc123", "h[a-z]+o": "hello", "[a-z]+[0-9]{3}": "xyz789",
             "he.*": "hey there"}


def _sum(conv: Conversation, rng: random.Random) -> Reply:
    a, b = map(int, _SUM.search(conv.last_user_text).groups())  # type: ignore[union-attr]
    answer = a + b if rng.random() < 0.5 else a + b + rng.choice((-1, 1, 10))
    return Reply(content=f"Adding {a} and {b} step by step: the units first, then the tens. "
                         f"The total is \\boxed{{{answer}}}.")


def _regex(conv: Conversation, rng: random.Random) -> Reply:
    text = conv.last_user_text
    pattern = _REGEX.search(text).group(1)  # type: ignore[union-attr]
    good = _MATCHING.get(pattern.strip("^$"), "hello")
    word = good if rng.random() < 0.6 else "no match here!"
    return Reply(content=f"I need a string for {pattern}. Thinking about the character "
                         f"classes, my answer is <answer>{word}</answer>")


def _grid(conv: Conversation, rng: random.Random) -> Reply:
    move = rng.choice(_MOVES)
    return Reply(content=f"I look at the board and decide to go {move}.\n"
                         f'<tool_call>{{"name": "move", "arguments": {{"direction": "{move}"}}}}'
                         "</tool_call>")


def plain_script() -> Script:
    return Script("plain-envs", [
        Rule("grid", lambda c: bool(_GRID.search(c.first_user_text + (c.system_prompt or ""))),
             _grid),
        Rule("regex", lambda c: bool(_REGEX.search(c.last_user_text)), _regex),
        Rule("sum", lambda c: bool(_SUM.search(c.last_user_text)), _sum),
        Rule("other", lambda c: True,
             lambda c, rng: Reply(content="I am not sure what is being asked here, sorry.")),
    ])

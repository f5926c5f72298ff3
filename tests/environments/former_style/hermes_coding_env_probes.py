"""Probes for ``hermes_coding_env`` only: what its owner would add beside the unmodified file.

The env's items carry hidden tests but no reference solution, so the built-in ``known-good``
probe has nothing to play. ``reference-solution`` is a known-good probe of its own: it writes a
correct ``solution.py`` with the file tool, then says it is done; it must score high.
"""

from __future__ import annotations

import re

from hermes_replay.probe import ProbeContext, register_probe
from hermes_replay.scripted_endpoint import Reply, Rule

SOLUTIONS = {
    "add": "def add(a, b):\n    return a + b\n",
    "reverse_string": "def reverse_string(s):\n    return s[::-1]\n",
    "factorial": "def factorial(n):\n    out = 1\n    for k in range(2, n + 1):\n"
                 "        out *= k\n    return out\n",
    "max_of_list": "def max_of_list(xs):\n    return max(xs)\n",
}


def _write_solution(conv, rng) -> Reply:
    task = re.search(r"Coding task (\w+):", conv.first_user_text)
    source = SOLUTIONS.get(task.group(1)) if task else None
    if source is None:
        return Reply(content="I do not know this task.")
    return Reply(tool_calls=[("write_file", {"path": "solution.py", "content": source})])


@register_probe("reference-solution", kind="known-good", env="hermes_coding_env",
                description="writes a correct solution.py, then stops; must score high")
def reference_solution(ctx: ProbeContext) -> list[Rule]:
    return [
        Rule("write", lambda c: c.assistant_turn == 0, _write_solution),
        Rule("done", lambda c: True, lambda c, rng: Reply(content="solution.py is written.")),
    ]

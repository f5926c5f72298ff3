"""The ``examples`` script: plays "the model" (and the judge) for the three example environments.

Each environment's prompt is recognised by its wording; unknown prompts fall through to the
``generic`` rules. Rollouts of a group differ (the endpoint gives identical requests different
samples), and some strategies are meant to fail, so rewards vary inside a group:

* ``terminal-test`` ("Coding task <id>: ..."): write ``solution.py`` with a heredoc (correct or
  buggy code) or with ``write_file``, sometimes check the import, then summarise; or answer with
  code in the text and never write the file (fails the hidden tests).
* ``research-judge`` ("Research question: ..."): optionally add a todo item first, then answer
  well, partly or off topic. The judge ("Reference answer: ... Answer to grade: ...") scores by
  word overlap with the reference, and sometimes replies without JSON (the env then falls back to
  keyword overlap).
* ``multi-signal`` ("Problem id: <id>. ..."): compute with the right command, with a typo first
  (a failing call, then a retry), with an off-by-one command, or guess without tools; answer as
  ``ANSWER: n`` or in a sentence.

Which strategy a rollout follows is decided on its first turn; later turns read it back from the
conversation (the history is the only state a stand-in model has).
"""

from __future__ import annotations

import json
import random
import re

from hermes_replay.scripted_endpoint._script import (
    Conversation,
    Reply,
    Rule,
    Script,
)
from hermes_replay.scripted_endpoint.scripts.generic import generic_rules

_WORD = re.compile(r"[a-z0-9]+")

# -- terminal-test -------------------------------------------------------------------------

SOLUTIONS: dict[str, tuple[str, str]] = {
    "add": ("def add(a, b):\n    return a + b\n", "def add(a, b):\n    return a - b\n"),
    "reverse_string": ("def reverse_string(s):\n    return s[::-1]\n",
                       "def reverse_string(s):\n    return s\n"),
    "is_palindrome": ("def is_palindrome(s):\n    return s == s[::-1]\n",
                      "def is_palindrome(s):\n    return True\n"),
    "factorial": ("def factorial(n):\n    out = 1\n    for k in range(2, n + 1):\n"
                  "        out *= k\n    return out\n",
                  "def factorial(n):\n    return n * (n - 1)\n"),
    "count_vowels": ("def count_vowels(s):\n    return sum(c in 'aeiou' for c in s.lower())\n",
                     "def count_vowels(s):\n    return len(s)\n"),
    "max_of_list": ("def max_of_list(xs):\n    return max(xs)\n",
                    "def max_of_list(xs):\n    return xs[0]\n"),
}
_CODING = re.compile(r"Coding task (\w+):")


def _coding_task(conv: Conversation) -> str | None:
    found = _CODING.search(conv.first_user_text)
    return found.group(1) if found else None


def _heredoc(code: str) -> str:
    return f"cat > solution.py << 'EOF'\n{code}EOF"


def _coding_first(conv: Conversation, rng: random.Random) -> Reply:
    task = _coding_task(conv) or "add"
    good, bad = SOLUTIONS.get(task, SOLUTIONS["add"])
    strategy = rng.choices(["heredoc", "write_file", "buggy", "no_tools"], [4, 2, 3, 1])[0]
    if strategy == "heredoc":
        return Reply(tool_calls=[("terminal", {"command": _heredoc(good)})])
    if strategy == "write_file":
        return Reply(content="I'll write the file.",
                     tool_calls=[("write_file", {"path": "solution.py", "content": good})])
    if strategy == "buggy":
        return Reply(tool_calls=[("terminal", {"command": _heredoc(bad)})])
    return Reply(content=f"Here is the code for solution.py:\n```python\n{good}```")


def _coding_next(conv: Conversation, rng: random.Random) -> Reply:
    calls = conv.tool_calls_made
    checked = any("import solution" in str(args.get("command", "")) for _, args in calls)
    if not checked and rng.random() < 0.5:
        return Reply(tool_calls=[("terminal", {"command": "python3 -c \"import solution; "
                                                          "print('imported')\""})])
    return Reply(content=f"Wrote solution.py for task {_coding_task(conv)}.")


# -- research-judge ------------------------------------------------------------------------

ANSWERS: dict[str, tuple[str, str, str]] = {
    "sky": ("Sunlight is scattered by air molecules, and shorter blue wavelengths scatter much "
            "more (Rayleigh scattering), so blue light reaches us from every direction.",
            "Light scatters in the air and blue is scattered the most.",
            "The sky reflects the color of the ocean."),
    "seasons": ("Earth's axis is tilted about 23.5 degrees, so over the orbit each hemisphere "
                "gets sunlight at a changing angle and for a changing duration.",
                "The tilt of the axis changes how much sunlight we get.",
                "Earth is closer to the sun in summer."),
    "vaccines": ("A vaccine presents antigens of a pathogen so the immune system produces "
                 "antibodies and memory cells without causing the disease.",
                 "They teach the immune system to make antibodies.",
                 "Vaccines kill every germ in the body."),
    "ocean": ("Rivers carry minerals dissolved from eroded rocks into the sea; evaporation "
              "removes water and leaves salts such as sodium chloride behind.",
              "Rivers bring minerals from rocks into the ocean.",
              "Fish make the ocean salty."),
    "compiler": ("A compiler translates source code into machine code or bytecode, checking "
                 "syntax and types and optimizing the program.",
                 "It translates source code so the machine can run it.",
                 "A compiler is a kind of text editor."),
    "photosynthesis": ("With chlorophyll, plants use light energy to turn carbon dioxide and "
                       "water into glucose and oxygen, storing energy in chemical bonds.",
                       "Plants use light to make glucose.",
                       "Plants absorb energy from the soil."),
}


def _research_key(conv: Conversation) -> str:
    text = conv.first_user_text.lower()
    for key in ANSWERS:
        if key in text or (key == "vaccines" and "vaccine" in text):
            return key
    return "sky"


def _research_answer(conv: Conversation, rng: random.Random) -> Reply:
    good, partial, wrong = ANSWERS[_research_key(conv)]
    return Reply(content=rng.choices([good, partial, wrong], [4, 3, 2])[0])


def _research_first(conv: Conversation, rng: random.Random) -> Reply:
    if rng.random() < 0.4:
        return Reply(tool_calls=[("todo", {"action": "add",
                                           "text": "Recall the mechanism, then answer."})])
    return _research_answer(conv, rng)


_GRADED = re.compile(r"Reference answer:(.*?)Answer to grade:(.*?)(?:Score 0-10|$)", re.DOTALL)


def _judge(conv: Conversation, rng: random.Random) -> Reply:
    found = _GRADED.search(conv.last_user_text)
    reference, answer = (found.group(1), found.group(2)) if found else ("", "")
    ref_words = {w for w in _WORD.findall(reference.lower()) if len(w) > 3}
    ans_words = set(_WORD.findall(answer.lower()))
    overlap = len(ref_words & ans_words) / max(1, len(ref_words))
    if rng.random() < 0.15:  # a judge that forgets the format: the env must fall back
        return Reply(content=f"I would rate this answer about {round(overlap * 10)} out of ten.")
    score = max(0, min(10, round(overlap * 10) + rng.choice((-1, 0, 0, 1))))
    reason = "Covers the reference." if score >= 6 else "Misses key points of the reference."
    return Reply(content=json.dumps({"score": score, "reason": reason}))


# -- multi-signal --------------------------------------------------------------------------

PROBLEMS: dict[str, tuple[str, str, str]] = {
    # id: (right command, off-by-one command, answer)
    "sum_1_100": ("print(sum(range(1, 101)))", "print(sum(range(1, 100)))", "5050"),
    "squares_1_10": ("print(sum(k * k for k in range(1, 11)))",
                     "print(sum(k * k for k in range(1, 10)))", "385"),
    "pow_2_20": ("print(2 ** 20)", "print(2 ** 19)", "1048576"),
    "fact_10": ("import math; print(math.factorial(10))",
                "import math; print(math.factorial(9))", "3628800"),
    "primes_below_50": ("print(sum(all(n % d for d in range(2, n)) for n in range(2, 50)))",
                        "print(sum(all(n % d for d in range(2, n)) for n in range(1, 50)))",
                        "15"),
    "len_hermes_x7": ("print(len('hermes' * 7))", "print(len('hermes' * 6))", "42"),
}
_PROBLEM = re.compile(r"Problem id: (\w+)\.")


def _problem(conv: Conversation) -> tuple[str, str, str]:
    found = _PROBLEM.search(conv.first_user_text)
    return PROBLEMS.get(found.group(1) if found else "", PROBLEMS["sum_1_100"])


def _py(code: str) -> str:
    return f"python3 -c \"{code}\""


def _multi_first(conv: Conversation, rng: random.Random) -> Reply:
    right, wrong, answer = _problem(conv)
    strategy = rng.choices(["right", "typo", "wrong", "guess"], [4, 2, 2, 2])[0]
    if strategy == "right":
        return Reply(tool_calls=[("terminal", {"command": _py(right)})])
    if strategy == "typo":
        return Reply(tool_calls=[("terminal", {"command": f"pyhton3 -c \"{right}\""})])
    if strategy == "wrong":
        return Reply(tool_calls=[("terminal", {"command": _py(wrong)})])
    guess = answer if rng.random() < 0.5 else str(int(answer) + 1)
    return Reply(content=f"ANSWER: {guess}")


def _multi_next(conv: Conversation, rng: random.Random) -> Reply:
    right, _, _ = _problem(conv)
    try:
        result = json.loads(str(conv.last_message.get("content") or "{}"))
    except ValueError:
        result = {}
    if not isinstance(result, dict) or result.get("exit_code", 1) != 0:
        return Reply(tool_calls=[("terminal", {"command": _py(right)})])
    value = str(result.get("output", "")).strip()
    if rng.random() < 0.7:
        return Reply(content=f"ANSWER: {value}")
    return Reply(content=f"I ran the computation and the result is ANSWER: {value}.")


def _first_turn(marker: str):
    return lambda c: marker in c.first_user_text and c.last_message.get("role") == "user"


def _after_tool(marker: str):
    return lambda c: marker in c.first_user_text and c.last_message.get("role") == "tool"


def example_rules() -> list[Rule]:
    return [
        Rule("research-judge/judge",
             lambda c: c.is_judge and "Answer to grade:" in c.last_user_text, _judge),
        Rule("terminal-test/first", _first_turn("Coding task "), _coding_first),
        Rule("terminal-test/next", _after_tool("Coding task "), _coding_next),
        Rule("research-judge/first", _first_turn("Research question:"), _research_first),
        Rule("research-judge/answer", _after_tool("Research question:"), _research_answer),
        Rule("multi-signal/first", _first_turn("Problem id:"), _multi_first),
        Rule("multi-signal/next", _after_tool("Problem id:"), _multi_next),
    ]


def examples() -> Script:
    return Script("examples", [*example_rules(), *generic_rules()])

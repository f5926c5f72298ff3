"""Deterministic training text for the project's tiny BPE tokenizer.

The tokenizer only has to be *plausible* for agent traffic (prose, JSON, code, shell, tool-call
markup, numbers) so that token counts and masks in tests look like real ones. Generating the text
from a fixed seed keeps the repository small and makes the rebuild byte-identical: the same seed
always yields the same lines in the same order.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator

SEED = 20260
LINES_PER_KIND = 200

_SUBJECTS = [
    "the agent", "the user", "the server", "a rollout", "the trainer", "the cassette", "the model",
    "the sandbox", "the parser", "this tool", "the environment", "our script", "the judge",
    "the scheduler", "the file system", "a request", "the response", "the reward",
]
_VERBS = [
    "reads", "writes", "returns", "records", "replays", "checks", "calls", "parses", "scores",
    "updates", "creates", "deletes", "finds", "sends", "receives", "compares", "loads", "saves",
]
_OBJECTS = [
    "the file", "a list of numbers", "the JSON answer", "every message", "the final result",
    "a short summary", "the weather report", "the test output", "the tool call", "the token ids",
    "the prompt", "a new directory", "the error message", "the configuration", "the score",
]
_TAILS = [
    "before the next turn.", "and then stops.", "without a network.", "in under a second.",
    "for each rollout.", "when the user asks.", "so the test is stable.", "after the timeout.",
    "with a clear error.", "as described above.", "because it is deterministic.", "again.",
]
_QUESTIONS = [
    "What is the capital of France?", "How many files are in this directory?",
    "Can you compute the sum of these numbers?", "Please write a function that reverses a list.",
    "What's the weather like in Paris today?", "Why did the test fail?",
    "Summarize the following text in one sentence.", "Which tool should I use to read a file?",
]
_WORDS = [
    "path", "content", "query", "city", "units", "command", "timeout", "name", "value", "items",
    "limit", "offset", "pattern", "expression", "language", "code", "url", "text", "id", "mode",
]
_TOOLS = [
    "read_file", "write_file", "terminal", "web_search", "get_weather", "calculator", "python",
    "search_files", "patch", "list_directory", "fetch_url", "todo",
]
_SHELL = [
    "ls -la {d}", "cat {d}/README.md", "grep -rn '{w}' {d}", "python -m pytest -q {d}",
    "mkdir -p {d}/{w}", "echo '{w}' > {d}/{w}.txt", "wc -l {d}/*.py", "git status --short",
    "find {d} -name '*.json'", "pip install {w}", "cd {d} && make test", "rm -rf {d}/tmp",
]
_DIRS = ["/tmp/work", "/home/user", "src", "tests", "./data", "/var/log", "environments"]
_CODE = [
    "def {f}({a}, {b}):\n    return {a} + {b}\n",
    "for {a} in range({n}):\n    print({a} * {n})\n",
    "import json\n\n\ndef {f}({a}: str) -> dict:\n    return json.loads({a})\n",
    "class {F}:\n    def __init__(self, {a}):\n        self.{a} = {a}\n",
    "if {a} is None:\n    raise ValueError(\"{a} must be set\")\n",
    "const {a} = await fetch(`/api/{b}`);\nconsole.log({a}.status);\n",
    "{a} = [x ** 2 for x in range({n}) if x % 2 == 0]\n",
    "with open(\"{b}.txt\", encoding=\"utf-8\") as fh:\n    {a} = fh.read()\n",
]

_LEXICON = """
about above across act action add after again against age ago agree air all allow almost alone
along already also always among amount and animal another answer any appear apply area argue arm
around arrive art ask attack attention avoid away back bad bag ball bank base bear beat
beautiful because become bed before begin behind believe best better between beyond big bill bit
black blood blue board body book born both box boy break bring brother build building business
buy call camera campaign can car card care carry case catch cause cell center central century
certain chair chance change charge check child choice choose church city civil claim class clear
close coach cold collection college color come common community company compare computer concern
condition conference consider contain continue control cost could country couple course court
cover create crime cultural culture cup current customer cut dark data daughter day dead deal
death debate decade decide decision deep defense degree describe design despite detail determine
develop difference different difficult dinner direction discover discuss disease doctor dog door
down draw dream drive drop drug during each early east easy eat economy edge education effect
effort eight either election else employee end energy enjoy enough enter entire environment
especially establish even evening event ever every evidence exactly example executive exist
expect experience expert explain eye face fact factor fail fall family far fast father fear
federal feel field fight figure fill film final finally financial find fine finger finish fire
firm first fish five floor fly focus follow food foot force foreign forget form former forward
four free friend front full fund future game garden gas general generation girl give glass goal
good government great green ground group grow growth guess gun guy hair half hand hang happen
happy hard have head health hear heart heat heavy help her here herself high him history hit
hold home hope hospital hot hotel hour house however huge human hundred husband idea identify
image imagine impact important improve include including increase indeed indicate individual
industry information inside instead institution interest interesting international interview
into investment involve issue item itself job join just keep key kid kill kind kitchen know
knowledge land language large last late later laugh law lawyer lay lead leader learn least leave
left leg legal less let letter level lie life light like likely line list listen little live
local long look lose loss lot love low machine magazine main maintain major majority make manage
management manager many market marriage material matter may maybe mean measure media medical
meet meeting member memory mention method middle might military million mind minute miss mission
modern moment money month more morning most mother mouth move movement movie much music must
myself nation national natural nature near nearly necessary need network never news newspaper
next nice night none nor north note nothing notice now number occur off offer office officer
official often oil old once one only onto open operation opportunity option order organization
other others our out outside over own owner page pain painting paper parent part participant
particular particularly partner party pass past patient pattern pay peace people per perform
performance perhaps period person personal phone physical pick picture piece place plan plant
play player point police policy political politics poor popular population position positive
possible power practice prepare present president pressure pretty prevent price private probably
problem process produce product production professional professor program project property
protect prove provide public pull purpose push put quality question quickly quite race radio
raise range rate rather reach read ready real reality realize really reason receive recent
recently recognize record red reduce reflect region relate relationship religious remain
remember remove report represent require research resource respond response responsibility rest
result return reveal rich right rise risk road rock role room rule run safe same save say scene
school science scientist score sea season seat second section security see seek seem sell send
senior sense series serious serve service set seven several shake share she shoot short shot
should shoulder show side sign significant similar simple simply since sing single sister sit
site situation six size skill skin small smile social society soldier some somebody someone
something sometimes son song soon sort sound source south southern space speak special specific
speech spend sport spring staff stage stand standard star start state statement station stay
step still stock stop store story strategy street strong structure student study stuff style
subject success successful such suddenly suffer suggest summer support sure surface system table
take talk task tax teach teacher team technology television tell ten tend term test than thank
that their them themselves then theory there these they thing think third this those though
thought thousand threat three through throughout throw thus time today together tonight too top
total tough toward town trade traditional training travel treat treatment tree trial trip
trouble true truth try turn two type under understand unit until upon usually value various very
victim view violence visit voice vote wait walk wall want war watch water way weapon wear week
weight well west western what whatever when where whether which while white who whole whom whose
why wide wife will win wind window wish with within without woman wonder word work worker world
worry would write writer wrong yard yeah year yes yet you young your yourself
""".split()
_PREFIXES = ["", "", "", "re", "un", "pre", "dis", "over", "sub", "inter", "non", "auto", "multi"]
_SUFFIXES = ["", "", "", "s", "ed", "ing", "er", "ly", "ment", "ness", "able", "tion", "ize", "ful"]


def _sentence(rng: random.Random) -> str:
    parts = [rng.choice(_SUBJECTS), rng.choice(_VERBS), rng.choice(_OBJECTS), rng.choice(_TAILS)]
    text = " ".join(parts)
    return text[0].upper() + text[1:]


def _prose(rng: random.Random) -> str:
    """Loose English-like text over a general lexicon, with common affixes."""
    words = [
        rng.choice(_PREFIXES) + rng.choice(_LEXICON) + rng.choice(_SUFFIXES)
        for _ in range(rng.randint(8, 20))
    ]
    text = " ".join(words)
    return text[0].upper() + text[1:] + rng.choice([".", ".", "?", "!", ",", ";"])


def _identifiers(rng: random.Random) -> str:
    """snake_case, CamelCase and dotted names as they appear in code and tool schemas."""
    out = []
    for _ in range(6):
        parts = rng.sample(_LEXICON, rng.randint(1, 3))
        style = rng.randint(0, 2)
        if style == 0:
            out.append("_".join(parts))
        elif style == 1:
            out.append("".join(p.title() for p in parts))
        else:
            out.append(".".join(parts) + "()")
    return " ".join(out)


def _arguments(rng: random.Random) -> dict[str, object]:
    keys = rng.sample(_WORDS, rng.randint(1, 3))
    values: list[object] = [
        rng.randint(0, 10_000), round(rng.uniform(-100, 100), 2), rng.choice(_WORDS),
        rng.choice(_DIRS), rng.choice([True, False]), [rng.randint(0, 99) for _ in range(3)],
    ]
    return {k: rng.choice(values) for k in keys}


def _tool_schema(rng: random.Random) -> dict[str, object]:
    props = {
        w: {"type": rng.choice(["string", "integer", "number", "boolean"]), "description": w}
        for w in rng.sample(_WORDS, 2)
    }
    return {
        "type": "function",
        "function": {
            "name": rng.choice(_TOOLS),
            "description": _sentence(rng),
            "parameters": {"type": "object", "properties": props, "required": list(props)[:1]},
        },
    }


def _code(rng: random.Random) -> str:
    a, b = rng.sample(_WORDS, 2)
    f = rng.choice(_TOOLS)
    return rng.choice(_CODE).format(
        a=a, b=b, f=f, F="".join(p.title() for p in f.split("_")), n=rng.randint(2, 50)
    )


def _chatml(rng: random.Random) -> str:
    call = {"name": rng.choice(_TOOLS), "arguments": _arguments(rng)}
    result = json.dumps({"output": _sentence(rng), "exit_code": rng.randint(0, 2)})
    return (
        f"<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
        f"<|im_start|>user\n{rng.choice(_QUESTIONS)}<|im_end|>\n"
        f"<|im_start|>assistant\n<think>\n{_sentence(rng)}\n</think>\n\n"
        f"<tool_call>\n{json.dumps(call)}\n</tool_call><|im_end|>\n"
        f"<|im_start|>tool\n<tool_response>\n{result}\n</tool_response><|im_end|>\n"
        f"<|im_start|>assistant\n{_sentence(rng)}<|im_end|>\n"
    )


def corpus_lines(seed: int = SEED, per_kind: int = LINES_PER_KIND) -> Iterator[str]:
    """Yield the training documents in a fixed order (same seed, same text, same tokenizer)."""
    rng = random.Random(seed)
    kinds = [
        lambda: " ".join(_sentence(rng) for _ in range(rng.randint(1, 4))),
        lambda: rng.choice(_QUESTIONS) + " " + _sentence(rng),
        lambda: " ".join(_prose(rng) for _ in range(3)),
        lambda: _identifiers(rng),
        lambda: json.dumps(_arguments(rng)),
        lambda: json.dumps([_tool_schema(rng)]),
        lambda: _code(rng),
        lambda: "$ " + rng.choice(_SHELL).format(d=rng.choice(_DIRS), w=rng.choice(_WORDS)),
        lambda: " ".join(str(rng.randint(0, 10 ** rng.randint(1, 7))) for _ in range(8)),
        lambda: _chatml(rng),
    ]
    for _ in range(per_kind):
        for kind in kinds:
            yield kind()


"""The scripted endpoint — a stand-in for a model, not a model.

No model weights can be had where this project is built and tested, so the one thing that plays
the model is this: a real HTTP server on 127.0.0.1 that speaks what atroposlib's servers speak
(OpenAI ``/v1/chat/completions`` with tools and SSE streaming, ``/v1/completions``, vLLM- and
SGLang-style ``/generate``, ``/health``, ``/v1/models``) and answers from a *script* — ordered
rules mapping the conversation to a reply. Answers are seeded and reproducible, yet identical
requests at temperature > 0 get different samples (see ``_sampling`` for the exact rule).
Latency and faults (5xx, timeout, dropped connection) can be injected.

Example::

    from hermes_replay.scripted_endpoint import ScriptedEndpoint

    with ScriptedEndpoint(script="generic", seed=0) as ep:
        client = openai.OpenAI(base_url=ep.base_url, api_key="x")
        ...

Writing rules (first matching rule answers; ``rng`` is the sample's seeded ``random.Random``)::

    from hermes_replay.scripted_endpoint import Reply, Rule, Script, register_script
    from hermes_replay.scripted_endpoint.scripts.generic import generic_rules

    def _add(conv, rng):
        a, b = map(int, conv.last_user_text.split("+"))
        return Reply(tool_calls=[("calculator", {"expression": f"{a}+{b}"})])

    @register_script("adder")
    def adder() -> Script:
        return Script("adder", [
            Rule("add", lambda c: "+" in c.last_user_text and not c.tool_results, _add),
            *generic_rules(),  # judge / tool call / answer-from-results / plain fallbacks
        ])

Or, without Python, a script file (TOML or JSON: rules matched on the conversation, replies with
text or tool calls) — ``ScriptedEndpoint(script="my_env.toml")`` or ``hermes-replay
scripted-endpoint --script my_env.toml``; the format is in ``docs/scripted-endpoint.md``.

Responses carry ``"system_fingerprint": "hermes-replay-scripted"`` so nothing recorded against
the stand-in can be mistaken for a model's output.

Room ``scripted_endpoint`` (public): may import the foundation and ``_tokenizers`` only;
it knows nothing of cassettes or sessions, so it serves any client, recorded or not.
"""

from hermes_replay.scripted_endpoint._faults import FAULT_KINDS, FaultPlan
from hermes_replay.scripted_endpoint._openai import SYSTEM_FINGERPRINT
from hermes_replay.scripted_endpoint._registry import (
    get_script,
    list_scripts,
    load_script,
    register_script,
    resolve_script,
)
from hermes_replay.scripted_endpoint._script import (
    Conversation,
    NoRuleMatched,
    Reply,
    Rule,
    Script,
)
from hermes_replay.scripted_endpoint._script_file import ScriptFileError
from hermes_replay.scripted_endpoint._server import ScriptedEndpoint

__all__ = [
    "FAULT_KINDS",
    "SYSTEM_FINGERPRINT",
    "Conversation",
    "FaultPlan",
    "NoRuleMatched",
    "Reply",
    "Rule",
    "Script",
    "ScriptFileError",
    "ScriptedEndpoint",
    "get_script",
    "list_scripts",
    "load_script",
    "register_script",
    "resolve_script",
]

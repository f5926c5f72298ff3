"""A cassette's rollouts as a readable text transcript (``hermes-replay show``).

System/user/assistant/tool messages in order, tool calls with pretty JSON arguments, tool
results (long ones cut, with a note), reasoning, then the recorded tool calls (what ran, exit
code, duration; the reward's own calls with their results), reward and outcome; Phase-2 token
ids folded into their decoded text. The lines are plain text colored by the caller's
``Style``; which rollouts to show (``pick_rollouts``) and a plain env's shared group traffic
(``with_shared_traffic``) are decided here too.
"""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

from hermes_replay._cassette.messages import (
    assistant_from_response,
    text_of,
    tool_calls_of,
)
from hermes_replay._terminal.render import Style, fmt_reward, sanitize, truncate

__all__ = ["TEXT_LIMIT", "TOOL_RESULT_LIMIT", "Transcript", "edited_by_rollout",
           "offered_tools", "pick_rollouts", "render_turn", "with_shared_traffic"]

TOOL_RESULT_LIMIT = 1200
TEXT_LIMIT = 4000
_ROLE_STYLE = {"system": "magenta", "user": "green", "assistant": "cyan", "tool": "yellow"}



class Transcript:
    def __init__(self, style: Style, *, full: bool) -> None:
        self.s = style
        self.full = full
        self.out: list[str] = []
        self._call_names: dict[str, str] = {}  # tool_call_id -> tool name, to title results
        self.decode: Any = None  # token ids -> text, for Phase-2 bodies (``_tokens``)

    def _cut(self, text: str, limit: int) -> str:
        if self.full:
            return text
        kept, cut = truncate(text, limit)
        if cut:
            kept += "\n" + self.s(
                f"… [{cut} more characters not shown; --full shows everything]", "dim"
            )
        return kept

    def _rule(self, title: str, color: str | None = None) -> None:
        title = sanitize(title)
        bar = f"── {title} " + "─" * max(3, 60 - len(title))
        self.out.append(self.s(bar, color, "bold") if color else self.s(bar, "bold"))

    def _body(self, text: str) -> None:
        self.out.extend("  " + sanitize(line) for line in text.splitlines() or [""])

    def message(self, msg: dict[str, Any], turn: int | None = None) -> None:
        role = str(msg.get("role", "?"))
        title = role if turn is None else f"{role} · turn {turn + 1}"  # seq -> 1-based
        if role == "tool":
            name = msg.get("name") or self._call_names.get(str(msg.get("tool_call_id")))
            title = f"tool result{' · ' + name if name else ''}"
            if msg.get("tool_call_id"):
                title += f" ({msg['tool_call_id']})"
        self._rule(title, _ROLE_STYLE.get(role))
        reasoning = msg.get("reasoning_content") or msg.get("reasoning")
        if reasoning:
            self.out.append("  " + self.s("reasoning:", "dim"))
            self.out.extend("    " + self.s(sanitize(line), "dim")
                            for line in self._cut(text_of(reasoning), TEXT_LIMIT).splitlines())
        text = text_of(msg.get("content"))
        if role == "tool":
            text = _pretty_tool_result(text)
        limit = TOOL_RESULT_LIMIT if role == "tool" else TEXT_LIMIT
        if text:
            self._body(self._cut(text, limit))
        for call in tool_calls_of(msg):
            fn = call.get("function") or {}
            if call.get("id") and fn.get("name"):
                self._call_names[str(call["id"])] = str(fn["name"])
            head = f"→ tool call {fn.get('name', '?')}"
            if call.get("id"):
                head += f"  (id {call['id']})"
            self.out.append("  " + self.s(sanitize(head), "blue", "bold"))
            args_text = _pretty_args(fn.get("arguments"))
            self.out.extend("    " + sanitize(line) for line in args_text.splitlines())
        if not text and not tool_calls_of(msg) and not reasoning:
            self.out.append("  " + self.s("(empty)", "dim"))

    def messages(self, msgs: list[dict[str, Any]], turns: list[int] | None = None) -> None:
        """``turns``: the request index of each assistant message in order (default 0, 1 …)."""
        k = 0
        for msg in msgs:
            if msg.get("role") == "assistant":
                self.message(msg, turns[k] if turns and k < len(turns) else k)
                k += 1
            else:
                self.message(msg)

    def tool_calls(self, calls: list[Any]) -> None:
        """The recorded tool calls: each agent call in one line (its result is in the
        transcript above), each reward-time call with its arguments and result."""
        if not calls:
            return
        self._rule(f"recorded tool calls ({len(calls)})", "yellow")
        for call in calls:
            code = "" if call.exit_code is None else f" · exit {call.exit_code}"
            raised = "" if call.raised is None else f" · raised {call.raised.get('type')}"
            where = ("reward" if call.source != "agent" else f"after turn {call.turn + 1}"
                     if call.turn >= 0 else "before the first turn")
            origin = {"rescored": " · re-scored offline in the recorded workspace",
                      "rerun": " · run again to rebuild the world"}.get(call.origin or "", "")
            head = (f"#{call.seq} {call.name} · {where}{code}{raised} · "
                    f"{call.duration_ms:.0f} ms{origin}")
            self.out.append("  " + self.s(sanitize(head), "yellow"))
            if call.source == "agent":
                one_line = json.dumps(call.arguments, ensure_ascii=False)
                self.out.append("    " + sanitize(one_line if self.full or len(one_line) < 160
                                                  else one_line[:159] + "…"))
                continue
            args = _pretty_args(call.arguments)
            self.out.extend("    " + sanitize(line) for line in args.splitlines())
            if call.raised is None and call.result is not None:
                result = call.result if isinstance(call.result, str) else json.dumps(
                    call.result, ensure_ascii=False)
                self.out.append("    " + self.s("→", "dim"))
                self.out.extend("    " + sanitize(line) for line in
                                self._cut(_pretty_tool_result(result),
                                          TOOL_RESULT_LIMIT).splitlines())

    def outcome(self, outcome: dict[str, Any]) -> None:
        from hermes_replay._cassette.parts import clean_parts, parts_text

        self._rule("outcome")
        if not outcome:
            self.out.append("  " + self.s("no outcome recorded (the rollout did not report one)",
                                          "dim"))
            return
        parts = [f"reward {fmt_reward(outcome.get('reward'))}"]
        if "turns_used" in outcome:
            parts.append(f"turns {outcome['turns_used']}")
        if "finished_naturally" in outcome:
            parts.append("finished naturally" if outcome["finished_naturally"]
                         else "stopped at the turn limit")
        if "tool_errors" in outcome:
            parts.append(f"tool errors {_count(outcome['tool_errors'])}")
        for key in ("phase", "group"):
            if outcome.get(key) is not None:
                parts.append(f"{key} {outcome[key]}")
        self.out.append("  " + sanitize(" · ".join(parts)))
        named = clean_parts(outcome.get("parts"))
        if named:  # the reward's named parts, beside its sum
            self.out.append("  " + sanitize(f"reward parts: {parts_text(named)}"))
        rest = {k: v for k, v in outcome.items() if k not in {
            "reward", "turns_used", "finished_naturally", "tool_errors", "phase", "group",
            "messages", "reasoning_per_turn", "parts", "workspace"}}
        for key, value in rest.items():
            if value is None:
                continue
            text = self._cut(json.dumps(value, ensure_ascii=False), 300)
            self.out.append(sanitize(f"  {key}: {text}"))


def _count(value: Any) -> int:
    return len(value) if isinstance(value, (list, tuple)) else int(value or 0)


def _pretty_args(arguments: Any) -> str:
    """Tool arguments as ``key: value`` lines; multi-line strings (code, shell heredocs) as
    indented blocks instead of one JSON line full of ``\\n``."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return arguments
    return _pretty_mapping(arguments) if isinstance(arguments, dict) else json.dumps(
        arguments, indent=2, ensure_ascii=False)


def _pretty_mapping(data: dict[str, Any]) -> str:
    lines: list[str] = []
    for key, value in data.items():
        if isinstance(value, str) and "\n" in value:
            lines.append(f"{key}: |")
            lines.extend("  " + line for line in value.rstrip("\n").splitlines())
        elif isinstance(value, (dict, list)) and value:
            lines.append(f"{key}:")
            lines.extend("  " + line for line in
                         json.dumps(value, indent=2, ensure_ascii=False).splitlines())
        else:
            lines.append(f"{key}: {json.dumps(value, ensure_ascii=False)}")
    return "\n".join(lines) if lines else "{}"


def _pretty_tool_result(text: str) -> str:
    """A JSON-object tool result (``{"output": …, "exit_code": …}``) as readable lines."""
    stripped = text.strip()
    if stripped.startswith("{"):
        try:
            data = json.loads(stripped)
        except ValueError:
            return text
        if isinstance(data, dict):
            return _pretty_mapping(data)
    return text


def render_turn(t: Transcript, record: Any, turn: int) -> None:
    inter = record.interactions[turn]
    body = inter.request.get("body")
    t.out.append(t.s(f"{inter.request.get('method', 'POST')} {inter.request.get('path', '')}"
                     f" · {inter.kind} · {inter.duration_ms:.0f} ms", "dim"))
    if isinstance(body, dict) and isinstance(body.get("messages"), list):
        prev: list[Any] = []
        if turn > 0:
            pbody = record.interactions[turn - 1].request.get("body")
            prev = pbody.get("messages") if isinstance(pbody, dict) else []
        msgs = body["messages"]
        start = len(prev) if msgs[: len(prev)] == prev else 0
        if start:
            t.out.append(t.s(f"  ({start} earlier messages not repeated)", "dim"))
        params = {k: v for k, v in body.items() if k not in ("messages", "tools")}
        if body.get("tools"):
            params["tools"] = [(x.get("function") or {}).get("name") for x in body["tools"]
                               if isinstance(x, dict)]
        t.out.append("  " + t.s("params: " + json.dumps(params, ensure_ascii=False), "dim"))
        for msg in msgs[start:]:
            if isinstance(msg, dict):
                t.message(msg)
        reply = assistant_from_response(inter.response)
        if reply:
            t.message(reply, turn)
        return
    if _render_text_turn(t, inter, turn) or _render_generate_turn(t, inter, turn):
        return
    from hermes_replay._tokenizers.fold import fold_token_lists

    decode = t.decode
    t._rule(f"request · {inter.kind} · turn {turn + 1}")
    t._body(t._cut(json.dumps(fold_token_lists(body, decode), indent=2, ensure_ascii=False),
                   TEXT_LIMIT))
    t._rule(f"response · status {inter.response.get('status')}")
    resp = inter.response.get("body", inter.response.get("text", inter.response.get("chunks")))
    t._body(t._cut(json.dumps(fold_token_lists(resp, decode), indent=2, ensure_ascii=False),
                   TEXT_LIMIT))


def _prompt_text(body: Any, decode: Any) -> str | None:
    """The prompt of a completion request as text (token ids decoded)."""
    prompt = body.get("prompt") if isinstance(body, dict) else None
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)):
        prompt = prompt[0]
    if isinstance(prompt, list) and prompt and all(isinstance(x, int) for x in prompt):
        return decode(prompt) if decode is not None else None
    return prompt if isinstance(prompt, str) else None


def _completion_texts(response: dict[str, Any]) -> list[str] | None:
    """Each sample's text of a completion reply."""
    body = response.get("body")
    choices = body.get("choices") if isinstance(body, dict) else None
    if not isinstance(choices, list):
        return None
    texts = [c.get("text") for c in choices if isinstance(c, dict)]
    return texts if texts and all(isinstance(x, str) for x in texts) else None


def _render_text_turn(t: Transcript, inter: Any, turn: int) -> bool:
    """A completion-route turn (``/v1/completions``) as its prompt and completion text, not
    raw JSON; False when either cannot be read as text. (``/generate`` keeps its folded JSON:
    its token ids, logprobs and finish reasons are what a token-level env is judged by.)"""
    if inter.kind != "completion":
        return False
    body = inter.request.get("body")
    prompt = _prompt_text(body, t.decode)
    texts = _completion_texts(inter.response) if isinstance(inter.response, dict) else None
    if prompt is None or texts is None:
        return False
    params = {k: v for k, v in body.items() if k != "prompt"}
    t.out.append("  " + t.s("params: " + json.dumps(params, ensure_ascii=False)[:400], "dim"))
    t._rule(f"prompt · {inter.kind} · turn {turn + 1}", "cyan")
    t._body(t._cut(prompt, TEXT_LIMIT))
    for k, text in enumerate(texts):
        which = f" · sample {k + 1} of {len(texts)}" if len(texts) > 1 else ""
        t._rule(f"completion · turn {turn + 1}{which}", "green")
        t._body(t._cut(text, TEXT_LIMIT) if text else t.s("(empty)", "dim"))
    return True


def _generate_prompt_ids(body: Any) -> list[int] | None:
    """The prompt token ids of a vLLM (``prompt.prompt_token_ids``) or SGLang (``input_ids``)
    ``/generate`` request."""
    if not isinstance(body, dict):
        return None
    prompt = body.get("prompt")
    ids = prompt.get("prompt_token_ids") if isinstance(prompt, dict) else body.get("input_ids")
    ok = isinstance(ids, list) and all(isinstance(i, int) and not isinstance(i, bool)
                                       for i in ids)
    return ids if ok else None


def _generate_samples(body: Any) -> list[tuple[list[int], list[float], Any]] | None:
    """Each sample of a vLLM ``/generate`` reply as (token ids, logprobs, finish reason): the
    ids are read from the logprob entries (``[{"id": lp}]`` per position), which is what
    atroposlib trains on, not from any ``text`` field the server adds."""
    if not isinstance(body, dict) or not isinstance(body.get("logprobs"), list):
        return None
    reasons = body.get("finish_reasons")
    reasons = reasons if isinstance(reasons, list) else []
    samples = []
    for k, entries in enumerate(body["logprobs"]):
        if not isinstance(entries, list):
            return None
        ids: list[int] = []
        lps: list[float] = []
        for entry in entries:
            while isinstance(entry, list) and len(entry) == 1:
                entry = entry[0]
            if not (isinstance(entry, dict) and len(entry) == 1):
                return None
            [(tid, lp)] = entry.items()
            if not (str(tid).isdigit() and isinstance(lp, (int, float))):
                return None
            ids.append(int(tid))
            lps.append(float(lp))
        samples.append((ids, lps, reasons[k] if k < len(reasons) else None))
    return samples


def _render_generate_turn(t: Transcript, inter: Any, turn: int) -> bool:
    """A token-route turn (``/generate``) as its prompt and each sample's completion decoded to
    text, with what a token-level env is judged by (token count, finish reason, mean logprob)
    on one line under each; False when the body is not a shape read here or no tokenizer is at
    hand (the folded JSON is shown then; ``--raw`` always shows the ids)."""
    if inter.kind != "generate" or t.decode is None:
        return False
    body = inter.request.get("body")
    ids = _generate_prompt_ids(body)
    resp = inter.response.get("body") if isinstance(inter.response, dict) else None
    samples = _generate_samples(resp)
    if ids is None or not samples:
        return False
    try:
        prompt = t.decode(ids)
        texts = [t.decode(s_ids) for s_ids, _lps, _why in samples]
    except Exception:  # ids the recorded tokenizer cannot decode: the folded JSON says so
        return False
    params = {k: v for k, v in body.items() if k not in ("prompt", "input_ids")}
    t.out.append("  " + t.s("params: " + json.dumps(params, ensure_ascii=False)[:400], "dim"))
    t._rule(f"prompt · {inter.kind} · turn {turn + 1} · {len(ids)} tokens", "cyan")
    t._body(t._cut(prompt, TEXT_LIMIT))
    for k, (text, (s_ids, lps, why)) in enumerate(zip(texts, samples, strict=True)):
        which = f" · sample {k + 1} of {len(samples)}" if len(samples) > 1 else ""
        t._rule(f"completion · turn {turn + 1}{which}", "green")
        t._body(t._cut(text, TEXT_LIMIT) if text else t.s("(empty)", "dim"))
        mean = f" · mean logprob {sum(lps) / len(lps):.3f}" if lps else ""
        line = sanitize(f"{len(s_ids)} tokens · finish {why}{mean}")
        t.out.append("  " + t.s(line, "dim"))
    return True


def offered_tools(record: Any) -> list[str]:
    """Tool names in the rollout's first request (the env offers the same set every turn)."""
    for inter in record.interactions:
        body = inter.request.get("body")
        if isinstance(body, dict) and isinstance(body.get("tools"), list):
            return [str((t.get("function") or t).get("name", "?")) for t in body["tools"]
                    if isinstance(t, dict)]
    return []


def pick_rollouts(cassette: Any, wanted: str | None) -> list[Any]:
    """The rollout(s) to show; ``wanted`` may be a unique prefix of an id, or a label (the
    item's name: every rollout of that item). ValueError says which exist."""
    from hermes_replay._cassette.labels import labels

    records = list(cassette.rollouts.values())
    if wanted is None:
        return records
    if wanted in cassette.rollouts:
        return [cassette.rollouts[wanted]]
    matches = [r for r in records if r.id.startswith(wanted)]
    if len(matches) == 1:
        return matches
    names = labels(cassette.outcomes)
    labelled = [r for r in records if names.get(r.id) == wanted]
    if labelled and not matches:
        return labelled
    ids = ", ".join(r.id for r in records[:12]) + (" …" if len(records) > 12 else "")
    if matches:
        raise ValueError(f"--rollout {wanted!r} matches {len(matches)} rollouts; give more of "
                         f"the id. Rollouts: {ids}")
    raise ValueError(f"no rollout {wanted!r} in {cassette.path}. Rollouts: {ids or '(none)'}")


def with_shared_traffic(cassette: Any, record: Any, t: Transcript | None) -> Any:
    """A plain env's rollout whose group was answered by one request (``n`` > 1) has no
    requests of its own: show the group's, narrowed to the reply's sample that was this
    rollout's (``_cassette.choices``), saying so."""
    from hermes_replay._cassette.choices import attribution_note, own_part

    outcome = getattr(record, "outcome", None) or {}
    shared = cassette.rollouts.get(str(outcome.get("traffic") or ""))
    if getattr(record, "interactions", None) or shared is None:
        return record
    choice = outcome.get("choice")
    own = own_part(list(shared.interactions), outcome)
    interactions = own if own is not None else list(shared.interactions)
    if own is not None and isinstance(choice, int):
        which = f"sample {choice + 1} of the reply; shown: that sample"
    else:
        which = "one sample of the reply; shown: all of them"
    if t is not None:
        t.out.append("")
        t.out.append(t.s(sanitize(f"rollout {record.id} shares the requests of group "
                                  f"{shared.id} (it is {which})"), "dim"))
        note = attribution_note(outcome, shared.outcome)
        if note:
            t.out.append(t.s(sanitize(f"reward: {note}"), "yellow"))
    return SimpleNamespace(id=record.id, interactions=interactions, outcome=outcome,
                           tool_calls=list(getattr(record, "tool_calls", [])), shared=True)


def edited_by_rollout(cassette: Any) -> dict[str | None, list[Any]]:
    """Requests whose body no longer matches its stored fingerprint, by rollout."""
    from hermes_replay._cassette.fingerprints import edited_requests

    out: dict[str | None, list[Any]] = {}
    for e in edited_requests(cassette):
        out.setdefault(e.interaction.rollout, []).append(e)
    return out

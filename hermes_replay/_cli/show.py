"""``hermes-replay show PATH [--rollout ID] [--turn N] [--raw] [--full]`` — a readable transcript.

System/user/assistant/tool messages in order, tool calls with pretty JSON arguments, tool
results (long ones cut, with a note), reasoning, then the recorded tool calls (what ran, exit
code, duration; the reward's own calls with their results), reward and outcome. Colors only on a
terminal and never with NO_COLOR.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from contextlib import redirect_stdout
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from hermes_replay._cassette.messages import (
    assistant_from_response,
    conversations,
    text_of,
    tool_calls_of,
)
from hermes_replay._terminal.render import Style, fmt_reward, sanitize, truncate

TOOL_RESULT_LIMIT = 1200
TEXT_LIMIT = 4000
_ROLE_STYLE = {"system": "magenta", "user": "green", "assistant": "cyan", "tool": "yellow"}


def register(sub: Any) -> None:
    p = sub.add_parser(
        "show",
        help="print a readable transcript of a cassette's rollouts",
        description="Render the conversations recorded in a cassette: messages, tool calls, "
        "tool results, reasoning, reward and outcome.",
    )
    p.add_argument("path", metavar="PATH", type=Path,
                   help="a cassette file (.jsonl, .jsonl.zst) or a .shards folder")
    p.add_argument("--rollout", metavar="ID", help="only this rollout (a unique prefix is enough)")
    p.add_argument("--turn", metavar="N", type=int,
                   help="only turn N (counted from 1, as everywhere: the N-th request)")
    p.add_argument("--raw", action="store_true",
                   help="the decoded JSON records instead (Phase-2 token ids in full)")
    p.add_argument("--full", action="store_true", help="do not shorten long texts")
    p.set_defaults(func=run)


# --------------------------------------------------------------------------- rendering


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
            head = (f"#{call.seq} {call.name} · {where}{code}{raised} · "
                    f"{call.duration_ms:.0f} ms")
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
        rest = {k: v for k, v in outcome.items() if k not in {
            "reward", "turns_used", "finished_naturally", "tool_errors", "phase", "group",
            "messages", "reasoning_per_turn"}}
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


def _render_turn(t: Transcript, record: Any, turn: int) -> None:
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
    from hermes_replay._cli._tokens import fold_token_lists

    decode = t.decode
    t._rule(f"request · {inter.kind} · turn {turn + 1}")
    t._body(t._cut(json.dumps(fold_token_lists(body, decode), indent=2, ensure_ascii=False),
                   TEXT_LIMIT))
    t._rule(f"response · status {inter.response.get('status')}")
    resp = inter.response.get("body", inter.response.get("text", inter.response.get("chunks")))
    t._body(t._cut(json.dumps(fold_token_lists(resp, decode), indent=2, ensure_ascii=False),
                   TEXT_LIMIT))


def _offered_tools(record: Any) -> list[str]:
    """Tool names in the rollout's first request (the env offers the same set every turn)."""
    for inter in record.interactions:
        body = inter.request.get("body")
        if isinstance(body, dict) and isinstance(body.get("tools"), list):
            return [str((t.get("function") or t).get("name", "?")) for t in body["tools"]
                    if isinstance(t, dict)]
    return []


def pick_rollouts(cassette: Any, wanted: str | None) -> list[Any]:
    """The rollout(s) to show; ``wanted`` may be a unique prefix. ValueError says which exist."""
    records = list(cassette.rollouts.values())
    if wanted is None:
        return records
    if wanted in cassette.rollouts:
        return [cassette.rollouts[wanted]]
    matches = [r for r in records if r.id.startswith(wanted)]
    if len(matches) == 1:
        return matches
    ids = ", ".join(r.id for r in records[:12]) + (" …" if len(records) > 12 else "")
    if matches:
        raise ValueError(f"--rollout {wanted!r} matches {len(matches)} rollouts; give more of "
                         f"the id. Rollouts: {ids}")
    raise ValueError(f"no rollout {wanted!r} in {cassette.path}. Rollouts: {ids or '(none)'}")


def run(args: argparse.Namespace) -> int:
    from hermes_replay import CassetteError, load_cassette
    from hermes_replay._cassette.merge import SHARDS_SUFFIX

    if args.path.is_dir() and not args.path.name.endswith(SHARDS_SUFFIX):
        print(f"hermes-replay show: {args.path} is a folder; show takes one cassette file "
              f"or a <cassette>{SHARDS_SUFFIX} folder. "
              f"Next step: `hermes-replay ls {args.path}` lists them.", file=sys.stderr)
        return 2
    try:
        cassette = load_cassette(args.path)
    except CassetteError as exc:
        print(f"hermes-replay show: {exc}", file=sys.stderr)
        return 2
    try:
        records = pick_rollouts(cassette, args.rollout)
    except ValueError as exc:
        print(f"hermes-replay show: {exc}", file=sys.stderr)
        return 2
    if args.turn is not None and len(records) > 1:
        print(f"hermes-replay show: --turn needs --rollout ID ({cassette.path} has "
              f"{len(records)} rollouts; `hermes-replay ls {cassette.path}` lists them).",
              file=sys.stderr)
        return 2
    from hermes_replay._cassette.display import (
        DisplayRefused,
        check_displayed,
        display_scope,
        display_text,
        scrubbed_cassette,
    )

    edited = _edited_by_rollout(cassette)  # judged on the bodies as stored, before scrubbing
    terminal = sys.stdout
    with display_scope():
        # everything shown is scrubbed as the report scrubs it (``_cassette.display``)
        cassette = scrubbed_cassette(cassette)
        records = pick_rollouts(cassette, args.rollout)
        buffer = io.StringIO()
        with redirect_stdout(buffer):
            code = _show(args, cassette, records, edited, terminal)
        try:
            shown = records if args.rollout else [*records, SimpleNamespace(
                interactions=cassette.scopeless, tool_calls=[], outcome={})]
            check_displayed(shown, str(args.path))
            text = display_text(buffer.getvalue(), str(args.path))
        except DisplayRefused as exc:
            print(f"hermes-replay show: {exc}", file=sys.stderr)
            return 1
    terminal.write(text)
    return code


def _show(args: argparse.Namespace, cassette: Any, records: list[Any],
          edited: dict[str | None, list[Any]], terminal: Any) -> int:
    from hermes_replay._cassette.model import reward_calls, stages_marked

    only = None if args.turn is None else args.turn - 1  # the 0-based seq of --turn N
    marked = stages_marked(cassette.interactions, cassette.header)
    if args.raw:
        for record in records:
            for e in edited.get(record.id, []):
                print(f"hermes-replay show: warning: {e.describe(cassette.path)}",
                      file=sys.stderr)
        return _print_raw([_with_shared_traffic(cassette, r, None) for r in records], only)
    from hermes_replay._cli._tokens import token_decoder

    style = Style(terminal)
    t = Transcript(style, full=args.full)
    t.decode = token_decoder(cassette.path, cassette.header.tokenizer)
    h = cassette.header
    t.out.append(style(f"{cassette.path}", "bold") + ("" if cassette.complete else
                                                      style("  (incomplete recording)", "red")))
    t.out.append(sanitize(f"env {h.env_name or '-'} · model {h.model or '-'} · "
                          f"endpoint {h.endpoint_type or '-'} · created {h.created}"))
    if args.rollout is None and cassette.scopeless:
        # requests made outside any rollout scope (e.g. a judge called from setup)
        records = [*records, SimpleNamespace(id="(outside any rollout)",
                                             interactions=cassette.scopeless, outcome={})]
    if not records:
        t.out.append("no rollouts recorded in this cassette")
    for record in records:
        record = _with_shared_traffic(cassette, record, t)
        t.out.append("")
        t.out.append(style(sanitize(f"rollout {record.id}"), "bold")
                     + f"  reward {fmt_reward((record.outcome or {}).get('reward'))}"
                     + f" · {len(record.interactions)} requests")
        tools = _offered_tools(record)
        if tools:
            t.out.append(style("tools offered: " + ", ".join(tools), "dim"))
        scopeless = isinstance(record, SimpleNamespace)
        for e in edited.get(None if scopeless else record.id, []):
            if only is None or e.interaction.seq == only:
                # shown as the file now reads, which is not what was recorded
                t.out.append(style(sanitize(f"warning: {e.describe(cassette.path)}"), "red"))
        if only is not None:
            if not 0 <= only < len(record.interactions):
                print(f"hermes-replay show: rollout {record.id} has turns 1.."
                      f"{len(record.interactions)}; --turn {args.turn} is out of range.",
                      file=sys.stderr)
                return 2
            _render_turn(t, record, only)
            t.tool_calls([c for c in getattr(record, "tool_calls", [])
                          if c.source == "agent" and c.turn == only])
            continue
        threads = [] if isinstance(record, SimpleNamespace) and not getattr(
            record, "shared", False) else conversations(record)
        rewards = {} if isinstance(record, SimpleNamespace) else reward_calls(
            record.interactions, record.outcome, marked)
        for number, (indexes, msgs) in enumerate(threads):
            seqs = [record.interactions[i].seq for i in indexes]
            if seqs and all(q in rewards for q in seqs):
                # numbered as replay's miss reports number them: "reward call 1 of rollout R"
                which = ", ".join(f"reward call {rewards[q]} (request {q + 1})" for q in seqs)
                t.out.append(t.s(f"══ {which}: made while the reward was computed ══", "bold"))
            elif number:
                which = ", ".join(map(str, indexes))
                t.out.append(t.s(f"══ another conversation in this rollout (request {which}; "
                                 "e.g. a judge call) ══", "bold"))
            t.messages(msgs, indexes if len(indexes) == sum(
                1 for m in msgs if m.get("role") == "assistant") else None)
        if not threads:
            for turn in range(len(record.interactions)):
                _render_turn(t, record, turn)
        if not isinstance(record, SimpleNamespace) or getattr(record, "shared", False):
            t.tool_calls(record.tool_calls)
            t.outcome(dict(record.outcome or {}))
    print("\n".join(t.out))
    return 0


def _with_shared_traffic(cassette: Any, record: Any, t: Transcript | None) -> Any:
    """A plain env's rollout whose group was answered by one request (``n`` > 1) has no
    requests of its own: show the group's, narrowed to the reply's sample that was this
    rollout's (``_cassette.choices``), saying so."""
    from hermes_replay._cassette.choices import own_choices

    outcome = getattr(record, "outcome", None) or {}
    shared = cassette.rollouts.get(str(outcome.get("traffic") or ""))
    if getattr(record, "interactions", None) or shared is None:
        return record
    choice = outcome.get("choice")
    interactions = list(shared.interactions)
    if isinstance(choice, int) and not isinstance(choice, bool) and choice >= 0:
        interactions = own_choices(interactions, choice)
        which = f"sample {choice + 1} of the reply; shown: that sample"
    else:
        which = "one sample of the reply; shown: all of them"
    if t is not None:
        t.out.append("")
        t.out.append(t.s(sanitize(f"rollout {record.id} shares the requests of group "
                                  f"{shared.id} (it is {which})"), "dim"))
    return SimpleNamespace(id=record.id, interactions=interactions, outcome=outcome,
                           tool_calls=list(getattr(record, "tool_calls", [])), shared=True)


def _edited_by_rollout(cassette: Any) -> dict[str | None, list[Any]]:
    """Requests whose body no longer matches its stored fingerprint, by rollout."""
    from hermes_replay._cassette.fingerprints import edited_requests

    out: dict[str | None, list[Any]] = {}
    for e in edited_requests(cassette):
        out.setdefault(e.interaction.rollout, []).append(e)
    return out


def _print_raw(records: list[Any], turn: int | None) -> int:
    for record in records:
        inters = record.interactions
        if turn is not None:
            if not 0 <= turn < len(inters):
                print(f"hermes-replay show: rollout {record.id} has no turn {turn + 1} (it has "
                      f"1..{len(inters)})", file=sys.stderr)
                return 2
            inters = [inters[turn]]
        for inter in inters:
            print(json.dumps(inter.model_dump(mode="json"), indent=2, ensure_ascii=False))
        for call in getattr(record, "tool_calls", []):
            if turn is None or (call.source == "agent" and call.turn == turn):
                print(json.dumps(call.record(), indent=2, ensure_ascii=False))
        if turn is None and record.outcome:
            print(json.dumps({"rollout": record.id, "outcome": record.outcome}, indent=2,
                             ensure_ascii=False))
    return 0

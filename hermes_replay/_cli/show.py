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

from hermes_replay._cassette.messages import conversations
from hermes_replay._cassette.transcript import (
    Transcript,
    edited_by_rollout,
    offered_tools,
    pick_rollouts,
    render_turn,
    with_shared_traffic,
)
from hermes_replay._terminal.render import Style, fmt_reward, sanitize


def register(sub: Any) -> None:
    p = sub.add_parser(
        "show",
        help="print a readable transcript of a cassette's rollouts",
        description="Render the conversations recorded in a cassette: messages, tool calls, "
        "tool results, reasoning, reward and outcome.",
    )
    p.add_argument("path", metavar="PATH", type=Path,
                   help="a cassette file (.jsonl, .jsonl.zst) or a .shards folder")
    p.add_argument("--rollout", metavar="ID",
                   help="only this rollout (a unique prefix is enough), or the rollouts of an "
                   "item by its label")
    p.add_argument("--turn", metavar="N", type=int,
                   help="only turn N (counted from 1, as everywhere: the N-th request)")
    p.add_argument("--raw", action="store_true",
                   help="the decoded JSON records instead (Phase-2 token ids in full)")
    p.add_argument("--full", action="store_true", help="do not shorten long texts")
    p.set_defaults(func=run)


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

    edited = edited_by_rollout(cassette)  # judged on the bodies as stored, before scrubbing
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
        return _print_raw([with_shared_traffic(cassette, r, None) for r in records], only)
    from hermes_replay._tokenizers.fold import token_decoder

    style = Style(terminal)
    t = Transcript(style, full=args.full)
    t.decode = token_decoder(cassette.path, cassette.header.tokenizer)
    h = cassette.header
    t.out.append(style(f"{cassette.path}", "bold") + ("" if cassette.complete else
                                                      style("  (incomplete recording)", "red")))
    t.out.append(sanitize(f"env {h.env_name or '-'} · model {h.model or '-'} · "
                          f"endpoint {h.endpoint_type or '-'} · created {h.created}"))
    branch = _parent_of(t, cassette)  # a fork's branch: its parent, read as data
    if args.rollout is None and cassette.scopeless:
        # requests made outside any rollout scope (e.g. a judge called from setup)
        records = [*records, SimpleNamespace(id="(outside any rollout)",
                                             interactions=cassette.scopeless, outcome={})]
    if not records:
        t.out.append("no rollouts recorded in this cassette")
    from hermes_replay._cassette.labels import labels, named

    names = labels(cassette.outcomes)
    for record in records:
        record = with_shared_traffic(cassette, record, t)
        t.out.append("")
        t.out.append(style(sanitize(f"rollout {named(record.id, names.get(record.id))}"), "bold")
                     + f"  reward {fmt_reward((record.outcome or {}).get('reward'))}"
                     + f" · {len(record.interactions)} requests")
        tools = offered_tools(record)
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
            render_turn(t, record, only)
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
                render_turn(t, record, turn)
        if not isinstance(record, SimpleNamespace) or getattr(record, "shared", False):
            t.tool_calls(record.tool_calls)
            t.outcome(dict(record.outcome or {}))
            workspace = (record.outcome or {}).get("workspace")
            if workspace is not None:
                from hermes_replay._world.display import workspace_lines

                t.out.append(t.s("── workspace (as the reward found it) ──", "bold"))
                t.out.extend(sanitize(line) for line in workspace_lines(workspace,
                                                                        cassette.path))
            if branch is not None:
                from hermes_replay._fork.views import branch_lines

                t.out.extend(sanitize(x) for x in branch_lines(cassette, record, *branch))
    print("\n".join(t.out))
    return 0


def _parent_of(t: Transcript, cassette: Any) -> tuple[Any, str | None] | None:
    """A branch's parent link shown, and its parent (scrubbed as shown), or None."""
    from hermes_replay._cassette.display import scrubbed_cassette
    from hermes_replay._cassette.forks import fork_line
    from hermes_replay._fork.views import load_parent

    line = fork_line(cassette.header)
    if line is None:
        return None
    t.out.append(t.s(sanitize(line), "bold"))
    parent, problem = load_parent(cassette)
    return (scrubbed_cassette(parent) if parent is not None else None), problem


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

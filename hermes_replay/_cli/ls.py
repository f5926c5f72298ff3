"""``hermes-replay ls PATH`` — what a cassette (or a folder of them) holds.

Per cassette: a header line (env, model, endpoint type, created, tokenizer), then one row per
rollout: id, its label (the item's name, when it has one), phase, turns, tool calls, reward.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from hermes_replay._terminal.render import Style, fmt_reward, sanitize, table


def register(sub: Any) -> None:
    p = sub.add_parser(
        "ls",
        help="list the rollouts, turns and rewards in cassettes",
        description="List each cassette's header and its rollouts (id, phase, turns, tool "
        "calls, reward).",
    )
    p.add_argument("path", metavar="PATH", type=Path, nargs="?", default=Path("cassettes"),
                   help="a cassette or a folder of cassettes (default: ./cassettes)")
    p.set_defaults(func=run)


def header_line(cassette: Any) -> str:
    h = cassette.header
    tok = h.tokenizer or {}
    tokenizer = str(tok.get("name") or "-")
    if Path(tokenizer).is_absolute():  # a local directory: its name is what identifies it
        tokenizer = Path(tokenizer).name
    if tok.get("fingerprint"):
        tokenizer += f" ({str(tok['fingerprint']).removeprefix('sha256:')[:12]})"
    env = h.env_name or (Path(h.env_file).stem if h.env_file else "-")
    return sanitize(f"env {env} · model {h.model or '-'} · endpoint {h.endpoint_type or '-'} · "
                    f"created {h.created} · tokenizer {tokenizer}")


def rollout_rows(cassette: Any) -> list[list[Any]]:
    """One row per rollout; the second column its item's label when any has one."""
    from hermes_replay._cassette.labels import labels
    from hermes_replay._cassette.messages import count_tool_calls, count_turns

    names = labels(cassette.outcomes)
    rows = []
    for record in cassette.rollouts.values():
        outcome = record.outcome or {}
        if outcome.get("kind") == "group":  # a plain env's group: its scores, on one row
            scores = outcome.get("scores")
            shown = "dropped" if scores is None else f"{len(scores)} scores" \
                if isinstance(scores, list) else "-"
            rows.append([sanitize(record.id), "group", count_turns(record),
                         count_tool_calls(record), shown])
            continue
        phase = outcome.get("phase") or ("eval" if record.id.startswith("eval") else "train")
        # a rollout of a group answered by one request (n > 1): the group's turns are its own
        shared = cassette.rollouts.get(str(outcome.get("traffic") or ""))
        turns = count_turns(shared) if shared is not None and not record.interactions \
            else count_turns(record)
        rows.append([sanitize(record.id), sanitize(str(phase)), turns,
                     count_tool_calls(record), fmt_reward(outcome.get("reward"))])
    for row, record in zip(rows if names else [], cassette.rollouts.values(), strict=False):
        row.insert(1, sanitize(names.get(record.id, "-")))
    return rows


def render(cassette: Any, style: Style) -> str:
    lines = [style(str(cassette.path), "bold")
             + ("" if cassette.complete else style("  (incomplete recording)", "red")),
             "  " + header_line(cassette)]
    if cassette.header.command:
        lines.append("  command: " + sanitize(" ".join(cassette.header.command)))
    rows = rollout_rows(cassette)
    if rows:
        named = len(rows[0]) == 6  # the label column (``rollout_rows``)
        lines.extend("  " + line for line in
                     table(["rollout", *(["item"] if named else []), "phase", "turns",
                            "tool calls", "reward"], rows,
                           align="lllrrr" if named else "llrrr", style=style).splitlines())
    rewards = [r.outcome.get("reward") for r in cassette.rollouts.values()
               if isinstance((r.outcome or {}).get("reward"), (int, float))]
    mean = sum(rewards) / len(rewards) if rewards else None
    groups = sum(1 for r in cassette.rollouts.values()
                 if (r.outcome or {}).get("kind") == "group")
    counted = f"{len(rows) - groups} rollouts in {groups} groups" if groups else \
        f"{len(rows)} rollouts"
    tail = f"  {counted} · {len(cassette.interactions)} requests · " \
           f"mean reward {fmt_reward(mean)}"
    scopeless = len(cassette.scopeless)
    if scopeless:
        tail += f" · {scopeless} requests outside any rollout"
    lines.append(tail)
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from hermes_replay import CassetteError, load_cassette
    from hermes_replay._cli.replay import NOTHING_RECORDED
    from hermes_replay._runner.plan import find_cassettes, special_file_problem

    path: Path = args.path
    if not path.exists():
        if path == Path("cassettes"):
            print(f"{NOTHING_RECORDED} ENV_FILE --endpoint URL --model NAME -- process "
                  "(no ./cassettes folder here)")
            return 0
        print(f"hermes-replay ls: {path} does not exist. Next step: pass a cassette file or a "
              "folder of cassettes.", file=sys.stderr)
        return 2
    problem = special_file_problem(path)
    if problem is not None:
        print(f"hermes-replay ls: {problem}", file=sys.stderr)
        return 2
    cassettes = find_cassettes(path)
    if not cassettes:
        print(f"{NOTHING_RECORDED} ENV_FILE --endpoint URL --model NAME -- process "
              f"(no cassettes in {path})")
        return 0
    from hermes_replay._cassette.display import DisplayRefused, display_scope, display_text

    style = Style(sys.stdout)
    failed = 0
    blocks = []
    for cpath in cassettes:
        try:
            with display_scope():  # scrubbed as the report scrubs (``_cassette.display``)
                blocks.append(display_text(render(load_cassette(cpath), style), str(cpath)))
        except (CassetteError, DisplayRefused) as exc:
            failed += 1
            print(f"hermes-replay ls: {exc}", file=sys.stderr)
    print("\n\n".join(blocks))
    return 1 if failed else 0

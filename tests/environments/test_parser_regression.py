"""Parser regression over the shipped cassettes: the model outputs kept there, run through every
tool-call parser and snapshotted, so a parser change shows up as a snapshot diff naming the
cassette (test id), the rollout and turn (``rollout#seq``) and the parser.

The shipped cassettes are chat-completion recordings (the server already split out structured
``tool_calls``), so the raw-text corpus is built from them: every recorded assistant reply is
rendered into raw text by each parser's ``render`` and parsed back by *every* parser; the
reply's own content text is also parsed by the parser the environment was configured with.

Per turn (keys start with ``rollout#seq``) the snapshot keeps, as compact JSON
``[content, [[name, arguments], ...] | null]``:

* ``recorded``          — the reply as recorded, in the shape a parser returns it (content
                          stripped or None when there are calls; the text as is without);
* ``text[<parser>]``    — the configured parser on the reply's content text;
* ``round trip``        — ``parse_P(render_P(reply))`` per parser P, parsers with the same
                          result grouped (``= recorded`` when it equals the reference);
* ``cross R->P``        — another parser P that finds calls in R's rendering, and what
                          (``= recorded`` when it reads R's text exactly right).

Contract checks (``ToolCallParser.render`` docstring) run alongside: the round trip returns the
recorded reply exactly, and a reply without calls renders and parses back untouched.
Re-accept intended changes with ``pytest --snapshot-update``.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from environments.tool_call_parsers import ToolCallParser, get_parser, list_parsers
from hermes_replay import load_cassette
from hermes_replay._cassette.messages import assistant_from_response

ROOT = Path(__file__).resolve().parents[2]
# Recordings of model output only: probe cassettes (probe-*.jsonl) hold adversarial replies made
# to be unparseable (non-JSON arguments, a 1 MB reply); tests/probe covers the parsers on those.
CASSETTES = sorted(p for p in (ROOT / "cassettes").rglob("*.jsonl")
                   if not p.stem.startswith("probe-"))
# Formats that write string values unquoted read back JSON-looking strings ("42") as JSON.
_UNQUOTED = {"glm45", "glm47", "qwen3_coder"}
DEFAULT_PARSER = "hermes"  # HermesAgentEnvConfig.tool_call_parser's default

Calls = list[tuple[str, dict[str, Any]]]


def _ids(path: Path) -> str:
    return f"{path.parent.name}/{path.stem}"


@cache
def parsers() -> dict[str, ToolCallParser]:
    """One instance per format (aliases such as qwen → hermes resolve to the same class)."""
    out: dict[str, ToolCallParser] = {}
    for name in list_parsers():
        parser = get_parser(name)
        out.setdefault(parser.name, parser)
    return dict(sorted(out.items()))


def configured_parser(command: list[str]) -> str:
    for i, arg in enumerate(command):
        if arg == "--env.tool_call_parser" and i + 1 < len(command):
            return command[i + 1]
        if arg.startswith("--env.tool_call_parser="):
            return arg.split("=", 1)[1]
    return DEFAULT_PARSER


def replies(path: Path) -> list[tuple[str, str | None, Calls]]:
    """``(rollout#seq, content, [(name, args)])`` of every assistant reply in the cassette."""
    out = []
    for inter in load_cassette(path).interactions:
        msg = assistant_from_response(inter.response)
        if msg is None:
            continue
        calls = [(tc["function"]["name"], json.loads(tc["function"]["arguments"] or "{}"))
                 for tc in msg.get("tool_calls") or []]
        content = msg.get("content")
        out.append((f"{inter.rollout or '<no rollout>'}#{inter.seq}",
                    content if isinstance(content, str) else None, calls))
    return out


def parsed(result: tuple[str | None, list[Any] | None]) -> tuple[str | None, Calls | None]:
    content, calls = result
    if calls is None:
        return content, None
    return content, [(c.function.name, json.loads(c.function.arguments)) for c in calls]


def compact(content: str | None, calls: Calls | None) -> str:
    listed = None if calls is None else [[name, args] for name, args in calls]
    return json.dumps([content, listed], ensure_ascii=False, sort_keys=True)


def summarize(path: Path) -> dict[str, str]:
    """One flat ``"rollout#seq what": value`` line each, so a changed line names its turn
    (syrupy elides the enclosing keys of a nested dict in its diff)."""
    configured = configured_parser(list(load_cassette(path).header.command or []))
    text_parser = get_parser(configured)
    table: dict[str, str] = {}
    for key, content, calls in replies(path):
        text = content or ""
        # what parse(render(reply)) must give back: calls → stripped text or None; none → text
        recorded = compact(text.strip() or None, calls) if calls else compact(text, None)
        table[f"{key} recorded"] = recorded
        table[f"{key} text[{configured}]"] = compact(*parsed(text_parser.parse(text)))
        groups: dict[str, list[str]] = {}
        for name, parser in parsers().items():
            raw = parser.render(content, calls)
            got = compact(*parsed(parser.parse(raw)))
            groups.setdefault("= recorded" if got == recorded else got, []).append(name)
            for other_name, other in parsers().items():
                found = parsed(other.parse(raw)) if other_name != name else (None, None)
                if found[1] is not None:
                    value = compact(*found)
                    table[f"{key} cross {name}->{other_name}"] = (
                        "= recorded" if value == recorded else value)
        for value, names in groups.items():
            table[f"{key} round trip [{', '.join(names)}]"] = value
    return table


def test_corpus_is_not_empty() -> None:
    """The regression only means something if the cassettes hold replies with tool calls."""
    assert len(CASSETTES) >= 6, CASSETTES
    all_replies = [r for path in CASSETTES for r in replies(path)]
    with_calls = [r for r in all_replies if r[2]]
    assert len(with_calls) >= 20
    assert len(all_replies) - len(with_calls) >= 10  # final answers without calls too
    assert len(parsers()) >= 11


@pytest.mark.parametrize("path", CASSETTES, ids=_ids)
def test_parsers_on_cassette_replies(path: Path, snapshot) -> None:
    assert summarize(path) == snapshot


def _expected_args(parser: str, args: dict[str, Any]) -> dict[str, Any]:
    if parser not in _UNQUOTED:
        return args
    out = {}
    for key, value in args.items():
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                pass
        out[key] = value
    return out


@pytest.mark.parametrize("path", CASSETTES, ids=_ids)
def test_round_trip_returns_the_recorded_reply(path: Path) -> None:
    configured = get_parser(configured_parser(list(load_cassette(path).header.command or [])))
    for key, content, calls in replies(path):
        text = content or ""
        # chat replies carry calls structurally: their text holds no call for the parser to find
        assert configured.parse(text) == (text, None), f"{path.name} {key}"
        for name, parser in parsers().items():
            raw = parser.render(content, calls)
            got_content, got_calls = parsed(parser.parse(raw))
            where = f"{_ids(path)} {key} parser {name}"
            if not calls:
                assert raw == text and (got_content, got_calls) == (text, None), where
                continue
            assert got_content == (text.strip() or None), where
            assert got_calls == [(n, _expected_args(name, a)) for n, a in calls], where
            # deterministic: the same reply renders to the same bytes
            assert parser.render(content, calls) == raw, where

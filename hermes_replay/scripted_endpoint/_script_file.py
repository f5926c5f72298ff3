"""Scripts from a file: ``hermes-replay scripted-endpoint --script my_env.toml``.

A user's own script without writing Python: ordered rules (the first whose conditions all hold
answers), each a few conditions on the conversation and one or more replies (text or tool
calls). The format is documented in ``docs/scripted-endpoint.md``; this module is its only
reader, so every mistake in a file is reported here, when the file is loaded, naming the file,
the rule and the key — never as a 422 in the middle of a recording.

A file is data: nothing in it is executed. Regular expressions are compiled with ``re``;
``${name}`` placeholders are filled by :class:`string.Template` (no attribute access, no
format-spec mini-language), from the groups the rule's own ``*_matches`` conditions captured
and a few names for the conversation (``last_user``, ``tool_result`` …).
"""

from __future__ import annotations

import difflib
import json
import os
import random
import re
import string
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the same parser, as the tomli dependency
    import tomli as tomllib  # type: ignore[no-redef]

from hermes_replay._cassette.normalizer_checks import backtracking_problem
from hermes_replay.scripted_endpoint._script import Conversation, Reply, Rule, Script, _text

__all__ = ["SCRIPT_SUFFIXES", "ScriptFileError", "looks_like_script_file", "read_script_file"]

SCRIPT_SUFFIXES = (".toml", ".json")
MAX_MIN_WORDS = 100_000

# text a condition can look at; each gives ``<field>_contains`` and ``<field>_matches``
_FIELDS: dict[str, Callable[[Conversation], str]] = {
    "last_user": lambda c: c.last_user_text,
    "first_user": lambda c: c.first_user_text,
    "system": lambda c: c.system_prompt or "",
    "last_tool_result": lambda c: _last_tool_result(c),
    "any_text": lambda c: "\n".join(_text(m.get("content")) for m in c.messages),
}
_ROUTES = {"chat": "/v1/chat/completions", "completions": "/v1/completions",
           "generate": "/generate"}
_WHEN_KEYS = (
    {f"{f}_{op}" for f in _FIELDS for op in ("contains", "matches")}
    | {"route", "turn", "min_turn", "max_turn", "last_role", "tools_offered", "tool_offered",
       "called", "not_called", "judge"}
)
_TOP_KEYS = {"name", "fallback", "min_words", "filler", "rules"}
_RULE_KEYS = {"name", "when", "reply", "min_words"}
_REPLY_KEYS = {"text", "tool_calls", "reasoning", "finish_reason"}
_CALL_KEYS = {"name", "arguments"}
# placeholders every rule may use, besides its own regex groups
_BUILTINS: dict[str, Callable[[Conversation], str]] = {
    "last_user": lambda c: c.last_user_text,
    "first_user": lambda c: c.first_user_text,
    "system": lambda c: c.system_prompt or "",
    "tool_result": lambda c: _last_tool_result(c),
    "turn": lambda c: str(c.assistant_turn),
}
# what padding says when a reply is shorter than ``min_words``: neutral preamble, no numbers
# or tags, so graders that look for the last number / boxed answer / answer tag still find
# the reply's own
_FILLER = (
    "Let me work through this step by step.",
    "First I restate what is being asked so nothing is missed.",
    "I will check each part of the question before answering.",
    "Here is the reasoning that leads to the answer below.",
    "Looking at the details again, the approach still holds.",
    "Now I put the pieces together.",
)


class ScriptFileError(ValueError):
    """A script file that cannot be read or does not follow the format.

    Raised by ``load_script`` (and so by ``ScriptedEndpoint(script=path)`` and the CLI,
    which exits 2 with it). The message names the file, the rule and the key, and the fix.
    """


class _Template(string.Template):
    # ``${1}`` for numbered groups as well as ``${name}``
    idpattern = r"(?a:[_a-z0-9]+)"
    flags = re.IGNORECASE


@dataclass
class _Where:
    """Where in the file a value sits, for error messages."""

    path: Path
    rule: str = ""

    def fail(self, key: str, problem: str) -> ScriptFileError:
        at = f"{self.rule}, " if self.rule else ""
        return ScriptFileError(
            f"scripted endpoint: script file {self.path}: {at}{key}: {problem} "
            "(the format: docs/scripted-endpoint.md)"
        )


@dataclass
class _Condition:
    """The conditions of one rule's ``when``, compiled; all must hold."""

    tests: list[Callable[[Conversation], bool]] = field(default_factory=list)
    patterns: list[tuple[Callable[[Conversation], str], re.Pattern[str]]] = field(
        default_factory=list)

    def __call__(self, conv: Conversation) -> bool:
        return all(t(conv) for t in self.tests) and all(
            p.search(get(conv)) for get, p in self.patterns)

    def captures(self, conv: Conversation) -> dict[str, str]:
        """The groups the rule's regexes captured (later patterns win on a shared name)."""
        found: dict[str, str] = {}
        for get, pattern in self.patterns:
            m = pattern.search(get(conv))
            if m is None:
                continue
            found.update({str(i): g or "" for i, g in enumerate(m.groups(), start=1)})
            found.update({k: v or "" for k, v in m.groupdict().items()})
        return found

    def names(self) -> set[str]:
        out: set[str] = set()
        for _, pattern in self.patterns:
            out |= {str(i) for i in range(1, pattern.groups + 1)} | set(pattern.groupindex)
        return out


@dataclass(frozen=True)
class _ReplyTemplate:
    text: tuple[str, ...]  # alternatives; empty = no text
    tool_calls: tuple[tuple[str, Any], ...]
    reasoning: str | None
    finish_reason: str | None


def looks_like_script_file(value: str | os.PathLike[str]) -> bool:
    """Whether ``--script VALUE`` names a file rather than a registered script."""
    text = os.fspath(value)
    return text.endswith(SCRIPT_SUFFIXES) or os.sep in text or "/" in text


def read_script_file(path: str | os.PathLike[str],
                     fallback_lookup: Callable[[str], Script]) -> Script:
    """Read a script file (TOML, or JSON with the same shape) into a :class:`Script`.

    ``fallback_lookup`` resolves the file's ``fallback`` name — the registry's ``get_script``,
    passed in (``_registry.load_script``) so that this module does not import the registry.
    """
    where = _Where(Path(path))
    try:
        return _read_script(where, fallback_lookup)
    except RecursionError:  # a file nested thousands deep: name it, not "maximum recursion"
        raise where.fail("file", "is nested too deeply (tables or lists inside each other "
                         "thousands of times)") from None


def _read_script(where: _Where, fallback_lookup: Callable[[str], Script]) -> Script:
    data = _read(where.path)
    _check_keys(data, _TOP_KEYS, where, "top level")
    name = data.get("name", where.path.stem)
    if not isinstance(name, str) or not name.strip():
        raise where.fail("name", f"must be a non-empty string, not {name!r}")
    min_words = _non_negative_int(data.get("min_words", 0), where, "min_words")
    filler = data.get("filler", list(_FILLER))
    if (not isinstance(filler, list) or not filler
            or not all(isinstance(s, str) and s.split() for s in filler)):
        raise where.fail("filler", "must be a non-empty list of sentences (strings with words)")
    raw_rules = data.get("rules", [])
    if not isinstance(raw_rules, list) or not all(isinstance(r, dict) for r in raw_rules):
        raise where.fail("rules", "must be a list of tables ([[rules]] in TOML)")
    rules = [_rule(i, raw, where.path, min_words, tuple(filler))
             for i, raw in enumerate(raw_rules, start=1)]
    fallback = data.get("fallback", "generic")
    if not isinstance(fallback, str):
        raise where.fail("fallback", f"must be a script name or \"none\", not {fallback!r}")
    if fallback != "none":
        try:
            rules += fallback_lookup(fallback).rules
        except KeyError as exc:
            raise where.fail("fallback", f"{exc.args[0]}; or write \"none\"") from None
    if not rules:
        raise where.fail("rules", "no rules and fallback = \"none\": nothing could answer")
    return Script(name, rules, source=str(where.path))


def _read(path: Path) -> dict[str, Any]:
    where = _Where(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ScriptFileError(
            f"scripted endpoint: cannot read script file {path}: {exc.strerror or exc}. "
            "Next step: check the path (relative paths are from the working directory), or "
            "pass a registered script name (generic, examples)."
        ) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise where.fail("file", f"is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    if path.suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise where.fail(f"line {exc.lineno} column {exc.colno}",
                             f"not valid JSON: {exc.msg}") from None
    else:
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise where.fail("file", f"not valid TOML: {exc}") from None
    if not isinstance(data, dict):
        raise where.fail("top level", "must be a table (a JSON object)")
    return data


def _check_keys(table: Mapping[str, Any], allowed: Iterable[str], where: _Where,
                what: str) -> None:
    allowed = sorted(allowed)
    for key in table:
        if key not in allowed:
            close = difflib.get_close_matches(key, allowed, n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"allowed: {', '.join(allowed)}"
            raise where.fail(f"{what} key {key!r}", f"unknown; {hint}")


def _non_negative_int(value: Any, where: _Where, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise where.fail(key, f"must be a whole number >= 0, not {value!r:.40}")
    if key.endswith("min_words") and value > MAX_MIN_WORDS:
        # the reply is built word by word in the server's one thread: 10**12 never ends
        raise where.fail(key, f"is {value:,}; at most {MAX_MIN_WORDS:,} words (a long "
                         "reply is a few thousand)")
    return value


def _strings(value: Any, where: _Where, key: str) -> list[str]:
    """A string or a non-empty list of strings, as a list."""
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items or not all(isinstance(s, str) for s in items):
        raise where.fail(key, f"must be a string or a list of strings, not {value!r}")
    return items


def _rule(index: int, raw: dict[str, Any], path: Path, default_min: int,
          filler: tuple[str, ...]) -> Rule:
    name = raw.get("name", f"rule-{index}")
    where = _Where(path, f"rule {index}")
    if not isinstance(name, str) or not name.strip():
        raise where.fail("name", f"must be a non-empty string, not {name!r}")
    where = _Where(path, f"rule {index} ({name!r})")
    _check_keys(raw, _RULE_KEYS, where, "rule")
    when = raw.get("when", {})
    if not isinstance(when, dict):
        raise where.fail("when", "must be a table of conditions ([rules.when] in TOML)")
    condition = _condition(when, where)
    min_words = _non_negative_int(raw.get("min_words", default_min), where, "min_words")
    if "reply" not in raw:
        raise where.fail("reply", "missing: say what the stand-in answers ([rules.reply])")
    replies = raw["reply"] if isinstance(raw["reply"], list) else [raw["reply"]]
    if not replies or not all(isinstance(r, dict) for r in replies):
        raise where.fail("reply", "must be a table, or a list of tables (one picked per sample)")
    known = set(_BUILTINS) | condition.names()
    templates = [_reply(r, where, known) for r in replies]

    def answer(conv: Conversation, rng: random.Random) -> Reply:
        values = {k: get(conv) for k, get in _BUILTINS.items()} | condition.captures(conv)
        chosen = templates[0] if len(templates) == 1 else rng.choice(templates)
        return _render(chosen, values, rng, min_words, filler)

    return Rule(name, condition, answer)


def _condition(when: dict[str, Any], where: _Where) -> _Condition:
    _check_keys(when, _WHEN_KEYS, where, "when")
    cond = _Condition()
    for key, value in when.items():
        field_name, _, op = key.rpartition("_")
        if field_name in _FIELDS and op == "contains":
            words = [w.lower() for w in _strings(value, where, f"when.{key}")]
            get = _FIELDS[field_name]
            cond.tests.append(lambda c, g=get, ws=words: any(w in g(c).lower() for w in ws))
        elif field_name in _FIELDS and op == "matches":
            if not isinstance(value, str):
                raise where.fail(f"when.{key}", f"must be a regular expression, not {value!r}")
            try:
                pattern = re.compile(value)
            except (re.error, RecursionError, OverflowError) as exc:
                raise where.fail(f"when.{key}", f"bad regular expression: {exc}") from None
            # matched in the server's one thread, which re cannot interrupt: a pattern that
            # backtracks without end would stop every request, /health and SIGTERM included
            problem = backtracking_problem(value)
            if problem:
                raise where.fail(f"when.{key}", f"{value!r:.80} can backtrack without end "
                                 f"({problem}); write each repeat so it cannot overlap the "
                                 "next, or make it possessive (a++) or atomic ((?>…))")
            clash = set(pattern.groupindex) & set(_BUILTINS)
            if clash:
                raise where.fail(f"when.{key}", f"group name(s) {sorted(clash)} are taken by "
                                 "built-in placeholders; rename the group")
            cond.patterns.append((_FIELDS[field_name], pattern))
        else:
            cond.tests.append(_simple_test(key, value, where))
    return cond


def _simple_test(key: str, value: Any, where: _Where) -> Callable[[Conversation], bool]:
    if key == "route":
        routes = _strings(value, where, "when.route")
        bad = [r for r in routes if r not in _ROUTES]
        if bad:
            raise where.fail("when.route", f"unknown {bad}; choose from {', '.join(_ROUTES)}")
        paths = tuple(_ROUTES[r] for r in routes)
        return lambda c: c.path.endswith(paths)
    if key in ("turn", "min_turn", "max_turn"):
        n = _non_negative_int(value, where, f"when.{key}")
        if key == "turn":
            return lambda c: c.assistant_turn == n
        if key == "min_turn":
            return lambda c: c.assistant_turn >= n
        return lambda c: c.assistant_turn <= n
    if key == "last_role":
        roles = set(_strings(value, where, "when.last_role"))
        return lambda c: c.last_message.get("role") in roles
    if key in ("tools_offered", "judge"):
        if not isinstance(value, bool):
            raise where.fail(f"when.{key}", f"must be true or false, not {value!r}")
        if key == "judge":
            return lambda c: c.is_judge == value
        return lambda c: bool(c.tools) == value
    names = set(_strings(value, where, f"when.{key}"))
    if key == "tool_offered":
        return lambda c: bool(names & set(c.tool_names))
    if key == "called":
        return lambda c: names <= {n for n, _ in c.tool_calls_made}
    return lambda c: not names & {n for n, _ in c.tool_calls_made}  # not_called


def _reply(raw: dict[str, Any], where: _Where, known: set[str]) -> _ReplyTemplate:
    _check_keys(raw, _REPLY_KEYS, where, "reply")
    text = tuple(_strings(raw["text"], where, "reply.text")) if "text" in raw else ()
    calls_raw = raw.get("tool_calls", [])
    if not isinstance(calls_raw, list) or not all(isinstance(c, dict) for c in calls_raw):
        raise where.fail("reply.tool_calls", "must be a list of {name, arguments} tables")
    calls = []
    for j, call in enumerate(calls_raw, start=1):
        _check_keys(call, _CALL_KEYS, where, f"reply.tool_calls[{j}]")
        name = call.get("name")
        if not isinstance(name, str) or not name:
            raise where.fail(f"reply.tool_calls[{j}].name", "must be the tool's name")
        args = call.get("arguments", {})
        if not isinstance(args, (dict, str)):
            raise where.fail(f"reply.tool_calls[{j}].arguments",
                             "must be a table (sent as JSON) or a string (sent as written)")
        calls.append((name, args))
    if not text and not calls:
        raise where.fail("reply", "needs text or tool_calls (or both)")
    reasoning = raw.get("reasoning")
    finish = raw.get("finish_reason")
    for key, value in (("reply.reasoning", reasoning), ("reply.finish_reason", finish)):
        if value is not None and not isinstance(value, str):
            raise where.fail(key, f"must be a string, not {value!r}")
    for key, template in _templates(text, calls, reasoning):
        _check_template(template, known, where, key)
    return _ReplyTemplate(text, tuple(calls), reasoning, finish)


def _templates(text: Iterable[str], calls: Iterable[tuple[str, Any]], reasoning: str | None
               ) -> Iterable[tuple[str, str]]:
    for t in text:
        yield "reply.text", t
    for j, (_, args) in enumerate(calls, start=1):
        for s in _leaf_strings(args):
            yield f"reply.tool_calls[{j}].arguments", s
    if reasoning is not None:
        yield "reply.reasoning", reasoning


def _leaf_strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _leaf_strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _leaf_strings(v)


def _check_template(template: str, known: set[str], where: _Where, key: str) -> None:
    t = _Template(template)
    if not t.is_valid():
        raise where.fail(key, f"{template!r} has a '$' that is not a ${{name}} placeholder; "
                         "write $$ for a literal '$'")
    unknown = sorted(set(t.get_identifiers()) - known)
    if unknown:
        raise where.fail(key, f"unknown placeholder(s) {unknown}; this rule knows "
                         f"{sorted(known, key=lambda s: (s.isdigit(), s))} (write $$ for a "
                         "literal '$')")


def _fill(value: Any, values: Mapping[str, str]) -> Any:
    if isinstance(value, str):
        return _Template(value).substitute(values)
    if isinstance(value, dict):
        return {k: _fill(v, values) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, values) for v in value]
    return value


def _render(chosen: _ReplyTemplate, values: Mapping[str, str], rng: random.Random,
            min_words: int, filler: tuple[str, ...]) -> Reply:
    content = None
    if chosen.text:
        line = chosen.text[0] if len(chosen.text) == 1 else rng.choice(chosen.text)
        content = _pad(_fill(line, values), min_words, filler, rng)
    return Reply(
        content=content,
        tool_calls=[(name, _fill(args, values)) for name, args in chosen.tool_calls],
        reasoning=_fill(chosen.reasoning, values) if chosen.reasoning is not None else None,
        finish_reason=chosen.finish_reason,
    )


def _pad(text: str, min_words: int, filler: tuple[str, ...], rng: random.Random) -> str:
    """``text`` with filler sentences in front until it has ``min_words`` words: length and
    trained-token filters see a plausible reply, and the reply's own words stay last, where
    answer extractors look."""
    missing = min_words - len(text.split())
    if missing <= 0:
        return text
    lead: list[str] = []
    while missing > 0:
        sentence = rng.choice(filler)
        lead.append(sentence)
        missing -= len(sentence.split())
    return " ".join(lead) + " " + text


def _last_tool_result(conv: Conversation) -> str:
    for msg in reversed(conv.messages):
        if msg.get("role") == "tool":
            return _text(msg.get("content"))
    return ""

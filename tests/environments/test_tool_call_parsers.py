"""Tool-call parsers: the shared contract for every registered name, then format facts.

The generic tests build their inputs with ``render`` so that every format is exercised the same
way; the format-specific tests use hand-written text in the shape real models emit, so a bug
shared by ``render`` and ``parse`` cannot hide.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from environments import tool_call_parsers as tcp
from environments.tool_call_parsers import (
    ChatCompletionMessageToolCall,
    ToolCallParser,
    get_parser,
    list_parsers,
    register_parser,
)

REQUIRED = [
    "hermes", "qwen", "longcat", "mistral", "llama3_json", "llama4_json", "deepseek_v3",
    "deepseek_v3_1", "deepseek_v31", "kimi_k2", "glm45", "glm47", "qwen3_coder",
]  # fmt: skip
ALL = list_parsers()
# formats that carry arguments as JSON text, so any JSON object round-trips exactly
JSON_FORMATS = [
    "hermes", "longcat", "mistral", "llama3_json", "llama4_json", "deepseek_v3",
    "deepseek_v3_1", "kimi_k2",
]  # fmt: skip

CALL_A = ("get_weather", {"city": "Paris", "days": 3})
CALL_B = ("second_tool", {"path": "src/app.py", "lines": [1, 2, 3], "force": False})
CALL_C = ("third", {})
UNICODE = ("translate", {"text": "Привет, мир", "to": "日本語", "note": "naïve café 🌧"})
NESTED = (
    "query",
    {
        "filter": {
            "and": [{"field": "x", "gt": 1.5}, {"or": [{"y": None}, {"z": [1, {"w": "deep"}]}]}]
        }
    },
)


def calls_of(result: tcp.ParseResult) -> list[tuple[str, dict[str, Any]]]:
    _, calls = result
    assert calls is not None
    for call in calls:
        assert isinstance(call, ChatCompletionMessageToolCall)
        assert call.type == "function" and call.id
    return [(c.function.name, json.loads(c.function.arguments)) for c in calls]


def test_public_names() -> None:
    assert tcp.__all__ == sorted(tcp.__all__)
    assert set(tcp.__all__) == {
        "ChatCompletionMessageToolCall", "ParseResult", "ToolCallParser", "get_parser",
        "list_parsers", "register_parser",
        # the former layer's names
        "PARSER_REGISTRY", "DeepSeekV31ToolCallParser", "DeepSeekV3ToolCallParser",
        "Glm45ToolCallParser", "Glm47ToolCallParser", "HermesToolCallParser",
        "KimiK2ToolCallParser", "LlamaToolCallParser", "LongcatToolCallParser",
        "MistralToolCallParser", "Qwen3CoderToolCallParser", "QwenToolCallParser",
    }  # fmt: skip
    assert all(hasattr(tcp, name) for name in tcp.__all__)


def test_every_required_name_is_registered() -> None:
    assert set(REQUIRED) <= set(ALL)
    assert sorted(ALL) == ALL


# ---------------------------------------------------------------- the contract, for every parser


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize(
    "text",
    [
        "The answer is 42.",
        'Plain JSON that is not a call: {"answer": 42, "unit": "m"}',
        "Some <b>markup</b> and [brackets] and a list: [1, 2]",
        "   padded text stays untouched  \n",
    ],
)
def test_no_calls_returns_text_unchanged(name: str, text: str) -> None:
    assert get_parser(name).parse(text) == (text, None)


@pytest.mark.parametrize("name", ALL)
def test_empty_text(name: str) -> None:
    assert get_parser(name).parse("") == ("", None)


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("calls", [[CALL_A], [CALL_A, CALL_B, CALL_C]], ids=["one", "several"])
def test_calls_without_text(name: str, calls: list) -> None:
    parser = get_parser(name)
    result = parser.parse(parser.render(None, calls))
    assert result[0] is None
    assert calls_of(result) == calls


@pytest.mark.parametrize("name", ALL)
def test_several_calls_get_distinct_deterministic_ids(name: str) -> None:
    parser = get_parser(name)
    text = parser.render(None, [CALL_A, CALL_B, CALL_A])
    first, second = parser.parse(text)[1], parser.parse(text)[1]
    assert first is not None and second is not None
    ids = [c.id for c in first]
    assert ids == [c.id for c in second]
    assert len(set(ids)) == 3  # the same call twice in one message still gets two ids


@pytest.mark.parametrize("name", [n for n in ALL if not get_parser(n).keeps_model_ids])
def test_the_same_call_in_another_turn_gets_another_id(name: str) -> None:
    """Ids hash the whole raw text: code mapping ids back to raw text must not mix turns up."""
    parser = get_parser(name)
    _, first = parser.parse(parser.render("Turn one.", [CALL_A]))
    _, again = parser.parse(parser.render("Turn one.", [CALL_A]))
    _, other = parser.parse(parser.render("Turn three.", [CALL_A]))
    assert first and again and other
    assert first[0].id == again[0].id != other[0].id


@pytest.mark.parametrize("name", ALL)
def test_text_before_calls_is_the_stripped_content(name: str) -> None:
    parser = get_parser(name)
    content, _ = result = parser.parse(
        parser.render("  Let me check that for you.\n", [CALL_A, CALL_B])
    )
    assert content == "Let me check that for you."
    assert calls_of(result) == [CALL_A, CALL_B]


@pytest.mark.parametrize("name", ALL)
def test_unicode_arguments_survive_unescaped(name: str) -> None:
    parser = get_parser(name)
    result = parser.parse(parser.render("Перевожу…", [UNICODE]))
    assert result[0] == "Перевожу…"
    assert calls_of(result) == [UNICODE]
    assert "Привет, мир" in result[1][0].function.arguments  # ensure_ascii=False


@pytest.mark.parametrize("name", ALL)
def test_nested_json_arguments(name: str) -> None:
    parser = get_parser(name)
    assert calls_of(parser.parse(parser.render(None, [NESTED, CALL_A]))) == [NESTED, CALL_A]


@pytest.mark.parametrize("name", ALL)
def test_truncated_output_keeps_the_complete_calls(name: str) -> None:
    """Cut the text at every point inside the second call: the first call always survives."""
    parser = get_parser(name)
    text = parser.render("Working on it.", [CALL_A, CALL_B])
    start = text.index("second_tool")
    for cut in range(start, len(text)):
        content, calls = parser.parse(text[:cut])
        assert content == "Working on it.", (cut, text[:cut])
        assert calls is not None and 1 <= len(calls) <= 2, (cut, text[:cut])
        assert (calls[0].function.name, json.loads(calls[0].function.arguments)) == CALL_A
        if len(calls) == 2:
            assert calls[1].function.name == "second_tool"
            assert isinstance(json.loads(calls[1].function.arguments), dict)


@pytest.mark.parametrize("name", ALL)
def test_truncated_inside_the_only_call_never_raises(name: str) -> None:
    parser = get_parser(name)
    text = parser.render(None, [CALL_B])
    for cut in range(len(text)):
        content, calls = parser.parse(text[:cut])
        if calls is None:
            assert content == text[:cut]
        else:
            assert [c.function.name for c in calls] == ["second_tool"]


MALFORMED = [
    "<tool_call>",
    "<tool_call>{not json}</tool_call>",
    '<tool_call>{"arguments": {}}</tool_call>',
    '<tool_call>{"name": "has space", "arguments": {}}</tool_call>',
    '<tool_call>{"name": "f", "arguments": [1, 2]}</tool_call>',
    '<tool_call>{"name": "f", "arguments": "not json"}</tool_call>',
    "<tool_call></tool_call></tool_call><tool_call>",
    "<longcat_tool_call>]]]</longcat_tool_call>",
    "[TOOL_CALLS]",
    "[TOOL_CALLS][TOOL_CALLS]{",
    '[TOOL_CALLS] [{"name": 1}]',
    '[TOOL_CALLS]f{"a": }[TOOL_CALLS]g{}',
    "<|python_tag|>",
    '<|python_tag|>{"name": "f", "parameters": 3}',
    "<|python_tag|>print('hi')",
    "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜><｜tool▁call▁end｜>",
    "<｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{oops}\n```<｜tool▁call▁end｜>",
    "<｜tool▁call▁begin｜>f<｜tool▁sep｜>[1]<｜tool▁call▁end｜>",
    "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_end|>",
    "<|tool_call_begin|>:<|tool_call_argument_begin|>{}<|tool_call_end|>",
    "<tool_call>f\n<arg_key>a</arg_key>\n<arg_value>1</arg_value>junk</tool_call>",
    "<tool_call>f<arg_key>a</arg_key></tool_call>",
    "<function=>",
    "<function=f x>",
    "<function=<function=<parameter=>",
    "[" * 5000 + "<tool_call>" + "{" * 5000,
    '<tool_call>{"name": "f", "arguments": ' + "[" * 100000 + "</tool_call>",
    "\x00\ud800 <tool_call>\x00</tool_call>",
]


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("text", MALFORMED, ids=range(len(MALFORMED)))
def test_malformed_input_never_raises(name: str, text: str) -> None:
    content, calls = get_parser(name).parse(text)
    if calls is None:
        assert content == text
    else:  # whatever was accepted is well-formed
        for call in calls:
            assert re.fullmatch(r"[^\s<>{}\[\]\"'`]+", call.function.name)
            assert isinstance(json.loads(call.function.arguments), dict)


@pytest.mark.parametrize("name", ALL)
def test_non_string_input_is_returned(name: str) -> None:
    assert get_parser(name).parse(None) == (None, None)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ALL)
def test_render_without_calls_is_the_content(name: str) -> None:
    parser = get_parser(name)
    assert parser.render("just text", []) == "just text"
    assert parser.render(None, []) == ""


@pytest.mark.parametrize("name", ALL)
def test_render_is_deterministic(name: str) -> None:
    parser = get_parser(name)
    assert parser.render("x", [NESTED, UNICODE]) == get_parser(name).render("x", [NESTED, UNICODE])


_MARKER_BITS = [
    "<tool_call>", "</tool_call>", "{", "}", '"name"', ":", '"f"', '"arguments"', "[TOOL_CALLS]",
    "<|python_tag|>", ";", "\n", "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>", "<｜tool▁call▁end｜>",
    "<|tool_call_begin|>", "<|tool_call_argument_begin|>", "<|tool_call_end|>", "<arg_key>",
    "</arg_key>", "<arg_value>", "</arg_value>", "<function=", "<parameter=", ">", "</function>",
    "</parameter>", "x", " ", "1", "[", "]", "```json",
]  # fmt: skip


@pytest.mark.parametrize("name", sorted({get_parser(n).name for n in ALL}))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pieces=st.lists(st.sampled_from(_MARKER_BITS), max_size=30))
def test_fuzzed_marker_soup_never_raises(name: str, pieces: list[str]) -> None:
    text = "".join(pieces)
    content, calls = get_parser(name).parse(text)
    if calls is None:
        assert content == text
    else:
        assert calls and all(c.id for c in calls)


_json_scalar = (
    st.none()
    | st.booleans()
    | st.integers(-(10**6), 10**6)
    | st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="<[{"), max_size=12)
)
_json_value = st.recursive(
    _json_scalar,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
_args = st.dictionaries(
    st.text(st.characters(blacklist_characters="<[{"), max_size=8), _json_value, max_size=4
)
_tool_name = st.from_regex(r"[A-Za-z_][A-Za-z0-9_\-]{0,20}", fullmatch=True)


@pytest.mark.parametrize("name", JSON_FORMATS)
@settings(max_examples=40, deadline=None)
@given(calls=st.lists(st.tuples(_tool_name, _args), min_size=1, max_size=3))
def test_round_trip_any_json_arguments(name: str, calls: list) -> None:
    parser = get_parser(name)
    assert calls_of(parser.parse(parser.render("Sure.", calls))) == calls


# --------------------------------------------------------------------------------- the registry


def test_get_parser_unknown_name_lists_the_available_ones() -> None:
    with pytest.raises(KeyError) as info:
        get_parser("hermes2")
    message = str(info.value)
    assert "'hermes2'" in message
    for name in REQUIRED:
        assert name in message


def test_get_parser_is_case_insensitive_and_returns_fresh_instances() -> None:
    first, second = get_parser("Hermes"), get_parser("hermes")
    assert type(first) is type(second) and first is not second
    assert isinstance(first, ToolCallParser)


@pytest.mark.parametrize(
    ("alias", "canonical"), [("llama4_json", "llama3_json"), ("deepseek_v31", "deepseek_v3_1")]
)
def test_aliases_resolve_to_the_canonical_parser(alias: str, canonical: str) -> None:
    parser = get_parser(alias)
    assert type(parser) is type(get_parser(canonical))
    assert parser.name == canonical


def test_list_parsers_is_a_copy() -> None:
    names = list_parsers()
    names.clear()
    assert "hermes" in list_parsers()


@pytest.fixture
def scratch_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """Let a test register parsers without leaking them into the rest of the session."""
    from environments.tool_call_parsers import _registry

    monkeypatch.setattr(_registry, "_PARSERS", dict(_registry._PARSERS))


class _Echo(ToolCallParser):
    def _parse(self, text: str):  # type: ignore[override]
        return "", [tcp._base.make_call("echo", {"text": text}, 0)]

    def render(self, content, calls):  # type: ignore[override]
        return content or ""


@pytest.mark.usefixtures("scratch_registry")
def test_register_parser_with_aliases() -> None:
    register_parser("echo_fmt", "echo_alias")(_Echo)
    assert {"echo_fmt", "echo_alias"} <= set(list_parsers())
    _, calls = get_parser("echo_alias").parse("hi")
    assert calls is not None and json.loads(calls[0].function.arguments) == {"text": "hi"}


@pytest.mark.usefixtures("scratch_registry")
@pytest.mark.parametrize("names", [("hermes",), ("fresh_name", "qwen"), ("dup", "DUP")])
def test_register_parser_refuses_duplicates(names: tuple[str, ...]) -> None:
    with pytest.raises(ValueError, match=r"already registered|twice"):
        register_parser(*names)(type("Dup", (_Echo,), {}))
    assert "fresh_name" not in list_parsers()  # nothing half-registered


@pytest.mark.usefixtures("scratch_registry")
def test_register_parser_names_the_holder_of_a_taken_name() -> None:
    with pytest.raises(ValueError, match=r"'hermes' by .*HermesToolCallParser"):
        register_parser("hermes")(type("Other", (_Echo,), {}))


@pytest.mark.usefixtures("scratch_registry")
def test_register_parser_rejects_non_parsers() -> None:
    with pytest.raises(TypeError, match="ToolCallParser subclass"):
        register_parser("not_a_parser")(dict)  # type: ignore[arg-type]


# ------------------------------------------------------------- format facts, from real-shaped text


def parse(name: str, text: str) -> tuple[str | None, list[tuple[str, dict[str, Any]]] | None]:
    content, calls = get_parser(name).parse(text)
    if calls is None:
        return content, None
    return content, [(c.function.name, json.loads(c.function.arguments)) for c in calls]


QWEN_TWO_CALLS = (
    "I'll look both up.\n<tool_call>\n"
    '{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n<tool_call>\n'
    '{"name": "get_time", "arguments": {"tz": "Europe/Paris"}}\n</tool_call>'
)


@pytest.mark.parametrize("name", ["hermes", "qwen"])
def test_hermes_several_calls_as_qwen_writes_them(name: str) -> None:
    assert parse(name, QWEN_TWO_CALLS) == (
        "I'll look both up.",
        [("get_weather", {"city": "Paris"}), ("get_time", {"tz": "Europe/Paris"})],
    )


@pytest.mark.parametrize(
    ("tail", "expected_names"),
    [
        ('<tool_call>\n{"name": "c", "arguments": {"x": 1}}\n', ["a", "c"]),  # unclosed, complete
        ('<tool_call>\n{"name": "c", "arguments": {"x": 1}}</tool_', ["a", "c"]),  # cut in the tag
        ('<tool_call>\n{"name": "c", "arguments": {"x": ', ["a"]),  # cut in the JSON: dropped
        ("<tool_call>", ["a"]),
    ],
)
def test_hermes_unclosed_final_call(tail: str, expected_names: list[str]) -> None:
    text = '<tool_call>{"name": "a", "arguments": {}}</tool_call>\n' + tail
    _, calls = parse("hermes", text)
    assert calls is not None and [n for n, _ in calls] == expected_names


def test_hermes_only_an_incomplete_call_gives_the_text_back() -> None:
    text = 'Thinking...<tool_call>\n{"name": "c", "argum'
    assert parse("hermes", text) == (text, None)


def test_hermes_closed_malformed_call_fails_the_whole_message() -> None:
    text = '<tool_call>{"name": "a", "arguments": {}}</tool_call><tool_call>{oops}</tool_call>'
    assert parse("hermes", text) == (text, None)


def test_hermes_accepts_arguments_as_a_json_string_and_missing_arguments() -> None:
    text = (
        '<tool_call>{"name": "a", "arguments": "{\\"k\\": [1]}"}</tool_call>'
        '<tool_call>{"name": "b"}</tool_call>'
    )
    assert parse("hermes", text) == (None, [("a", {"k": [1]}), ("b", {})])


def test_hermes_render_matches_the_chat_template_shape() -> None:
    text = get_parser("hermes").render("Hi", [("f", {"a": "é"})])
    assert text == 'Hi\n<tool_call>\n{"name": "f", "arguments": {"a": "é"}}\n</tool_call>'


def test_hermes_render_is_what_the_project_chat_template_writes() -> None:
    """Phase 2 re-renders history through the chat template; a parsed-then-rendered turn must be
    byte-identical to what the template produces from the parsed calls."""
    tokenizer_mod = pytest.importorskip("hermes_replay._tokenizers.bundled")
    parser = get_parser("hermes")
    raw = parser.render("Sure", [UNICODE, NESTED])
    content, calls = parser.parse(raw)
    assert calls is not None
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": content, "tool_calls": [c.model_dump() for c in calls]},
    ]
    templated = tokenizer_mod.load_tokenizer().apply_chat_template(messages, tokenize=False)
    assert f"<|im_start|>assistant\n{raw}<|im_end|>" in templated


def test_longcat_uses_its_own_tags_only() -> None:
    longcat = '<longcat_tool_call>{"name": "f", "arguments": {"a": 1}}</longcat_tool_call>'
    assert parse("longcat", "Sure. " + longcat) == ("Sure.", [("f", {"a": 1})])
    assert parse("longcat", QWEN_TWO_CALLS) == (QWEN_TWO_CALLS, None)
    assert parse("hermes", longcat) == (longcat, None)


@pytest.mark.parametrize(
    "text",
    [
        '[TOOL_CALLS] [{"name": "add", "arguments": {"a": 1, "b": 2}}, '
        '{"name": "mul", "arguments": {"a": 3, "b": 4}}]',
        '[TOOL_CALLS][{"name": "add", "arguments": {"a": 1, "b": 2}},{"name": "mul", '
        '"arguments": {"a": 3, "b": 4}}]</s>',
        '[TOOL_CALLS]add{"a": 1, "b": 2}[TOOL_CALLS]mul{"a": 3, "b": 4}',
        '[TOOL_CALLS]add[ARGS]{"a": 1, "b": 2}[TOOL_CALLS]mul[ARGS]{"a": 3, "b": 4}</s>',
        '[TOOL_CALLS]add[CALL_ID]a1B2c3D4e[ARGS]{"a": 1, "b": 2}'
        '[TOOL_CALLS]mul[CALL_ID]f5G6h7I8j[ARGS]{"a": 3, "b": 4}',
    ],
    ids=["legacy-array", "legacy-compact-eos", "v11", "v11-args-marker", "v11-call-id"],
)
def test_mistral_both_generations(text: str) -> None:
    assert parse("mistral", "Computing. " + text) == (
        "Computing.",
        [("add", {"a": 1, "b": 2}), ("mul", {"a": 3, "b": 4})],
    )


def test_mistral_legacy_single_object_and_truncated_array() -> None:
    assert parse("mistral", '[TOOL_CALLS] {"name": "f", "arguments": {}}') == (None, [("f", {})])
    truncated = '[TOOL_CALLS] [{"name": "f", "arguments": {}}, {"name": "g", "argu'
    assert parse("mistral", truncated) == (None, [("f", {})])


def test_mistral_ids_are_nine_alphanumerics() -> None:
    _, calls = get_parser("mistral").parse('[TOOL_CALLS]a{}[TOOL_CALLS]b{"x": 1}')
    assert calls is not None
    assert all(re.fullmatch(r"[A-Za-z0-9]{9}", c.id) for c in calls)
    assert calls[0].id != calls[1].id


def test_mistral_legacy_render_round_trips() -> None:
    parser = get_parser("mistral")
    parser.render_v11 = False  # type: ignore[attr-defined]
    text = parser.render(None, [CALL_A, CALL_B])
    assert text.startswith("[TOOL_CALLS] [{")
    assert calls_of(parser.parse(text)) == [CALL_A, CALL_B]


_F = '{"name": "f", "parameters": {"a": 1}}'
_F_ARGS = '{"name": "f", "arguments": {"a": 1}}'
_G = '{"name": "g", "parameters": {}}'


@pytest.mark.parametrize("name", ["llama3_json", "llama4_json"])
@pytest.mark.parametrize(
    ("text", "content"),
    [
        (f"<|python_tag|>{_F}; {_G}", None),
        (f"{_F}\n{_G}<|eom_id|>", None),
        (f"Calling now.\n{_F_ARGS};{_G}", "Calling now."),
        (f"Calling now.<|python_tag|>[{_F}, {_G}]", "Calling now."),
    ],
    ids=["tag-semicolon", "newline-eom", "text-before", "array"],
)
def test_llama_json_calls(name: str, text: str, content: str | None) -> None:
    assert parse(name, text) == (content, [("f", {"a": 1}), ("g", {})])


def test_llama_json_ignores_objects_that_are_not_calls() -> None:
    text = 'The config is {"name": "prod", "replicas": 3}.'
    assert parse("llama3_json", text) == (text, None)


DEEPSEEK_V3 = (
    "Let me check.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n"
    '```json\n{\n  "city": "Paris",\n  "unit": "celsius"\n}\n```<｜tool▁call▁end｜>\n'
    "<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_time\n```json\n{}\n```<｜tool▁call▁end｜>"
    "<｜tool▁calls▁end｜><｜end▁of▁sentence｜>"
)


def test_deepseek_v3_multiline_several_calls() -> None:
    assert parse("deepseek_v3", DEEPSEEK_V3) == (
        "Let me check.",
        [("get_weather", {"city": "Paris", "unit": "celsius"}), ("get_time", {})],
    )
    assert parse("deepseek_v3_1", DEEPSEEK_V3) == (DEEPSEEK_V3, None)  # typed form is not v3.1


def test_deepseek_v3_rejects_unknown_call_types() -> None:
    text = DEEPSEEK_V3.replace("function<｜tool▁sep｜>get_time", "retrieval<｜tool▁sep｜>get_time")
    assert parse("deepseek_v3", text) == (text, None)


@pytest.mark.parametrize("name", ["deepseek_v3_1", "deepseek_v31"])
def test_deepseek_v3_1(name: str) -> None:
    text = (
        "Sure<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>"
        '{"city": "東京"}<｜tool▁call▁end｜><｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{}'
        "<｜tool▁call▁end｜><｜tool▁calls▁end｜>"
    )
    assert parse(name, text) == ("Sure", [("get_weather", {"city": "東京"}), ("get_time", {})])


KIMI = (
    "I'll check.<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
    '<|tool_call_argument_begin|>{"city": "Paris"}<|tool_call_end|>'
    "<|tool_call_begin|>functions.web.search:1 <|tool_call_argument_begin|> {} <|tool_call_end|>"
    "<|tool_calls_section_end|>"
)


def test_kimi_k2_keeps_the_model_ids() -> None:
    _, calls = get_parser("kimi_k2").parse(KIMI)
    assert calls is not None
    assert [c.id for c in calls] == ["functions.get_weather:0", "functions.web.search:1"]
    assert parse("kimi_k2", KIMI) == (
        "I'll check.",
        [("get_weather", {"city": "Paris"}), ("web.search", {})],
    )


def test_kimi_k2_singular_section_marker_and_no_section() -> None:
    singular = KIMI.replace("<|tool_calls_section_begin|>", "<|tool_call_section_begin|>")
    assert parse("kimi_k2", singular)[0] == "I'll check."
    bare = KIMI.replace("<|tool_calls_section_begin|>", "\n")
    content, calls = parse("kimi_k2", bare)
    assert content == "I'll check." and calls is not None and len(calls) == 2


GLM45 = (
    "Checking.\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>New York</arg_value>\n"
    "<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n"
    '<arg_key>opts</arg_key>\n<arg_value>{"unit": "C", "hourly": [1, 2]}</arg_value>\n'
    "<arg_key>exact</arg_key>\n<arg_value>True</arg_value>\n"
    "<arg_key>tags</arg_key>\n<arg_value>('a', 'b')</arg_value>\n</tool_call>\n"
    "<tool_call>get_time\n</tool_call>"
)
GLM45_CALLS = [
    (
        "get_weather",
        {
            "city": "New York",
            "days": 3,
            "opts": {"unit": "C", "hourly": [1, 2]},
            "exact": True,
            "tags": ["a", "b"],
        },
    ),
    ("get_time", {}),
]


@pytest.mark.parametrize("name", ["glm45", "glm47"])
def test_glm_values_are_json_then_python_literals_then_strings(name: str) -> None:
    assert parse(name, GLM45) == ("Checking.", GLM45_CALLS)


def test_glm47_tolerates_a_literal_backslash_n_and_no_newlines() -> None:
    text = (
        "<tool_call>get_weather<arg_key>city</arg_key>\\n<arg_value>Paris</arg_value>\\n"
        "<arg_key>days</arg_key> <arg_value>2</arg_value></tool_call>"
    )
    assert parse("glm47", text) == (None, [("get_weather", {"city": "Paris", "days": 2})])
    assert parse("glm45", text) == (text, None)


def test_glm_keeps_string_whitespace_and_drops_an_unclosed_final_call() -> None:
    text = (
        "<tool_call>write\n<arg_key>body</arg_key>\n<arg_value>line 1\nline 2\n</arg_value>\n"
        "</tool_call><tool_call>other\n<arg_key>x</arg_key>\n<arg_value>1</arg_value>"
    )
    assert parse("glm45", text) == (None, [("write", {"body": "line 1\nline 2\n"})])


QWEN3_CODER = (
    "Let me run it.\n<tool_call>\n<function=run_shell>\n<parameter=command>\n"
    "pytest -q\n  --maxfail=1\n</parameter>\n<parameter=timeout>\n60\n</parameter>\n"
    "</function>\n</tool_call>\n<tool_call>\n<function=write_file>\n<parameter=path>\na.py\n"
    '</parameter>\n<parameter=meta>\n{"mode": "w", "lines": [1, 2]}\n</parameter>\n</function>\n'
    "</tool_call>"
)


def test_qwen3_coder_calls() -> None:
    assert parse("qwen3_coder", QWEN3_CODER) == (
        "Let me run it.",
        [
            ("run_shell", {"command": "pytest -q\n  --maxfail=1", "timeout": 60}),
            ("write_file", {"path": "a.py", "meta": {"mode": "w", "lines": [1, 2]}}),
        ],
    )


@pytest.mark.parametrize(
    "text",
    [
        "<function=f>\n<parameter=a>\nx\n</parameter>\n<parameter=b>\n2\n</parameter>\n</function>",
        "Text first <function=f><parameter=a>x<parameter=b>2</function>",  # unclosed parameters
        "<tool_call><function=f><parameter=a>x</parameter><parameter=b>2",  # cut at the end
    ],
    ids=["no-wrapper", "unclosed-parameters", "unclosed-function"],
)
def test_qwen3_coder_is_tolerant(text: str) -> None:
    _, calls = parse("qwen3_coder", text)
    assert calls == [("f", {"a": "x", "b": 2})]


_PARSER_MODULE = """
from environments.tool_call_parsers import ToolCallParser, register_parser

@register_parser("mine_fmt")
class MineParser(ToolCallParser):
    def _parse(self, text):
        return text, None

    def render(self, content, calls):
        return content or ""
"""


@pytest.mark.usefixtures("scratch_registry")
def test_a_module_run_twice_registers_its_parser_again(tmp_path) -> None:
    import runpy

    module = tmp_path / "parser_module.py"
    module.write_text(_PARSER_MODULE, encoding="utf-8")
    runpy.run_path(str(module))
    second = runpy.run_path(str(module))  # same class source: accepted, the newest kept
    assert type(get_parser("mine_fmt")) is second["MineParser"]
    module.write_text(_PARSER_MODULE.replace("return text, None", "return None, None"),
                      encoding="utf-8")
    with pytest.raises(ValueError, match=r"'mine_fmt' by .*MineParser \(.*parser_module\.py:"):
        runpy.run_path(str(module))

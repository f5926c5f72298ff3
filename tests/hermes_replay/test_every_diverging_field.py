"""``diff`` and the miss report list every diverging field, not only the first: grouped by
field, the first three in full, the rest counted by name, ``-v`` for all — so a date that
changed in the system prompt never hides the question that changed below it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hermes_replay._cassette import load_cassette, write_cassette
from hermes_replay._cassette.matching import Matcher, field_changes, field_report
from hermes_replay._diff.compare import compare_paths
from hermes_replay._errors import CassetteMiss
from hermes_replay._session.index import RecordingIndex
from hermes_replay.cli import main

ROOT = Path(__file__).resolve().parents[2]
PROCESS = ROOT / "cassettes" / "terminal_test_env" / "process.jsonl"


def _request(system: str, question: str, **extra: object) -> dict:
    return {"method": "POST", "url": "http://h/v1/chat/completions",
            "body": {"model": "m", "max_tokens": 2048, **extra,
                     "messages": [{"role": "system", "content": system},
                                  {"role": "user", "content": question}]}}


def test_every_field_is_listed_and_the_first_three_are_shown_in_full() -> None:
    m = Matcher.build()
    old = m.render(_request("Today is 2026-12-01.", "What is 2+2?\nBe brief.",
                            temperature=1.0, top_p=1.0))
    new = m.render(_request("Today is 2026-12-02.", "What is 3+3?\nBe brief.",
                            temperature=0.0, top_p=0.5, max_completion_tokens=5))
    changes = field_changes(old, new)
    names = [c.field for c in changes]
    assert names == ["body.max_completion_tokens", "body.messages[0].content",
                     "body.messages[1].content", "body.temperature", "body.top_p"]
    # each field has its own lines: the date and the question are two findings
    assert changes[2].lines == ("-body.messages[1].content | What is 2+2?",
                                "+body.messages[1].content | What is 3+3?",
                                " body.messages[1].content | Be brief.")
    short = field_report(changes)
    assert short[0].startswith("5 field(s) differ: body.max_completion_tokens, ")
    assert "+body.messages[1].content | What is 3+3?" in short and "+body.top_p: 0.5" \
        not in short
    assert short[-1] == ("… and 2 more field(s) differ: body.temperature, body.top_p "
                         "(-v shows all)")
    full = field_report(changes, verbose=True)
    assert "+body.top_p: 0.5" in full and "+body.max_completion_tokens: 5" in full


def test_a_miss_lists_every_field_and_cli_v_shows_all(tmp_path: Path) -> None:
    from hermes_replay._cassette import Cassette, CassetteHeader, Interaction

    m = Matcher.build()
    inter = Interaction(rollout="r", seq=0, request=_request(
        "Today is 2026-12-01.", "What is 2+2?", temperature=1.0, top_p=1.0, seed=1),
        response={"status": 200, "body": {}})
    index = RecordingIndex.build(Cassette(tmp_path / "c.jsonl", CassetteHeader(), [inter], {}),
                                 m)
    miss = index.diagnose(tmp_path / "c.jsonl", "r", 0, _request(
        "Today is 2026-12-02.", "What is 3+3?", temperature=0.0, top_p=0.5, seed=2), m)
    assert "5 field(s) differ" in miss.short  # fields in rendered (sorted) order:
    assert "… and 2 more field(s) differ: body.temperature, body.top_p" in miss.short
    assert miss.short.count("\n-") == 3 and miss.diff.count("\n-") == 5
    text = str(CassetteMiss([miss], cassette="c.jsonl"))
    assert "body.messages[1].content" in text and "more field(s) differ" in text
    # the CLI report: the same, and -v shows every field
    from hermes_replay._corpus.misses import miss_report

    error = CassetteMiss([miss], cassette="c.jsonl")
    assert "more field(s) differ" in miss_report(error, verbose=False, hint="next")
    full = miss_report(error, verbose=True, hint="next")
    assert "more field(s) differ" not in full and "+body.top_p: 0.5" in full


def test_diff_names_every_diverging_field_of_the_turn(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture) -> None:
    c = load_cassette(PROCESS)
    rid = next(iter(c.rollouts))
    out = []
    for inter in c.interactions:
        if inter.rollout == rid and inter.seq == 0:
            body = json.loads(json.dumps(inter.request["body"]))
            body["messages"][0]["content"] += " Today is 2026-12-02. (edited)"
            body["max_tokens"] = 77  # the first field in order: it used to hide the rest
            body["temperature"] = 0.25
            inter = inter.model_copy(update={"request": {**inter.request, "body": body}})
        out.append(inter)
    b = tmp_path / "b.jsonl"
    write_cassette(b, c.header, out, {r: dict(o) for r, o in c.outcomes.items()}, c.tool_calls)
    (div,) = compare_paths(PROCESS, b).divergences
    assert div.turn == 1 and div.field == "request.max_tokens"
    assert div.fields == ["request.max_tokens", "request.messages[0].content",
                          "request.temperature"]
    assert "(edited)" in div.diff and "Today is 2026-12-02." in div.diff

    assert main(["diff", str(PROCESS), str(b)]) == 1
    shown = capsys.readouterr().out
    assert "field(s) differ: " in shown and "(edited)" in shown and "+request.max_tokens: 77" \
        in shown
    assert main(["diff", str(PROCESS), str(b), "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert "request.max_tokens" in [ch["field"] for ch in doc["divergences"][0]["changes"]]

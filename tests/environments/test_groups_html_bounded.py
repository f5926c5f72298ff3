"""groups.html is atroposlib's page, built from messages and scores only, huge messages cut."""

from __future__ import annotations

import json
from pathlib import Path

import atroposlib.envs.base as atropos_base
import pytest
from atroposlib.frontend.jsonl2html import generate_html
from hypothesis import given, settings
from hypothesis import strategies as st

from environments._groups_html import bounded_groups_html, groups_html, pick

scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**12, 10**12),
                    st.floats(allow_nan=False, allow_infinity=False),
                    st.text(alphabet=st.characters(codec="utf-8"), max_size=12))
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=5), st.dictionaries(st.text(max_size=6), inner, max_size=4)),
    max_leaves=25)
numbers = st.lists(st.one_of(st.integers(-100, 10**6), st.lists(st.integers(), max_size=3)),
                   max_size=30)


@settings(max_examples=200, deadline=None)
@given(obj=st.dictionaries(st.sampled_from(
           ["messages", "scores", "tokens", "masks", "over\"rides", "ref_logprobs", "é"]),
           st.one_of(values, numbers), max_size=7),
       separators=st.sampled_from([(", ", ": "), (",", ":"), (" ,\n", " :\t")]),
       ensure_ascii=st.booleans())
def test_pick_reads_the_kept_keys_exactly_as_json_does(obj, separators, ensure_ascii):
    line = json.dumps(obj, separators=separators, ensure_ascii=ensure_ascii)
    expected = {k: v for k, v in json.loads(line).items() if k in ("messages", "scores")}
    assert pick("  " + line + "\n") == expected


@pytest.mark.parametrize("bad", ["[1, 2]", '{"tokens": [1, 2', '{"a" 1}', '{"a": 1,}', ""])
def test_pick_refuses_what_is_not_one_json_object(bad):
    with pytest.raises(ValueError):
        pick(bad)


def _group(content: str, score: float) -> dict:
    messages = [[{"role": "user", "content": "Add 2 and 2."},
                 {"role": "assistant", "content": content}]] * 2
    return {"tokens": [list(range(300))] * 2, "masks": [[-100] * 300] * 2,
            "scores": [score, -score], "messages": messages, "overrides": [{"a": "b"}] * 2,
            "ref_logprobs": None}


def _write(path: Path, groups: list[dict]) -> None:
    path.write_text("".join(json.dumps(g) + "\n" for g in groups) + "\nnot json\n",
                    encoding="utf-8")


def test_the_page_is_byte_identical_to_atroposlibs_for_ordinary_groups(tmp_path):
    ours, theirs = tmp_path / "ours" / "groups.jsonl", tmp_path / "theirs" / "groups.jsonl"
    for path in (ours, theirs):
        path.parent.mkdir()
        _write(path, [_group("**Four.** `2 + 2` = 4\n\n| a | b |\n|---|---|\n| 1 | 2 |", 1.0),
                      _group("Five? <b>no</b> & more", 0.5)])
    before = ours.read_bytes()
    groups_html(ours)
    generate_html(str(theirs))
    assert ours.with_suffix(".html").read_bytes() == theirs.with_suffix(".html").read_bytes()
    assert "Four" in ours.with_suffix(".html").read_text()
    assert ours.read_bytes() == before  # the data file is never rewritten


def test_a_huge_message_is_cut_on_the_page_and_kept_whole_in_the_jsonl(tmp_path):
    path = tmp_path / "groups.jsonl"
    huge = "head " + "filler words " * 100_000 + " tail"  # ~1.3 M characters
    _write(path, [_group(huge, 1.0)])
    groups_html(path, limit=10_000)
    page = path.with_suffix(".html").read_text()
    assert len(page) < 60_000
    assert "head" in page and "tail" in page and "characters left out of this page" in page
    assert json.loads(path.read_text().splitlines()[0])["messages"][0][1]["content"] == huge


def test_the_swap_lasts_only_while_process_manager_runs():
    original = atropos_base.generate_html
    with bounded_groups_html():
        assert atropos_base.generate_html is groups_html
    assert atropos_base.generate_html is original
    with pytest.raises(RuntimeError), bounded_groups_html():
        raise RuntimeError("the run failed")
    assert atropos_base.generate_html is original

"""Options of the wrong shape are usage errors, never tracebacks or silent misreadings
(issue 25, items 16 and 23).

``trust_cassette="no"`` in a marker was truthy and ran tools on the host; ``ignore_paths="a.b"``
and ``normalizers="abc"`` were iterated per character; ``--ignore-path ...`` or ``[`` and an
unknown marker keyword ended in tracebacks.
"""

from __future__ import annotations

import pytest

import hermes_replay
from hermes_replay._runner.run import run_cassette
from hermes_replay._session.options import OptionError
from hermes_replay.cli import main


@pytest.mark.parametrize("bad", ["...", "[", "body.", "body..x", "body[x]", ""])
def test_bad_ignore_path_flag_is_a_usage_error(bad, tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        main(["replay", str(tmp_path), "--ignore-path", bad])
    err = capsys.readouterr().err
    assert stop.value.code == 2
    assert "is not a field path" in err and "body.messages[*].name" in err
    assert "Traceback" not in err


@pytest.mark.parametrize(("options", "expected"), [
    ({"ignore_paths": "body.metadata"}, r"ignore_paths must be a list of strings, e\.g\. "
                                        r"ignore_paths=\['body\.metadata'\]"),
    ({"ignore_paths": ["body..x"]}, r"is not a field path"),
    ({"normalizers": "abc"}, r"normalizers must be a list of built-in names or \(regex, "
                             r"replacement\) pairs, e\.g\. normalizers=\['abc'\]"),
    ({"normalizers": [("(", "x")]}, r"'\(' is not a regex"),
    ({"normalizers": ["ab"]}, r"no built-in normalizer 'ab'; the built-ins are uuid, datetime"),
    ({"normalizers": [("a" * 501, "x")]}, r"501 characters long \(at most 500\)"),
    ({"normalizers": [("a", 1)]}, r"a normalizer is a built-in name .* or a \(regex, "
                                  r"replacement\) pair, not \('a', 1\)"),
    ({"strict": "yes"}, r"strict must be True or False"),
])
def test_cassette_refuses_options_of_the_wrong_shape(tmp_path, options, expected):
    with pytest.raises(OptionError, match=expected):
        hermes_replay.cassette(tmp_path / "c.jsonl", mode="record", **options)


def test_cassette_takes_built_in_names_and_pairs(tmp_path):
    """Built-in names are normalizers too (issue 26): the same shapes as ``--normalize``."""
    with hermes_replay.cassette(tmp_path / "c.jsonl", mode="record",
                                normalizers=["datetime", (r"\bREQ-\d+", "<req>")]) as session:
        assert session.matcher.canonical({"method": "POST", "url": "http://h/v1/x",
                                          "body": {"p": "REQ-12 at 2026-12-02 22:14"}}) \
            == session.matcher.canonical({"method": "POST", "url": "http://h/v1/x",
                                          "body": {"p": "REQ-7 at 2027-01-09 08:01"}})


def test_run_cassette_refuses_a_string_for_trust(tmp_path):
    with pytest.raises(OptionError, match=r"trust_cassette must be True or False, not 'no'"):
        run_cassette(tmp_path / "none.jsonl", out_dir=tmp_path / "out", trust_cassette="no")


MARKED = """
import pytest

@pytest.mark.cassette("c.jsonl", {options})
def test_x(replay_run):
    replay_run()
"""


@pytest.mark.parametrize(("options", "expected"), [
    ('trust_cassette="no"', "*trust_cassette must be True or False, not 'no'*"),
    ('ignore_paths="a.b"', "*ignore_paths must be a list of strings*"),
    ('normalizers="abc"', "*normalizers must be a list of built-in names or (regex, "
                          "replacement) pairs*"),
    ("ignore_path=['a.b']", "*unknown keyword 'ignore_path'; did you mean 'ignore_paths'?*"),
    ("colour=1", "*unknown keyword 'colour'; known: *"),
])
def test_marker_options_are_checked(pytester: pytest.Pytester, options, expected):
    pytester.makepyfile(test_marked=MARKED.format(options=options))
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.stdout.fnmatch_lines([f"*test_marked.py::test_x: @pytest.mark.cassette{expected}"])
    assert "Traceback" not in result.stdout.str()
    result.assert_outcomes(errors=0, failed=1)

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
    ({"normalizers": "abc"}, r"normalizers must be a list of \(regex, replacement\) pairs"),
    ({"normalizers": [("(", "x")]}, r"'\(' is not a regex"),
    ({"normalizers": ["ab"]}, r"normalizers holds 'ab'"),
    ({"strict": "yes"}, r"strict must be True or False"),
])
def test_cassette_refuses_options_of_the_wrong_shape(tmp_path, options, expected):
    with pytest.raises(OptionError, match=expected):
        hermes_replay.cassette(tmp_path / "c.jsonl", mode="record", **options)


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
    ('normalizers="abc"', "*normalizers must be a list of (regex, replacement) pairs*"),
    ("ignore_path=['a.b']", "*unknown keyword 'ignore_path'; did you mean 'ignore_paths'?*"),
    ("colour=1", "*unknown keyword 'colour'; known: *"),
])
def test_marker_options_are_checked(pytester: pytest.Pytester, options, expected):
    pytester.makepyfile(test_marked=MARKED.format(options=options))
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.stdout.fnmatch_lines([f"*test_marked.py::test_x: @pytest.mark.cassette{expected}"])
    assert "Traceback" not in result.stdout.str()
    result.assert_outcomes(errors=0, failed=1)

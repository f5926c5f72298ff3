"""``_pyast.parse``: a finalizer that parses during our parse cannot break it (gh-106905).

The suite once failed with ``SystemError: AST constructor recursion depth mismatch`` while the
env guard read an env file: a garbage collection inside ``ast.parse`` ran a finalizer that
parsed too (asyncio logging an abandoned task's exception; 3.11's traceback formatting
parses). Here collections that parse are made to fall inside the parse on purpose.
"""

from __future__ import annotations

import ast
import gc
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from hermes_replay._pyast import parse

SOURCE = "\n".join(f"def f{i}(a, b):\n    return [a + b * {i} for _ in range(3)]"
                   for i in range(300))


def _parse_amid_collections(parse_with: Callable[[str, str], ast.Module]) -> ast.Module:
    """Parse while every garbage collection runs Python that parses (as a finalizer would:
    a ``gc.callbacks`` entry runs at the same point), with collections frequent enough that
    some fall inside the conversion of the tree to objects."""
    def parses_at_each_collection(phase: str, info: dict) -> None:
        if phase == "start":
            parse_deeper(40)

    def parse_deeper(frames: int) -> None:
        # The nested parse leaves the shared count at its own starting depth, and the outer
        # parse fails unless that equals its depth where the last collection fell. Parsed
        # from right inside the callback, the two could match by chance (the nesting of the
        # tree at that point equal to the callback's few extra frames): which node the last
        # collection falls on shifts with the process's earlier allocations — whether the
        # tests' bytecode was cached or not flipped it. 40 frames deeper is past any nesting
        # of SOURCE's tree, so the counts never match by chance.
        if frames:
            parse_deeper(frames - 1)
        else:
            ast.parse("def g():\n    if x:\n        return (1, [2, {3: 4}])\n")

    threshold = gc.get_threshold()
    gc.set_threshold(20)
    gc.callbacks.append(parses_at_each_collection)
    try:
        return parse_with(SOURCE, "env.py")
    finally:
        gc.callbacks.remove(parses_at_each_collection)
        gc.set_threshold(*threshold)


def _in_a_fresh_interpreter(parser: str) -> str:
    """Run ``_parse_amid_collections`` with ``parser`` ("guarded" or "plain") in a new Python
    process and return what it printed.

    Why a new process: under xdist the plain parse once broke nothing (2026-12-03, one run
    in a full suite; it breaks every time in a new interpreter). ``gc.disable`` is
    process-wide, so any thread of an earlier test still running in the worker while it
    loads a cassette or checks an env file (both pause the collector for their read) keeps
    every collection out of the parse; the demonstration must not depend on that."""
    code = (
        "import ast, gc, sys\n"
        f"sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
        "from test_pyast import _parse_amid_collections\n"
        "from hermes_replay._pyast import parse\n"
        "def plain(source, filename):\n"
        "    return ast.parse(source, filename=filename)\n"
        f"with_ = parse if {parser!r} == 'guarded' else plain\n"
        "try:\n"
        "    tree = _parse_amid_collections(with_)\n"
        "    print('parsed', len(tree.body), [n.name for n in tree.body][:2], gc.isenabled())\n"
        "except SystemError as error:\n"
        "    print('SystemError', error)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_parse_survives_collections_that_parse() -> None:
    assert _in_a_fresh_interpreter("guarded") == "parsed 300 ['f0', 'f1'] True"
    tree = _parse_amid_collections(parse)  # and here, whatever else this process runs
    assert [node.name for node in tree.body][:2] == ["f0", "f1"] and len(tree.body) == 300


def test_plain_ast_parse_breaks_there_on_the_pythons_we_guard() -> None:
    # the hazard itself, so the test above is known to exercise it (fixed in CPython 3.11.8)
    out = _in_a_fresh_interpreter("plain")
    if sys.version_info[:3] <= (3, 11, 7):
        assert out.startswith("SystemError") and "recursion depth mismatch" in out, out
    else:
        assert out == "parsed 300 ['f0', 'f1'] True", out


def test_a_collector_the_caller_turned_off_stays_off() -> None:
    gc.disable()
    try:
        parse("x = 1\n", "x.py")
        assert not gc.isenabled()
    finally:
        gc.enable()

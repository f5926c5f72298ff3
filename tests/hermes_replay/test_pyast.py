"""``_pyast.parse``: a finalizer that parses during our parse cannot break it (gh-106905).

The suite once failed with ``SystemError: AST constructor recursion depth mismatch`` while the
env guard read an env file: a garbage collection inside ``ast.parse`` ran a finalizer that
parsed too (asyncio logging an abandoned task's exception; 3.11's traceback formatting
parses). Here collections that parse are made to fall inside the parse on purpose.
"""

from __future__ import annotations

import ast
import gc
import sys
from collections.abc import Callable

from hermes_replay._pyast import parse

SOURCE = "\n".join(f"def f{i}(a, b):\n    return [a + b * {i} for _ in range(3)]"
                   for i in range(300))


def _parse_amid_collections(parse_with: Callable[[str, str], ast.Module]) -> ast.Module:
    """Parse while every garbage collection runs Python that parses (as a finalizer would:
    a ``gc.callbacks`` entry runs at the same point), with collections frequent enough that
    some fall inside the conversion of the tree to objects."""
    def parses_at_each_collection(phase: str, info: dict) -> None:
        if phase == "start":
            ast.parse("def g():\n    if x:\n        return (1, [2, {3: 4}])\n")

    threshold = gc.get_threshold()
    gc.set_threshold(20)
    gc.callbacks.append(parses_at_each_collection)
    try:
        return parse_with(SOURCE, "env.py")
    finally:
        gc.callbacks.remove(parses_at_each_collection)
        gc.set_threshold(*threshold)


def test_a_parse_survives_collections_that_parse() -> None:
    tree = _parse_amid_collections(parse)
    assert [node.name for node in tree.body][:2] == ["f0", "f1"] and len(tree.body) == 300
    assert gc.isenabled()  # the pause ends with the parse


def test_plain_ast_parse_breaks_there_on_the_pythons_we_guard() -> None:
    # the hazard itself, so the test above is known to exercise it (fixed in CPython 3.11.8)
    def plain(source: str, filename: str) -> ast.Module:
        return ast.parse(source, filename=filename)

    try:
        _parse_amid_collections(plain)
        broke = False
    except SystemError as error:
        assert "recursion depth mismatch" in str(error)
        broke = True
    if sys.version_info[:3] <= (3, 11, 7):
        assert broke


def test_a_collector_the_caller_turned_off_stays_off() -> None:
    gc.disable()
    try:
        parse("x = 1\n", "x.py")
        assert not gc.isenabled()
    finally:
        gc.enable()

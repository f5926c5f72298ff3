"""Every Python interpreter hermes-replay starts, started one way: the working folder is never
on its import path.

Why: ``python -c`` and ``python -m`` put the working folder first on ``sys.path``. Run from a
downloaded folder of cassettes, a ``multiprocessing/`` or ``hermes_replay/`` package planted
there was imported in place of the real one, and ran — the fork server and resource tracker
of ``replay -j``, ``replay --twice``'s fresh interpreters (issue 46, finding 01). Python 3.11's
``-P`` (``PYTHONSAFEPATH``) leaves that folder out and changes nothing else (``PYTHONPATH``,
the user's site folder and the installed packages stay as they are, unlike ``-I``). Python
3.10 has neither: the command's first statement drops the folder before anything is
imported, and interpreters started by the standard library are started from an empty folder.

The interpreters started elsewhere (a Ray worker) take their path from the parent: see
``_corpus/on_ray.py``.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["SAFE_PATH_VARIABLE", "python_command", "safe_path_environ"]

SAFE_PATH_VARIABLE = "PYTHONSAFEPATH"
_HAS_SAFE_PATH = sys.version_info >= (3, 11)
# Python 3.10: `python BOOT -m module …` / `python BOOT -c code …`, sys.path[0] (the working
# folder) dropped first; argv is then what `-m module …` or `-c code …` would have given.
_BOOT = (
    "import sys\n"
    "del sys.path[0]\n"
    "_how, _what, *_rest = sys.argv[1:]\n"
    "if _how == '-m':\n"
    "    import runpy\n"
    "    sys.argv = [_what, *_rest]\n"
    "    runpy.run_module(_what, run_name='__main__', alter_sys=True)\n"
    "else:\n"
    "    sys.argv = ['-c', *_rest]\n"
    "    exec(compile(_what, '<string>', 'exec'), {'__name__': '__main__'})\n"
)
_environ_lock = threading.Lock()


def python_command(how: str, what: str, *args: str) -> list[str]:
    """The argv of a fresh interpreter of this Python running ``-m module`` or ``-c code``
    (``how``, ``what``) with ``args``, the working folder not on its ``sys.path``."""
    if how not in ("-m", "-c"):
        raise ValueError(f"python_command runs -m MODULE or -c CODE, not {how!r}")
    if _HAS_SAFE_PATH:
        return [sys.executable, "-P", how, what, *args]
    return [sys.executable, "-c", _BOOT, how, what, *args]


@contextmanager
def safe_path_environ() -> Iterator[None]:
    """While the standard library starts an interpreter of its own command line (the fork
    server and resource tracker of ``multiprocessing``): ``PYTHONSAFEPATH=1`` in the
    environment it inherits, and on Python 3.10 an empty working folder. Restored after;
    one caller at a time (the environment and the working folder are the process's)."""
    with _environ_lock:
        before = os.environ.get(SAFE_PATH_VARIABLE)
        os.environ[SAFE_PATH_VARIABLE] = "1"
        try:
            if _HAS_SAFE_PATH:
                yield
            else:
                with _empty_working_folder():
                    yield
        finally:
            if before is None:
                os.environ.pop(SAFE_PATH_VARIABLE, None)
            else:
                os.environ[SAFE_PATH_VARIABLE] = before


@contextmanager
def _empty_working_folder() -> Iterator[None]:
    import tempfile

    here = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="hermes-replay-empty-") as empty:
        os.chdir(empty)
        try:
            yield
        finally:
            os.chdir(here)

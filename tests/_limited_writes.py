"""A ``hermes-replay`` child whose writes stop at a file size limit (``RLIMIT_FSIZE``), the way
a full disk stops them, without harming the interpreters that run beside it.

CPython writes a module's bytecode with one unchecked ``write`` (importlib's
``_write_atomic``): under a size limit the write comes up short, the truncated ``.pyc`` is
renamed into place all the same, and every later import of that module, in any process that
shares the bytecode folder, fails with ``EOFError: marshal data too short``. The suite's
interpreters share one folder (``PYTHONPYCACHEPREFIX``, see conftest.py), so a limited child
that was the first to import a module broke tests far from its own. A limited child therefore
writes no bytecode (it still reads what others wrote), nor do the processes it starts.
"""

from __future__ import annotations

import marshal
import sys
from pathlib import Path

PRELUDE = (
    "import sys\n"
    "sys.dont_write_bytecode = True\n"
    "import resource, signal\n"
    "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a failed write, not a killed process\n"
)


def limited_code(limit: int, body: str) -> str:
    """Python source for ``-c``: the size limit in place, then ``body``."""
    return PRELUDE + f"resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit}))\n" + body


def limited_env(env: dict[str, str]) -> dict[str, str]:
    """``env`` for a limited child: its own children (the env it runs) write no bytecode."""
    return {**env, "PYTHONDONTWRITEBYTECODE": "1"}


def truncated_bytecode(since: float, root: Path | None = None) -> list[Path]:
    """Bytecode files under ``root`` (default: where this interpreter keeps bytecode) written
    since ``since`` (a ``time.time()``) that do not load."""
    if root is None:
        root = Path(sys.pycache_prefix or Path(__file__).resolve().parents[1])
    bad = []
    for pyc in root.rglob("*.pyc"):
        try:
            if pyc.stat().st_mtime < since - 1:  # (mtime granularity)
                continue
            marshal.loads(pyc.read_bytes()[16:])  # after the 16-byte header
        except (EOFError, ValueError, TypeError):
            bad.append(pyc)
        except FileNotFoundError:  # replaced by another process meanwhile
            continue
    return bad

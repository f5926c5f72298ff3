"""The checks every way of passing session and run options shares (``cassette(...)``,
``run_cassette(...)``, a ``@pytest.mark.cassette(...)`` marker).

Options come from Python code and marker keywords, where nothing types them: a string where a
list belongs is iterated per character (``ignore_paths="body.metadata"`` ignored ``b``, ``o``,
…), and a string where a boolean belongs is truthy (``trust_cassette="no"`` ran tools on the
host). Each is refused here, with the option named and the fix, before anything runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hermes_replay._cassette.matching import check_ignore_path
from hermes_replay._cassette.normalizers import specs

__all__ = ["OptionError", "check_options"]

#: options that are True or False (``block_network`` may also be None: the mode decides)
BOOLEAN = frozenset({"strict", "default_ignores", "drop_unrun", "shard_by_worker",
                     "trust_cassette", "block_network", "raise_errors"})
#: options that are lists of strings
STRING_LISTS = frozenset({"ignore_paths", "llm_paths", "passthrough_hosts", "keep_headers"})


class OptionError(ValueError):
    """An option of the wrong shape; the message names it and shows the right one."""


def check_options(options: Mapping[str, Any], where: str = "hermes_replay.cassette()") -> None:
    """Raise :class:`OptionError` for the first option of the wrong type or shape."""
    for name, value in options.items():
        if name in BOOLEAN:
            if not isinstance(value, bool) and not (name == "block_network" and value is None):
                raise OptionError(f"{where}: {name} must be True or False, not {value!r} "
                                  "(a string such as 'no' would count as true)")
        elif name in STRING_LISTS:
            _string_list(name, value, where)
            if name == "ignore_paths":
                for path in value:
                    try:
                        check_ignore_path(path)
                    except ValueError as exc:
                        raise OptionError(f"{where}: ignore_paths: {exc}") from None
        elif name == "normalizers":
            _normalizers(value, where)


def _string_list(name: str, value: Any, where: str) -> None:
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple, set, frozenset)):
        raise OptionError(f"{where}: {name} must be a list of strings, e.g. "
                          f"{name}=[{value!r}], not {type(value).__name__} {value!r}")
    bad = [v for v in value if not isinstance(v, str)]
    if bad:
        raise OptionError(f"{where}: {name} holds {bad[0]!r}, which is not a string")


def _normalizers(value: Any, where: str) -> None:
    example = "normalizers=['datetime', (r'\\bREQ-\\d+', '<req>')]"
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        hint = f"normalizers=[{value!r}]" if isinstance(value, str) else example
        raise OptionError(f"{where}: normalizers must be a list of built-in names or "
                          f"(regex, replacement) pairs, e.g. {hint}, not {value!r}")
    for item in value:
        # one check for every way in (the CLI, the cassette header, this option): a built-in
        # name, or a pair whose regex compiles and is not over-long
        try:
            specs([item])
        except ValueError as exc:
            raise OptionError(f"{where}: normalizers: {exc}; e.g. {example}") from None

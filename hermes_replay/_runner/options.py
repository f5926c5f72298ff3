"""``RunOptions``: how a cassette's recorded command is re-run, as one value.

The same value travels from wherever the options are given — ``run_cassette(...)`` keywords, a
``@pytest.mark.cassette(...)`` marker, the ``replay`` command's flags, ``replay_corpus(...)``
— through the corpus (pickled to ``-j`` workers and Ray actors, so it stays plain data) to the
session. It is checked once, where it is made: a string where a list belongs, a truthy string
where a boolean belongs, an unknown name (with the closest known one) all fail there, before
anything runs.

What a run needs besides its options — the out folder, where the env's output goes, callbacks
for progress — is not an option: those stay arguments of the call that runs.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from hermes_replay._runner.stall import DEFAULT_MAX_MISSES

__all__ = ["RunOptions"]

# who is making the value, for the error message (``run_cassette()``, a marker, …)
_WHERE: ContextVar[str] = ContextVar("hermes_replay_options_where", default="RunOptions")


@dataclass(frozen=True)
class RunOptions:
    """How one cassette is re-run. Every field has the default a plain replay uses.

    - ``mode``: ``replay`` (default), ``record``, ``auto`` (record what is missing) or
      ``passthrough``.
    - ``strict``: recordings the run never requested fail it (and, with ``tools="execute"``,
      tool results that drifted).
    - ``tools`` / ``tool_overrides``: ``replay`` answers tool calls from the cassette and
      executes nothing; ``execute`` runs them again; ``{"web_search": "execute"}`` per tool.
    - ``ignore_paths`` / ``normalizers``: request fields left out of matching, and rewrites of
      volatile text (built-in names or ``(regex, replacement)`` pairs) applied before it.
    - ``block_network``: refuse sockets off loopback (None: yes in replay, no when live).
    - ``max_misses``: stop a replay after this many misses in a row (0: never).
    - ``trust_cassette``: run tool commands on the host instead of inside bubblewrap.
    - ``seed``: the seed of ``random``/numpy instead of the recorded one.
    - ``live``: ``{"patterns": [...], "base_url": URL, "api_key_env": VAR}`` — the calls the
      patterns select go to that endpoint while the rest replay (a live judge).
    - ``session``: any other ``hermes_replay.cassette()`` option (``drop_unrun``, ``worker``,
      ``trace``, ``llm_paths``, …), passed to the session as given.
    """

    mode: str = "replay"
    strict: bool = False
    tools: str = "replay"
    tool_overrides: Mapping[str, str] = field(default_factory=dict)
    ignore_paths: tuple[str, ...] = ()
    normalizers: tuple[Any, ...] = ()
    block_network: bool | None = None
    max_misses: int = DEFAULT_MAX_MISSES
    trust_cassette: bool = False
    seed: int | None = None
    live: Mapping[str, Any] | None = None
    session: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # lists become tuples (a string stays, for the check below to refuse by name)
        for name in ("ignore_paths", "normalizers"):
            value = getattr(self, name)
            if not isinstance(value, (str, bytes, tuple)) and hasattr(value, "__iter__"):
                object.__setattr__(self, name, tuple(value))
        object.__setattr__(self, "tool_overrides", dict(self.tool_overrides or {}))
        object.__setattr__(self, "session", dict(self.session or {}))
        self._check(_WHERE.get())

    def _check(self, where: str) -> None:
        from hermes_replay._session.options import OptionError, check_options
        from hermes_replay._session.session import MODES
        from hermes_replay._session.tools import check_policy

        if self.mode not in MODES:
            raise OptionError(f"{where}: mode {self.mode!r} is not one of {', '.join(MODES)}")
        check_options({"strict": self.strict, "block_network": self.block_network,
                       "trust_cassette": self.trust_cassette,
                       "ignore_paths": self.ignore_paths, "normalizers": self.normalizers,
                       **self.session}, where=where)
        try:
            check_policy(self.tools, "tools")
            for name, policy in self.tool_overrides.items():
                check_policy(policy, f"tool_overrides[{name!r}]")
        except ValueError as exc:
            raise OptionError(f"{where}: {exc}") from None
        if isinstance(self.max_misses, bool) or not isinstance(self.max_misses, int) \
                or self.max_misses < 0:
            raise OptionError(f"{where}: max_misses must be a whole number ≥ 0 (0: never "
                              f"stop), not {self.max_misses!r}")
        if self.seed is not None and (isinstance(self.seed, bool)
                                      or not isinstance(self.seed, int)):
            raise OptionError(f"{where}: seed must be a whole number or None, not "
                              f"{self.seed!r}")
        unknown = sorted(set(self.session) - session_option_names())
        if unknown:
            raise OptionError(f"{where}: {_unknown(unknown[0], option_names())}")

    @classmethod
    def of(cls, options: RunOptions | None = None, *, where: str = "run_cassette()",
           **keywords: Any) -> RunOptions:
        """``options`` (default: all defaults) with ``keywords`` laid over it: a field by its
        name, any other name a session option. An unknown name or a value of the wrong shape
        is an ``OptionError`` naming ``where``."""
        base = options if options is not None else cls()
        if not isinstance(base, RunOptions):
            from hermes_replay._session.options import OptionError

            raise OptionError(f"{where}: options must be a RunOptions, not "
                              f"{type(base).__name__}")
        if not keywords:
            return base
        own = {f.name for f in dataclasses.fields(cls)} - {"session"}
        changes = {k: v for k, v in keywords.items() if k in own}
        session = {**base.session, **{k: v for k, v in keywords.items() if k not in own}}
        if "session" in keywords:  # given whole, as a field
            session = {**base.session, **dict(keywords["session"] or {})}
        token = _WHERE.set(where)
        try:
            return dataclasses.replace(base, **changes, session=session)
        finally:
            _WHERE.reset(token)

    def replace(self, **keywords: Any) -> RunOptions:
        """A copy with ``keywords`` changed (checked as :meth:`of` checks them)."""
        return RunOptions.of(self, where="RunOptions.replace()", **keywords)

    def session_options(self) -> dict[str, Any]:
        """The keyword options of ``hermes_replay.cassette()`` this value sets."""
        out: dict[str, Any] = {"strict": self.strict, "tools": self.tools,
                               **dict(self.session)}
        if self.tool_overrides:
            out["tool_overrides"] = dict(self.tool_overrides)
        if self.ignore_paths:
            out["ignore_paths"] = list(self.ignore_paths)
        if self.normalizers:
            out["normalizers"] = list(self.normalizers)
        if self.live is not None:
            out["live"] = self.live
        return out


def session_option_names() -> frozenset[str]:
    """The keyword options of ``hermes_replay.cassette()`` a run may pass on (callbacks and
    what the runner decides itself left out)."""
    import inspect

    from hermes_replay._session.session import Session

    names = set(inspect.signature(Session.__init__).parameters)
    return frozenset(names - {"self", "path", "mode", "on_event"})


def option_names() -> frozenset[str]:
    """Every name ``RunOptions.of`` takes: the fields and the session options."""
    own = {f.name for f in dataclasses.fields(RunOptions)}
    return frozenset(own | session_option_names())


def _unknown(name: str, known: frozenset[str]) -> str:
    close = difflib.get_close_matches(name, sorted(known), n=1)
    hint = f"did you mean {close[0]!r}?" if close else f"known: {', '.join(sorted(known))}"
    return f"unknown option {name!r}; {hint}"

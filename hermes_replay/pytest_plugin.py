"""pytest plugin (registered through the ``pytest11`` entry point).

Thin by design: option, marker and fixtures here; the work is in the library, imported
lazily so test sessions that never touch a cassette pay nothing.

- ``@pytest.mark.cassette(path, **options)`` names the cassette of a test (options go to
  ``hermes_replay.cassette``; ``mode=`` sets the test's default mode).
- ``--replay-mode replay|record|auto|passthrough`` (default: replay). Precedence:
  command line > the ``replay_mode`` fixture (override it in a conftest) > the marker's ``mode``.
- ``replay_run()`` re-runs the cassette's recorded environment command offline and returns a
  ``RunResult`` (rewards per rollout, scored groups, eval metrics, captured wandb metrics).
- ``hermes_cassette`` wraps the test body itself in the cassette (for tests that call the
  openai SDK / atroposlib directly) and yields the session.
- In replay mode both block sockets to anything but loopback.
- ``probe_battery(env_file, **options)`` runs ``hermes-replay probe``'s battery offline and
  returns a ``ProbeReport`` (``report.assert_clean()`` fails with the table); cassettes and
  logs go under the test's ``tmp_path`` unless ``cassette_dir``/``work_dir`` say otherwise;
  the other options are ``run_probes``'s (``items``, ``probes``, ``env_args``, ``known_good``).
- Tool calls: answered from the cassette by default, nothing executed. ``--replay-tools
  execute`` runs them again (drift reported; fatal with ``strict=True``), ``--replay-tool
  NAME=execute`` one tool; in code ``@pytest.mark.cassette(path, tools="execute",
  tool_overrides={...})`` or ``replay_run(tools=...)``. The command line wins.
- ``--replay-mode auto`` ends with a terminal-summary section: per test, what was re-recorded
  (turns per rollout), or that the run failed and the cassette was kept as it was.
- A test of a replay that failed before its snapshot assertion (a miss, a crash) keeps its
  snapshot: syrupy would count it unused and ``--snapshot-update`` would delete the good
  reference; it is reported to syrupy as skipped instead (and its ``*.rollouts.txt`` file is
  announced to syrupy, which otherwise does not tie that two-part suffix to the test).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Generator, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from hermes_replay._runner.result import RunResult
    from hermes_replay.probe import ProbeReport



def _modes() -> tuple[str, ...]:
    from hermes_replay._session.session import MODES  # the one list of cassette modes

    return MODES


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("hermes-replay", "record and replay agent-environment LLM traffic")
    group.addoption(
        "--replay-mode",
        action="store",
        choices=_modes(),
        default=None,
        help="replay (default): answer LLM requests only from cassettes, offline; record: run "
        "live and rewrite cassettes; auto: record only what is missing; passthrough: live, "
        "nothing written.",
    )
    group.addoption(
        "--replay-tools",
        action="store",
        choices=("replay", "execute"),
        default=None,
        help="replay (default): answer tool calls from cassettes, execute nothing; execute: run "
        "them again and report results that drifted from the recording.",
    )
    group.addoption(
        "--replay-tool",
        action="append",
        default=[],
        metavar="NAME=POLICY",
        help="the replay policy of one tool, e.g. --replay-tool web_search=execute (repeatable).",
    )
    group.addoption(
        "--trust-cassette",
        action="store_true",
        default=False,
        help="run tool commands from cassettes on this host WITHOUT kernel isolation "
        "(default: inside bubblewrap). Only for cassettes you trust.",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "cassette(path, **options): the hermes-replay cassette this test replays (used by the "
        "replay_run and hermes_cassette fixtures); options go to hermes_replay.cassette().",
    )
    config.addinivalue_line(
        "markers",
        "fork(cassette, rollout=ID, turn=K, script=NAME_OR_FILE | base_url=URL, model=M, "
        "**options): the recorded rollout the `forked` fixture continues live from turn K "
        "(hermes_replay.fork_rollout; script= serves the scripted endpoint on 127.0.0.1).",
    )
    config.pluginmanager.register(_AutoReport(), "hermes-replay-auto-report")
    from hermes_replay._runner.trust import trust_for_process

    # The session runs this project's conftest.py already: its cassettes may name its envs,
    # and the files it holds as the session starts are the project's (as `trust` vouches)
    trust_for_process(config.rootpath, "the rootdir of this pytest session", vouch=True)


_AUTO = "hermes-replay auto"  # a user property of the test: xdist carries it to the controller


def _note_auto(node: pytest.Item, cassette: Path, summary: Any) -> None:
    """What ``--replay-mode auto`` did to ``cassette`` in this test, for the terminal summary
    (re-recorded turns, and what the new file holds); ``summary`` None: the run failed, so
    the cassette was left as it was."""
    if summary is None:
        node.user_properties.append((_AUTO, [str(cassette), None]))
        return
    written = dict(summary.written) if summary.written is not None else None
    node.user_properties.append((_AUTO, [str(cassette), [dict(summary.rerecorded), written]]))


class _AutoReport:
    """Collects the auto-mode notes of every test (from its reports, so under xdist too) and
    prints them at the end: what was re-recorded where, and which cassettes were kept."""

    def __init__(self) -> None:
        self.notes: list[tuple[str, str, list[Any] | None]] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "teardown":  # the last report: a fixture's own exit has run too
            self.notes += [(report.nodeid, cassette, rerecorded)
                           for key, (cassette, rerecorded) in report.user_properties
                           if key == _AUTO]

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.notes:
            return
        from hermes_replay._session.summary import rerecorded_line

        terminalreporter.write_sep("-", "hermes-replay --replay-mode auto")
        for nodeid, cassette, rerecorded in self.notes:
            what = ("the run failed: the cassette was kept as it was" if rerecorded is None
                    else rerecorded_line(*rerecorded))
            terminalreporter.write_line(f"{nodeid}: {cassette}: {what}")


_PROTECTED = pytest.StashKey[set]()
_OUR_FIXTURES = frozenset({"replay_run", "hermes_cassette"})


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """A test that replayed a cassette and failed before asserting its snapshot keeps it."""
    outcome = yield
    report = outcome.get_result()
    if report.when == "call":
        _reward_section(item, report)
    protected = item.config.stash.setdefault(_PROTECTED, set())
    if report.when == "call" and report.failed and _snapshot_not_reached(item, call):
        protected.add(report.nodeid)
        _announce_rollout_snapshots(item)
    elif report.when == "teardown" and report.nodeid in protected:
        # syrupy heard "failed" for the call phase; "skipped" is what it never deletes
        syrupy = getattr(item.config, "_syrupy", None)  # syrupy's session object
        if syrupy is not None and hasattr(syrupy, "ran_item"):
            syrupy.ran_item(report.nodeid, "skipped")


_SHOWN_CHANGES = 4  # under the assertion: pytest cuts an explanation after 8 lines


def _reward_section(item: pytest.Item, report: pytest.TestReport) -> None:
    """A failed reward snapshot's changes, every one of them, as a section of the report:
    pytest shortens an assertion's explanation (to 8 lines unless -vv), never a section."""
    import sys

    if not report.failed or "hermes_replay.snapshot" not in sys.modules:
        return  # (only tests that use the extension import it)
    from hermes_replay.snapshot import failed_reward_snapshots

    found = failed_reward_snapshots(getattr(item, "funcargs", {}).get("snapshot"))
    if found:
        report.sections.append(("hermes-replay reward snapshot",
                                "\n\n".join("\n".join(lines) for lines in found)))


@pytest.hookimpl(wrapper=True)
def pytest_assertrepr_compare(config: pytest.Config, op: str, left: Any,
                              right: Any) -> Generator[None, list[list[str]], list[list[str]]]:
    """``assert run == snapshot(extension_class=RolloutSnapshotExtension)``: one line per
    changed rollout (``rollout  old → new  Δ``) instead of syrupy's two-line text diff; the
    whole list is the report section above (``_reward_section``).

    A wrapper, put first in the results: syrupy's own hook is ``tryfirst`` too, and between two
    of those the plugin registered last wins — which depends on the order the environment's
    entry points are found in (``python -m pytest`` from a checkout with an ``.egg-info`` put
    syrupy's first, and the user saw syrupy's diff)."""
    explanations = yield
    ours = _reward_explanation(left, right)
    return explanations if ours is None else [ours, *explanations]


def _reward_explanation(left: Any, right: Any) -> list[str] | None:
    import sys

    if "hermes_replay.snapshot" not in sys.modules:
        return None
    from hermes_replay.snapshot import failed_reward_snapshots

    for side in (right, left):
        found = failed_reward_snapshots(side) if hasattr(side, "_execution_results") else []
        if found:
            return ["the run differs from its stored snapshot:", *shown_changes(found[-1])]
    return None


_REPLY = "      its reply:"  # the line under a changed row (``reward_changes``)


def shown_changes(lines: list[str]) -> list[str]:
    """The head and the first changes of ``reward_changes`` that fit pytest's explanation
    (each row with its reply line, never cut apart), then how many more changes — rows, not
    lines — the plugin's own section holds."""
    changes: list[list[str]] = []
    for line in lines[1:]:
        if line.startswith(_REPLY) and changes:
            changes[-1].append(line)
        else:
            changes.append([line])
    out: list[str] = []
    shown = 0
    for change in changes:
        if len(out) + len(change) > _SHOWN_CHANGES:
            break
        out += change
        shown += 1
    more = len(changes) - shown
    if more:
        out.append(f"… {more} more change(s): every change is in the 'hermes-replay reward "
                   "snapshot' section below")
    return lines[:1] + out


def _announce_rollout_snapshots(item: pytest.Item) -> None:
    """Make syrupy read this test's ``*.rollouts.txt`` file as the snapshot it is.

    The test never asserted, so syrupy only knows its default extension. That one lists our
    file as an unknown file and keeps it for a skipped test only when the file's stem equals
    the test's name; with the two-part suffix the stem is ``<test>.rollouts`` and the file
    would be deleted. A (never executed) assertion with our extension makes syrupy's
    discovery read the file as a snapshot named after the test, which skipping protects.
    """
    from hermes_replay.snapshot import RolloutSnapshotExtension

    use_extension = getattr(item.funcargs.get("snapshot"), "use_extension", None)  # type: ignore[attr-defined]
    if use_extension is not None:
        use_extension(RolloutSnapshotExtension)


def _snapshot_not_reached(item: pytest.Item, call: pytest.CallInfo[None]) -> bool:
    snapshot = getattr(item, "funcargs", {}).get("snapshot")
    if snapshot is None or getattr(snapshot, "num_executions", 1) != 0:
        return False  # no snapshot, or it was asserted (a real diff: --snapshot-update takes it)
    if _OUR_FIXTURES & set(getattr(item, "fixturenames", ())):
        return True
    from hermes_replay._errors import HermesReplayError, RequestNotRecorded

    return call.excinfo is not None and bool(
        call.excinfo.errisinstance((HermesReplayError, RequestNotRecorded)))


def _marker(request: pytest.FixtureRequest) -> pytest.Mark | None:
    return request.node.get_closest_marker("cassette")


@pytest.fixture
def replay_mode(request: pytest.FixtureRequest) -> str:
    """The mode for this test when the command line does not set one (override freely)."""
    mark = _marker(request)
    return str(mark.kwargs.get("mode", "replay")) if mark else "replay"


def _effective_mode(request: pytest.FixtureRequest, fixture_mode: str) -> str:
    cli = request.config.getoption("--replay-mode")
    mode = cli or fixture_mode
    if mode not in _modes():
        raise pytest.UsageError(f"replay mode {mode!r} is not one of {', '.join(_modes())}")
    return mode


def _resolve(request: pytest.FixtureRequest, path: str | Path | None) -> Path:
    mark = _marker(request)
    if path is None:
        if mark is None or not mark.args:
            raise pytest.UsageError(
                f"{request.node.nodeid}: no cassette given. Next step: add "
                "@pytest.mark.cassette('cassettes/<env>/process.jsonl') or pass the path."
            )
        path = mark.args[0]
    candidate = Path(path)
    if candidate.is_absolute():
        return candidate
    # Relative to the test file first, then to the rootdir (where cassettes/ usually is).
    for base in (request.node.path.parent, request.config.rootpath):
        if (base / candidate).exists():
            return base / candidate
    return request.config.rootpath / candidate


def _options(request: pytest.FixtureRequest) -> dict[str, Any]:
    """The marker's keywords (``mode`` aside), checked: an unknown keyword or one of the wrong
    shape is a usage error naming the test, never a traceback or a silently ignored option."""
    from hermes_replay._session.options import OptionError, check_options

    mark = _marker(request)
    options = {k: v for k, v in (mark.kwargs if mark else {}).items() if k != "mode"}
    where = f"{request.node.nodeid}: @pytest.mark.cassette"
    known = _marker_keywords()
    for name in options:
        if name not in known:
            close = difflib.get_close_matches(name, sorted(known), n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"known: {', '.join(sorted(known))}"
            raise pytest.UsageError(f"{where}: unknown keyword {name!r}; {hint}")
    try:
        check_options(options, where=where)
    except OptionError as exc:
        raise pytest.UsageError(str(exc)) from None
    return options


def _marker_keywords() -> frozenset[str]:
    """What a marker may set: the options of ``cassette()`` and ``RunOptions``."""
    from hermes_replay._runner.options import option_names

    return option_names() - {"session"}


def _tool_options(request: pytest.FixtureRequest, options: dict[str, Any]) -> dict[str, Any]:
    """``options`` with the command line's tool policy on top (the command line wins)."""
    out = dict(options)
    policy = request.config.getoption("--replay-tools")
    if policy:
        out["tools"] = policy
    overrides = dict(out.get("tool_overrides") or {})
    for item in request.config.getoption("--replay-tool") or []:
        name, sep, value = item.partition("=")
        if not sep or value not in ("replay", "execute"):
            raise pytest.UsageError(f"--replay-tool {item!r}: write NAME=replay or "
                                    "NAME=execute")
        overrides[name] = value
    if overrides:
        out["tool_overrides"] = overrides
    return out


@pytest.fixture
def replay_run(
    request: pytest.FixtureRequest, replay_mode: str, tmp_path: Path
) -> Callable[..., RunResult]:
    """Call it to re-run the marked cassette's environment command; returns a RunResult.

    The run is the one every replay shares (``_corpus.one.run_one``: the same runner, verdict
    and ``result.json`` as ``hermes-replay replay`` and ``replay_corpus``); its error, if any,
    is raised here."""
    from hermes_replay._corpus.one import run_one
    from hermes_replay._runner.options import RunOptions
    from hermes_replay._session.options import OptionError

    mode = _effective_mode(request, replay_mode)
    runs = 0

    def run(
        path: str | Path | None = None, *, command: Sequence[str] | None = None, **options: Any
    ) -> RunResult:
        from hermes_replay._errors import CassetteMiss

        # a failed replay is reported at the test's own call, not in the plugin's source
        __tracebackhide__ = True
        nonlocal runs
        runs += 1
        raise_errors = options.pop("raise_errors", True)  # the run's error in result.error
        merged = _tool_options(request, {**_options(request), **options})
        if request.config.getoption("--trust-cassette"):
            merged["trust_cassette"] = True
        cassette = _resolve(request, path)
        if mode == "auto":  # as `record --missing-only`: rollouts the run no longer makes go,
            merged.setdefault("drop_unrun", True)  # or the next replay fails on them
        try:
            options_ = RunOptions.of(where=f"{request.node.nodeid}: replay_run()", mode=mode,
                                     **merged)
        except OptionError as exc:
            raise pytest.UsageError(str(exc)) from None
        done = run_one(cassette, tmp_path / f"run-{runs}", options_, command=command)
        if done.error is not None and (raise_errors or done.run is None):
            if mode == "auto":
                _note_auto(request.node, cassette, None)
            if isinstance(done.error, CassetteMiss):
                raise done.error.with_hint(
                    _pytest_miss_hint(request, done.error.misses, cassette)) from None
            raise done.error
        if mode == "auto":
            _note_auto(request.node, cassette, done.run.summary)
        return done.run

    return run


def _pytest_miss_hint(request: pytest.FixtureRequest, misses: Sequence[Any] = (),
                      cassette: Path | None = None) -> str:
    """The next step in pytest's terms; a normalizer or ``ignore_paths`` only when the diffs
    hold a volatile-looking value or a field outside the conversation (a changed prompt is
    content: neither is offered for it)."""
    from hermes_replay._corpus.misses import volatile_parts

    fixes = list(dict.fromkeys(n for m in misses if getattr(m, "normalizer", None)
                               for n in m.normalizer.split(" + ")))
    where = str(cassette) if cassette is not None else "CASSETTE"
    first = ""
    if fixes:
        first = (f"the requests match their recordings once {' and '.join(fixes)} values are "
                 "normalized; keep that with the cassette (every replay applies it): "
                 f"hermes-replay normalize {where} " + " ".join(f"--add {n}" for n in fixes)
                 + "; otherwise, ")
    names, fields = ([], []) if fixes else volatile_parts(list(misses))
    rest = ""
    if names:
        rest += (f"; if the {' / '.join(names)} values that differ are volatile, keep a "
                 f"normalizer with the cassette: hermes-replay normalize {where} "
                 + " ".join(f"--add {n}" for n in names))
    if fields:
        rest += (f"; if {', '.join(fields[:3])} is volatile, ignore it: "
                 f"@pytest.mark.cassette(..., ignore_paths={fields[:3]!r})")
    return (
        f"next step: {first}if the change is intended, re-record only what is missing (the old "
        f"cassette stays until it succeeds): pytest --replay-mode auto {request.node.nodeid} "
        f"(with the recorded endpoint reachable){rest}"
    )


@pytest.fixture
def hermes_cassette(request: pytest.FixtureRequest, replay_mode: str) -> Iterator[Any]:
    """The test body runs inside ``hermes_replay.cassette(marker path, mode)``."""
    import hermes_replay
    from hermes_replay._runner.netblock import block_network

    __tracebackhide__ = True  # a miss is reported at the test, not in the fixture's source
    mode = _effective_mode(request, replay_mode)
    path = _resolve(request, None)
    options = _tool_options(request, _options(request))
    session = None
    try:
        with hermes_replay.cassette(path, mode=mode, **options) as session:  # type: ignore[arg-type]
            if mode == "replay":
                with block_network():
                    yield session
            else:
                yield session
    except hermes_replay.CassetteMiss as exc:
        raise exc.with_hint(_pytest_miss_hint(request, exc.misses, path)) from None
    except BaseException:
        if mode == "auto":
            _note_auto(request.node, path, None)
        raise
    if mode == "auto" and session is not None:
        _note_auto(request.node, path, session.summary())


@pytest.fixture
def probe_battery(tmp_path: Path) -> Callable[..., ProbeReport]:
    """Call it with an env file to run the probe battery in one test (see the docstring)."""
    from hermes_replay.probe import run_probes

    def run(env_file: str | Path, **options: Any) -> ProbeReport:
        options.setdefault("cassette_dir", tmp_path / "probe-cassettes")
        options.setdefault("work_dir", tmp_path / "probe-work")
        return run_probes(env_file, **options)

    return run


@pytest.fixture
def forked(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """The ``ForkResult`` of the test's ``@pytest.mark.fork(cassette, rollout=…, turn=…)``:
    the rollout replayed before turn K, continued live from it, each branch written under
    ``tmp_path`` — so a test asserts what the agent does from turn K
    (``assert "pytest" in " ".join(forked.branches[0].commands())``). ``script=`` (a scripted
    endpoint's script: a name or a file) serves the stand-in model itself; otherwise give
    ``base_url=`` and ``model=`` of an endpoint (never assumed)."""
    from hermes_replay._fork import fork_rollout

    mark = request.node.get_closest_marker("fork")
    if mark is None or not mark.args:
        raise pytest.UsageError(f"{request.node.nodeid}: the forked fixture needs "
                                "@pytest.mark.fork('cassettes/<env>/process.jsonl', "
                                "rollout=ID, turn=K, script=… or base_url=…, model=…)")
    options = dict(mark.kwargs)
    cassette = _resolve(request, mark.args[0])
    rollout, turn = options.pop("rollout", None), options.pop("turn", None)
    if not isinstance(rollout, str) or not isinstance(turn, int):
        raise pytest.UsageError(f"{request.node.nodeid}: @pytest.mark.fork needs rollout=ID "
                                "and turn=K (turns count from 1)")
    options.setdefault("branch", tmp_path / "branches" / f"fork-t{turn}.jsonl")
    options.setdefault("out_dir", tmp_path / "fork-out")
    script = options.pop("script", None)
    if script is None:
        return fork_rollout(cassette, rollout, turn, **options)
    from hermes_replay.scripted_endpoint import ScriptedEndpoint

    script_path = _resolve(request, script) if str(script).endswith((".toml", ".json")) \
        else script
    with ScriptedEndpoint(script=str(script_path), seed=options.pop("seed", 0)) as ep:
        return fork_rollout(cassette, rollout, turn, base_url=ep.base_url, **options)

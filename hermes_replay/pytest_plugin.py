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
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from hermes_replay._result import RunResult



def _modes() -> tuple[str, ...]:
    from hermes_replay._session import MODES  # the one list of cassette modes

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


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "cassette(path, **options): the hermes-replay cassette this test replays (used by the "
        "replay_run and hermes_cassette fixtures); options go to hermes_replay.cassette().",
    )


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
    mark = _marker(request)
    return {k: v for k, v in (mark.kwargs if mark else {}).items() if k != "mode"}


@pytest.fixture
def replay_run(
    request: pytest.FixtureRequest, replay_mode: str, tmp_path: Path
) -> Callable[..., RunResult]:
    """Call it to re-run the marked cassette's environment command; returns a RunResult."""
    from hermes_replay._run import run_cassette

    mode = _effective_mode(request, replay_mode)
    runs = 0

    def run(
        path: str | Path | None = None, *, command: Sequence[str] | None = None, **options: Any
    ) -> RunResult:
        nonlocal runs
        runs += 1
        merged = {**_options(request), **options}
        return run_cassette(_resolve(request, path), out_dir=tmp_path / f"run-{runs}",
                            mode=mode, command=command, **merged)

    return run


@pytest.fixture
def hermes_cassette(request: pytest.FixtureRequest, replay_mode: str) -> Iterator[Any]:
    """The test body runs inside ``hermes_replay.cassette(marker path, mode)``."""
    import hermes_replay
    from hermes_replay._netblock import block_network

    mode = _effective_mode(request, replay_mode)
    path = _resolve(request, None)
    with hermes_replay.cassette(path, mode=mode, **_options(request)) as session:  # type: ignore[arg-type]
        if mode == "replay":
            with block_network():
                yield session
        else:
            yield session

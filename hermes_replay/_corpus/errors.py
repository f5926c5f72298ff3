"""Why a corpus cannot be replayed at all (as opposed to a cassette that fails, which is a
row): nothing to replay, a path that cannot hold cassettes, an executor that cannot run."""

from __future__ import annotations

from hermes_replay._errors import HermesReplayError

__all__ = ["CorpusError", "ExecutorError"]


class CorpusError(HermesReplayError):
    """The corpus cannot be replayed: the path does not exist or holds no cassette (a CI step
    that replays an empty folder has tested nothing), or is not a file or folder. The
    command line exits ``exit_code`` (2, a usage error) with this message."""

    exit_code = 2


class ExecutorError(CorpusError):
    """The executor cannot run the replay: no cluster at the address given, or files it
    cannot ship. The message says which and the next step."""

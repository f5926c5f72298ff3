"""hermes-replay: record and replay the LLM traffic of Atropos agent environments.

Public API (everything else is private and may change)::

    cassette(path, mode="replay", **options)   # context manager, sync and async -> Session
    rollout(rollout_id)                         # rollout-identity scope (contextvars)
    annotate(**fields)                          # tell the active cassette env name, tokenizer …
    load_cassette(path) -> Cassette             # read a cassette (ls / show / diff)
    run_cassette(path, out_dir=…) -> RunResult  # re-run a recorded env command (replay_run)
    scrub(value) -> value                       # any str/JSON with every known secret removed
    HermesReplayError > CassetteError, CassetteMiss > UnusedRecordings   (see _errors)
"""

from hermes_replay._api import cassette
from hermes_replay._cassette import Cassette, load_cassette
from hermes_replay._errors import CassetteError, CassetteMiss, HermesReplayError, UnusedRecordings
from hermes_replay._hooks import annotate
from hermes_replay._redact import scrub
from hermes_replay._result import RolloutOutcome, RunResult
from hermes_replay._run import run_cassette
from hermes_replay._scope import current_rollout, rollout
from hermes_replay._session import Session
from hermes_replay._summary import ReplayEvent, ReplaySummary

__version__ = "0.1.0"

__all__ = [
    "Cassette",
    "CassetteError",
    "CassetteMiss",
    "HermesReplayError",
    "ReplayEvent",
    "ReplaySummary",
    "RolloutOutcome",
    "RunResult",
    "Session",
    "UnusedRecordings",
    "__version__",
    "annotate",
    "cassette",
    "current_rollout",
    "load_cassette",
    "rollout",
    "run_cassette",
    "scrub",
]

"""hermes-replay: record and replay the LLM traffic of Atropos agent environments.

Public API (everything else is private and may change)::

    cassette(path, mode="replay", **options)   # context manager, sync and async -> Session
    rollout(rollout_id)                         # rollout-identity scope (contextvars)
    current_rollout() -> RolloutScope | None    # the scope of the running rollout
    scoring()                                   # requests inside are the rollout's reward calls
    annotate(**fields)                          # tell the active cassette env name, tokenizer …
    active_mode() -> "replay" | "record" | … | None   # the cassette active in this context
    recorded_endpoint(url_prefix)               # record/replay a tool's HTTP API like LLM calls
    offer_known_good(prompt, make_reply)        # a rollout's known-good reply, for `probe`
    rollout_label(item, env=None) -> str | None # a rollout's readable name (env hook or item id)
    reward_parts(parts)                         # the running rollout's reward in named parts
    tool_call(name, args, run, source="agent")  # the seam tools go through: record / replay / run
    load_cassette(path) -> Cassette             # read a cassette (ls / show / diff)
    run_cassette(path, options=None, out_dir=…) -> RunResult  # re-run one recorded command
    RunOptions(mode=…, strict=…, tools=…, …)    # how a cassette is re-run, as one value
    replay_corpus(paths, options=None, *, jobs=…, shard=…, executor=…, out=…) -> CorpusResult
        # replay a folder (or several) as `hermes-replay replay DIR` does: rows, table,
        # exit code; CorpusObserver hears it happen; CorpusError when nothing can run
    fork_rollout(cassette, rollout, turn, *, base_url=…, model=…, samples=1, replace=None,
                 strict=False, branch=None) -> ForkResult
        # continue a recorded rollout live from turn K: prefix replayed, sandbox rebuilt from
        # the recorded tool calls (drift per call), a branch cassette naming its parent
    scrub(value) -> value                       # any str/JSON with every known secret removed
    write_report(path, out, against=None) -> Path  # one HTML page (the 'report' extra)
    HermesReplayError > CassetteError, CorpusError, ForkError, RecordingFailed, ReplayFailed,
        CassetteMiss > UnusedRecordings, ToolCallsDrifted   (see _errors, _tools)
    RequestNotRecorded > ToolCallMiss (BaseExceptions: a replay miss, raised at the request or
        tool call that has no recording; see _errors, _tools)

Tokenizer hooks for environment base classes (a cassette carries its tokenizer)::

    tokenizer_for_run(name) -> str    # the stored copy in a replay when `name` is a hub id
    check_tokenizer(name)             # raise TokenizerMismatch now if it is not the recorded one
    describe_tokenizer(name) -> dict  # {"name", "fingerprint"} for annotate(tokenizer=…)
    bundled_tokenizer_path() -> str   # the small offline tokenizer the package ships
"""

from hermes_replay._active import active_mode, annotate
from hermes_replay._cassette import Cassette
from hermes_replay._cassette.labels import rollout_label
from hermes_replay._cassette.load import load_cassette
from hermes_replay._corpus.corpus import CorpusObserver, CorpusResult, replay_corpus
from hermes_replay._corpus.errors import CorpusError
from hermes_replay._corpus.one import CassetteResult
from hermes_replay._errors import (
    CassetteError,
    CassetteMiss,
    ForkError,
    HermesReplayError,
    RecordingFailed,
    ReplayFailed,
    RequestNotRecorded,
    UnusedRecordings,
)
from hermes_replay._fork import ForkResult, fork_rollout
from hermes_replay._layer import install_layer_fallback
from hermes_replay._report import write_report
from hermes_replay._runner.options import RunOptions
from hermes_replay._runner.result import RolloutOutcome, RunResult
from hermes_replay._runner.run import run_cassette
from hermes_replay._secrets.redact import scrub
from hermes_replay._session.known_good import offer_known_good
from hermes_replay._session.scope import (
    RolloutScope,
    current_rollout,
    reward_parts,
    rollout,
    scoring,
)
from hermes_replay._session.session import Session, cassette
from hermes_replay._session.summary import ReplayEvent, ReplaySummary
from hermes_replay._session.tool_errors import ToolCallMiss, ToolCallsDrifted
from hermes_replay._session.tools import tool_call
from hermes_replay._session.traffic import recorded_endpoint
from hermes_replay._tokenizers.bundled import tokenizer_path as bundled_tokenizer_path
from hermes_replay._tokenizers.store import TokenizerMismatch, check_tokenizer, tokenizer_for_run
from hermes_replay._tokenizers.store import describe as describe_tokenizer

__version__ = "0.1.0"

# a project's own regular `environments` package must not hide the layer's modules from
# env files written for the former layer (see _layer)
install_layer_fallback()

__all__ = [
    "Cassette",
    "CassetteError",
    "CassetteMiss",
    "CassetteResult",
    "CorpusError",
    "CorpusObserver",
    "CorpusResult",
    "ForkError",
    "ForkResult",
    "HermesReplayError",
    "RecordingFailed",
    "ReplayEvent",
    "ReplayFailed",
    "ReplaySummary",
    "RequestNotRecorded",
    "RolloutOutcome",
    "RolloutScope",
    "RunOptions",
    "RunResult",
    "Session",
    "TokenizerMismatch",
    "ToolCallMiss",
    "ToolCallsDrifted",
    "UnusedRecordings",
    "__version__",
    "active_mode",
    "annotate",
    "bundled_tokenizer_path",
    "cassette",
    "check_tokenizer",
    "current_rollout",
    "describe_tokenizer",
    "fork_rollout",
    "load_cassette",
    "offer_known_good",
    "recorded_endpoint",
    "replay_corpus",
    "reward_parts",
    "rollout",
    "rollout_label",
    "run_cassette",
    "scoring",
    "scrub",
    "tokenizer_for_run",
    "tool_call",
    "write_report",
]

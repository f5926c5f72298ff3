"""hermes-replay: record and replay the LLM traffic of Atropos agent environments.

Public API (everything else is private and may change)::

    cassette(path, mode="replay", **options)   # context manager, sync and async
    rollout(rollout_id)                         # rollout-identity scope (contextvars)
    CassetteMiss, CassetteError                 # see hermes_replay._errors for the tree
"""

from hermes_replay._hooks import annotate
from hermes_replay._scope import current_rollout, rollout

__version__ = "0.1.0"

__all__ = [
    "__version__",
    "annotate",
    "current_rollout",
    "rollout",
]

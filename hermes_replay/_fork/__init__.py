"""Forking a recorded rollout at turn K and continuing it live (issue 48).

``plan``: what a fork starts from, checked (the rollout, its turn, a replaced tool result, the
branch's link to its parent). ``run``: re-running the parent's recorded command under a
session in fork mode (``_session.forking``) and writing the branch. Public as
``hermes_replay.fork_rollout``; ``hermes-replay fork`` is its command line.

May import the rooms above it (foundation, ``_secrets``, ``_tokenizers``, ``_terminal``,
``_cassette``, ``_world``, ``_session``, ``scripted_endpoint``, ``_runner``).
"""

from hermes_replay._fork.plan import ForkPlan, plan_fork
from hermes_replay._fork.run import Branch, ForkResult, fork_rollout

__all__ = ["Branch", "ForkPlan", "ForkResult", "fork_rollout", "plan_fork"]

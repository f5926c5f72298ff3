"""Room ``_world``: the world a rollout's reward was earned in.

A reward that reads the sandbox (``ctx.terminal("cat answer.txt")``, ``pytest`` there) depends on
every file the agent left behind. Replaying the conversation alone cannot reproduce that, so
when a rollout's reward starts the recorder keeps its sandbox workspace:

- ``capture``: the files under the working tree as the reward finds them — paths, modes and
  contents, scrubbed like every recorded value, bounded (``DEFAULT_LIMIT`` bytes a rollout),
  links kept as links only when they stay inside, never followed; what was left out is listed;
- ``store``: the contents, content-addressed beside the cassettes
  (``<cassettes root>/.workspaces/``), so a file shared by many rollouts or cassettes is stored
  once;
- ``manifest``: the record a cassette keeps (in the rollout's outcome, ``"workspace"``);
- ``restore``: the recorded files put into a fresh sandbox's working tree, checked against
  their hashes (the store is as untrusted as the cassette that names it);
- ``causality``: whether a rollout's agent side replayed exactly, so a recorded reward-side
  answer may be believed — and, when not, the first agent action that differed.

May import the foundation, ``_secrets``, ``_tokenizers`` (its cassettes root) and ``_cassette``;
never a session or a runner.
"""

from __future__ import annotations

from hermes_replay._world.capture import DEFAULT_LIMIT, capture_workspace
from hermes_replay._world.manifest import Workspace, WorkspaceError
from hermes_replay._world.restore import restore_workspace
from hermes_replay._world.store import WORKSPACE_DIR, BlobStore

__all__ = ["DEFAULT_LIMIT", "WORKSPACE_DIR", "BlobStore", "Workspace", "WorkspaceError",
           "capture_workspace", "restore_workspace"]

"""Scrub the messages of a scored group before atroposlib writes or sends it, in live runs.

Under the harness's live modes (record, auto, passthrough) ``hermes-replay`` scrubs what the
run printed as it goes, but the env's own files only when the run ends, so a run killed with
SIGKILL could leave a secret in ``groups.jsonl`` (a dataset prompt holding a key, a reply
echoing one). Scrubbing each group's messages here, before atroposlib's ``handle_send_to_api``
writes the line (``process``) or posts it to the trajectory API (``serve``), closes that
window. Replays and runs outside the harness are left as they are: nothing real is known
there, and training data is not rewritten behind the user's back. Token ids are the model's
input and are not changed; tool output is already scrubbed before the model sees it.
"""

from __future__ import annotations

from typing import Any

import hermes_replay


def scrub_live_groups(scored_data: Any) -> None:
    """Replace each group's ``messages`` with their scrubbed copy, in a live harness run."""
    if hermes_replay.active_mode() in (None, "replay"):
        return
    for group in scored_data if isinstance(scored_data, list) else [scored_data]:
        if isinstance(group, dict) and group.get("messages") is not None:
            group["messages"] = hermes_replay.scrub(group["messages"])

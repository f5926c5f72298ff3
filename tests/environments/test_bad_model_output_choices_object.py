"""A malformed ``choices`` never fails the group.

A server (or proxy) answering ``"choices": {...}`` — an object, not a list — made
``HermesAgentLoop`` raise ``KeyError: 0`` out of ``run()``, which fails the whole group.
"""

from __future__ import annotations

import pytest
from test_bad_model_output import CannedServer, _check, _env, _item
from test_bad_model_output import no_retry_waits as no_retry_waits  # the fixture

CASE = "choices-not-list"


@pytest.mark.usefixtures("no_retry_waits")
async def test_choices_that_are_not_a_list_end_the_rollout_cleanly() -> None:
    with CannedServer() as server:
        env = await _env(f"http://127.0.0.1:{server.port}/v1")
        outcome = await env.rollout(_item(CASE))
    _check(outcome, CASE, max_turns=4)
    assert outcome.turns_used == 1 and not outcome.finished_naturally
    assert server.calls[CASE] >= 1

"""Probes for ``web_research_env`` only: what its owner would add beside the unmodified file.

``hermes-replay probe web_research_env.py`` loads this file by itself (``<env stem>_probes.py``).
``keyword-soup`` answers with the topics' keywords and no sentence while the judge fails to
answer in JSON (judges sometimes do): the env's keyword-overlap fallback then decides the reward.
"""

from __future__ import annotations

from hermes_replay.probe import ProbeContext, register_probe
from hermes_replay.scripted_endpoint import Reply, Rule, Script

SOUP = "scattering scatter sunlight blue molecules tilt axis angle wavelength"

PROSE_JUDGE = Script("judge-in-prose", [
    Rule("prose", lambda c: True,
         lambda c, rng: Reply(content="The answer names the right ideas; a good one overall.")),
])


@register_probe("keyword-soup", env="web_research_env", judge=PROSE_JUDGE,
                description="the topics' keywords, no sentence; the judge answers without JSON")
def keyword_soup(ctx: ProbeContext) -> list[Rule]:
    return [Rule("soup", lambda c: True, lambda c, rng: Reply(content=SOUP))]

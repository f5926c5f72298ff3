"""Stored fingerprints checked against stored bodies (issue 25, item 9).

Why: a replay trusts a cassette's stored fingerprints when the matcher that wrote them is the
one replaying (recomputing them all is most of a large cassette's start-up). A request body
edited by hand with its old fingerprint left in place would then be answered as if it had
never changed: the live request matches the *old* fingerprint, and nobody sees the edit.

Replay checks a stored fingerprint where it decides something: when a live request is matched
by fingerprint (``_session.index``). A request that is byte for byte its recording is answered
without its fingerprint, so a stale one cannot mislead it, and that common path costs nothing
more. ``verify`` and ``show`` check every interaction (this module).
"""

from __future__ import annotations

from dataclasses import dataclass

from hermes_replay._cassette.matching import Matcher
from hermes_replay._cassette.model import Cassette, CassetteHeader, Interaction

__all__ = ["EDIT_HINT", "Edited", "edited_requests", "recording_matcher"]

EDIT_HINT = ("restore the cassette from git, or re-record it (`hermes-replay record "
             "--missing-only …`); if the edit is meant, delete that line's \"fingerprint\" "
             "value so the body is matched as it now reads")


@dataclass(frozen=True)
class Edited:
    """An interaction whose stored fingerprint is not its stored request's."""

    interaction: Interaction
    line: int | None  # in the cassette file, when it was read from one
    actual: str       # the fingerprint of the request as stored

    def message(self) -> str:
        inter = self.interaction
        return (f"the request of rollout {inter.rollout or '-'} turn {inter.seq + 1} was "
                f"edited after it was recorded: its body no longer matches its stored "
                f"fingerprint ({inter.fingerprint}; the body's is {self.actual})")

    def describe(self, path: object) -> str:
        where = f"{path}:{self.line}" if self.line is not None else str(path)
        return f"{where}: {self.message()}"


def recording_matcher(header: CassetteHeader) -> Matcher | None:
    """The matcher that wrote the stored fingerprints, when this process can rebuild it.

    The header keeps only the matcher's signature; the default matcher is the one almost
    every recording uses. A cassette recorded with other ignore paths or normalizers is
    checked by a replay given the same options (``_session.index``), not here.
    """
    default = Matcher.build()
    return default if header.extra.get("matcher") == default.signature() else None


def edited_requests(cassette: Cassette, matcher: Matcher | None = None) -> list[Edited]:
    """Every interaction whose stored fingerprint is not the one ``matcher`` (by default the
    recording's, see ``recording_matcher``) gives its stored request; [] if none can tell."""
    matcher = matcher or recording_matcher(cassette.header)
    if matcher is None:
        return []
    found = []
    for inter in cassette.interactions:
        if not inter.fingerprint:
            continue
        actual = matcher.fingerprint(inter.request)
        if actual != inter.fingerprint:
            found.append(Edited(inter, cassette.lines.get(inter.key), actual))
    return found

"""What a command prints of a cassette is scrubbed by the rules the HTML report uses.

Why: a cassette is data from outside (DESIGN §7) — edited by hand or arriving in a pull
request, it can hold a key the recorder never saw. The report scrubs everything it would show
and refuses to be written when ``verify``'s scanner still finds a secret; ``show``, ``ls``,
``diff`` and miss reports print cassette content on a terminal, into CI logs that are kept,
so they apply the same two steps:

1. the recorder's redaction (``_secrets.redact``): credential-named fields and every key
   shape or known value become ``<redacted:…>`` — on the data before it is rendered
   (``scrubbed_cassette``: field names still known) and on the text as printed
   (``display_text``: whatever the rendering assembled);
2. ``verify``'s scanner on the result: what redaction cannot rewrite without damaging data (a
   private key block, say) withholds the output, naming ``verify`` as the next step
   (``DisplayRefused``), as the report refuses to be written.

Known secrets found along the way (a value redacted by its field name) are forgotten when
the command ends (``KNOWN.scope``), so a command run in-process leaves no state behind.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from hermes_replay._cassette.model import Cassette, RolloutRecord
from hermes_replay._errors import HermesReplayError
from hermes_replay._secrets.known import KNOWN
from hermes_replay._secrets.payloads import scrub_body
from hermes_replay._secrets.redact import needs_redaction, redact_json, redact_text
from hermes_replay._secrets.scan import scan_string, scan_value

__all__ = ["DisplayRefused", "check_displayed", "display_json", "display_scope",
           "display_text", "scrubbed_cassette"]


class DisplayRefused(HermesReplayError):
    """What a command would print still holds a secret after redaction; nothing printed."""

    def __init__(self, findings: list[str], source: str) -> None:
        self.findings = findings
        shown = "\n".join(f"  - {f}" for f in findings[:5])
        more = f"\n  … and {len(findings) - 5} more" if len(findings) > 5 else ""
        super().__init__(
            f"not shown: {source} holds {len(findings)} secret(s) of a kind redaction does "
            f"not rewrite:\n{shown}{more}\n"
            f"next step: `hermes-replay verify {source}` names the file and line; revoke the "
            "credential (git history keeps it) and remove it from the cassette")


@contextmanager
def display_scope() -> Iterator[None]:
    """Secrets learnt while scrubbing one command's output are forgotten afterwards."""
    with KNOWN.scope():
        yield


def _clean(value: Any) -> Any:
    return redact_json(value) if needs_redaction(value) else value


def scrubbed_cassette(cassette: Cassette) -> Cassette:
    """A copy of ``cassette`` with every value a command could display redacted: requests,
    responses, tool calls, outcomes and header fields (call inside ``display_scope``)."""
    header = cassette.header.model_validate(_clean(cassette.header.model_dump()))
    # a body that is not UTF-8 is base64 (``{"base64": …}``): scrubbed as its decoded bytes
    interactions = [inter.model_copy(update={
        "request": _clean(inter.request),
        "response": _clean(scrub_body(inter.response, redact_text))})
                    for inter in cassette.interactions]
    by_key = {inter.key: inter for inter in interactions}
    tool_calls = [call.model_copy(update=_clean({"arguments": call.arguments,
                                                 "result": call.result,
                                                 "raised": call.raised}))
                  for call in cassette.tool_calls]
    by_call = {call.key: call for call in tool_calls}
    rollouts = {
        rid: RolloutRecord(rid, [by_key[i.key] for i in rec.interactions],
                           _clean(dict(rec.outcome)), [by_call[c.key] for c in rec.tool_calls])
        for rid, rec in cassette.rollouts.items()}
    return Cassette(cassette.path, header, interactions, rollouts, complete=cassette.complete,
                    tool_calls=tool_calls, lines=cassette.lines)


def display_text(text: str, source: str, *, refuse: bool = True) -> str:
    """``text`` as a command may print it: redacted; with ``refuse``, ``DisplayRefused`` when
    ``verify``'s scanner still finds a secret in it (values never shown whole)."""
    clean = _clean(text)
    if refuse:
        findings = list(scan_string(clean, "the output", credential_slot=False))
        if findings:
            raise DisplayRefused(findings, source)
    return clean


def display_json(value: Any, source: str) -> Any:
    """A JSON document a command prints (``diff --json``), scrubbed as ``display_text``."""
    clean = _clean(value)
    findings = list(scan_value(clean, "the output"))
    if findings:
        raise DisplayRefused(findings, source)
    return clean


def check_displayed(records: list[Any], source: str) -> None:
    """``DisplayRefused`` when ``verify``'s scanner finds a secret in the scrubbed ``records``
    a command is about to show (rollout records of a ``scrubbed_cassette``): judged on the
    data, where a header or query value is known to sit in a credential's place."""
    values: list[Any] = []
    for record in records:
        values.extend({"request": i.request, "response": i.response}
                      for i in record.interactions)
        values.extend(c.record() for c in getattr(record, "tool_calls", []))
        values.append(getattr(record, "outcome", None) or {})
    findings = list(scan_value(values, "the output"))
    if findings:
        raise DisplayRefused(findings, source)

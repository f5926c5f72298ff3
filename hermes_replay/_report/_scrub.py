"""No secret reaches the page: the data is scrubbed, then checked, before any byte is written.

The same two rule sets the rest of hermes-replay uses, in the same roles: the recorder's
redaction (``_secrets.redact``: key-shaped strings and secret-named fields become ``<redacted:…>``)
is applied to everything the page would show, then ``verify``'s broader scanner
(``_secrets.scan``) looks at the result. What redaction cannot rewrite without damaging data
but ``verify`` calls a secret (a private key block, say) makes the report refuse to be
written, naming where it sits and the next step — as ``verify`` would fail the cassette.
"""

from __future__ import annotations

from typing import Any

from hermes_replay._errors import HermesReplayError
from hermes_replay._secrets.redact import needs_redaction, redact_json
from hermes_replay._secrets.scan import scan_value

__all__ = ["ReportRefused", "scrub"]


class ReportRefused(HermesReplayError):
    """The data a report would show still holds a secret after redaction; nothing written."""

    def __init__(self, findings: list[str], sources: list[str]) -> None:
        self.findings = findings
        shown = "\n".join(f"  - {f}" for f in findings[:10])
        more = f"\n  … and {len(findings) - 10} more" if len(findings) > 10 else ""
        paths = " ".join(sources)
        super().__init__(
            f"report not written: {len(findings)} secret(s) in the data it would show, of a "
            f"kind redaction does not rewrite:\n{shown}{more}\n"
            f"next step: `hermes-replay verify {paths}` names the file and line; revoke the "
            "credential (git history keeps it), remove it from the cassette, then report again")


def scrub(state: dict[str, Any], sources: list[str]) -> dict[str, Any]:
    """``state`` with secrets redacted; raises ``ReportRefused`` if ``verify``'s scanner still
    finds one (values are never shown whole in the error)."""
    clean = redact_json(state) if needs_redaction(state) else state
    findings = list(scan_value(clean, "report"))
    if findings:
        raise ReportRefused(findings, sources)
    return clean

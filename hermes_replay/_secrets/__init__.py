"""Room ``_secrets``: what is secret, and scrubbing it out of everything written or shown.

Holds the one rule set (``rules``), the values this process knows are secret (``known``),
redaction of requests, responses and free text (``redact``), the scanner ``verify`` uses
(``scan``, the same rules applied to find instead of replace) and the joining of streamed
deltas so a key split across SSE chunks is still seen (``sse``).

May import: the standard library and the foundation (``hermes_replay._errors``). Nothing
else in the package: every room that writes or displays bytes depends on this one, so it
depends on none of them.
"""

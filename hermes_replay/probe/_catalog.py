"""Looking probes up: the built-in ones (imported here, so they register first) and any
registered since (an env's ``<stem>_probes.py``, ``--probes FILE``)."""

from __future__ import annotations

from hermes_replay.probe import _builtin, _tamper  # noqa: F401 - importing registers them
from hermes_replay.probe._registry import PROBES, Probe

__all__ = ["get_probe", "list_probes"]


def list_probes(env_stem: str | None = None) -> list[Probe]:
    """Registered probes in registration order (built-ins first); env-specific probes only
    for their env (``env_stem``, an env file's stem)."""
    return [p for p in PROBES.values() if p.env is None or p.env == env_stem]


def get_probe(name: str) -> Probe:
    try:
        return PROBES[name]
    except KeyError:
        raise KeyError(f"no probe named {name!r}; registered: {', '.join(PROBES)}") from None

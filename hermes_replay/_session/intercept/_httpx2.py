"""The httpx2 seam (openai 3.x runs on httpx2): the same transport methods as httpx."""

from __future__ import annotations

from hermes_replay._session.intercept._httpx import HttpxAdapter

__all__ = ["install", "uninstall"]

_ADAPTER = HttpxAdapter("httpx2")
install = _ADAPTER.install
uninstall = _ADAPTER.uninstall

"""A real headless Chromium (Debian's ``chromium``) driven through Playwright, for page tests.

Playwright talks to the browser over the DevTools protocol; it is pointed at the system
binary, so nothing is downloaded. ``.ci/run`` installs the package when it is missing; a
local run without it skips with the install command, CI (``CI`` set) fails instead.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

# Flags that work on these machines: no sandbox as root, no GPU, and none of Chromium's own
# background connections (they would be refused by the closed network, and they are not the
# page's requests).
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--disable-dev-shm-usage"]


def chromium_path() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    message = ("Debian's chromium is not installed (apt-get install chromium; .ci/run installs "
               "it when missing)")
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)
    raise AssertionError("unreachable")


@dataclass
class Visit:
    """What one page did while it was open: every request and every console message."""

    url: str
    requests: list[str] = field(default_factory=list)
    console: list[tuple[str, str]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def assert_quiet(self) -> None:
        """Nothing but the page itself was requested, and nothing logged an error."""
        assert self.requests == [self.url], f"requests left the page: {self.requests}"
        assert not self.errors, f"page errors: {self.errors}"
        bad = [text for kind, text in self.console if kind in ("error", "warning")]
        assert not bad, f"console errors: {bad}"


@contextmanager
def launch() -> Iterator[Any]:
    """A headless Chromium for the duration of the block (a module fixture wraps this)."""
    executable = chromium_path()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        instance = pw.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            yield instance
        finally:
            instance.close()


def open_page(browser: Any, path: Path) -> tuple[Any, Visit]:
    """Open a report file and wait until its table is drawn and plotly has loaded."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    visit = Visit(path.resolve().as_uri())
    page.on("request", lambda request: visit.requests.append(request.url))
    page.on("console", lambda message: visit.console.append((message.type, message.text)))
    page.on("pageerror", lambda error: visit.errors.append(str(error)))
    page.goto(visit.url)
    page.wait_for_selector("body[data-ready='1']")
    page.wait_for_selector("body[data-charts='1']", timeout=60_000)
    return page, visit

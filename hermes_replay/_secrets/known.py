"""Values this process knows are secret, scrubbed wherever they appear.

A key that is *known* needs no shape: the recorder's API key, the value of every header
and body field it redacts by name, URL passwords, credential-named environment variables.
Once known, the value is removed from any string — a tool printing ``/proc/self/environ``,
a 401 body echoing the key, a model reply — in its raw, percent-encoded and JSON-escaped
forms (and, for ``user:password``, the base64 of HTTP Basic auth).

One registry per process (``KNOWN``): the recorder, the CLI and tool recording all add to
and read from the same one. ``scope()`` undoes additions (tests, long-lived processes).
"""

from __future__ import annotations

import base64
import json
import os
import re
import threading
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from urllib.parse import quote, unquote, urlsplit

from hermes_replay._secrets.rules import Span, is_placeholder, is_secret_name

__all__ = ["KNOWN", "KnownSecrets"]

# Shorter values are never registered: scrubbing "abc" everywhere would destroy data.
MIN_LENGTH = 6
# Values shorter than this only match as a whole word (not inside a longer alphanumeric run).
_WHOLE_WORD_BELOW = 16


# Shell variables whose names look like credentials but hold none (PWD: the working
# directory, not a password).
_NOT_SECRET_VARS = frozenset({"PWD", "OLDPWD", "GPG_TTY", "SSH_AUTH_SOCK", "SSH_AGENT_PID",
                              "KRB5CCNAME", "XAUTHORITY", "GIT_ASKPASS", "SSH_ASKPASS"})


class KnownSecrets:
    """A set of secret values and one compiled pattern finding any of them."""

    def __init__(self) -> None:
        self._values: dict[str, str] = {}  # form -> label
        self._lock = threading.Lock()
        self._pattern: re.Pattern[str] | None = None
        self._dirty = False
        self.generation = 0  # bumped on every addition (callers re-scrub what they hold)

    def __len__(self) -> int:
        return len(self._values)

    def __contains__(self, value: object) -> bool:
        return value in self._values

    def add(self, value: str | None, label: str = "known-secret") -> bool:
        """Know ``value`` (and its encoded forms) as secret; False if too short or a
        placeholder (then it is not registered)."""
        if not isinstance(value, str):
            return False
        value = value.strip()
        if len(value) < MIN_LENGTH or is_placeholder(value) or value.startswith("<redacted"):
            return False
        forms = {value, quote(value, safe=""), json.dumps(value)[1:-1]}
        with self._lock:
            new = [f for f in forms if f not in self._values and len(f) >= MIN_LENGTH]
            for form in new:
                self._values[form] = label
            if new:
                self._dirty = True
                self.generation += 1
        return bool(new)

    def add_userinfo(self, url: str) -> None:
        """The password of ``scheme://user:password@host`` and its Basic-auth form."""
        try:
            parts = urlsplit(url)
        except ValueError:
            return
        if parts.password and "<redacted" not in parts.netloc and "%3Credacted" not in parts.netloc:
            password = unquote(parts.password)
            self.add(password, "userinfo")
            user = unquote(parts.username or "")
            self.add(base64.b64encode(f"{user}:{password}".encode()).decode(), "basic-auth")

    def add_header(self, name: str, value: str) -> None:
        """A credential header's value: the token after an auth scheme, each cookie value."""
        low = name.lower()
        text = value.strip()
        if low in ("cookie", "set-cookie"):
            for part in re.split(r";\s*", text):
                cookie_value = part.partition("=")[2]
                self.add(cookie_value, "cookie")
            return
        scheme, _, rest = text.partition(" ")
        if rest and scheme.lower() in ("bearer", "token", "basic", "digest", "apikey"):
            self.add(rest.strip(), "authorization")
            if scheme.lower() == "basic":
                try:
                    decoded = base64.b64decode(rest.strip() + "==").decode("utf-8", "replace")
                except ValueError:
                    decoded = ""
                self.add(decoded.partition(":")[2], "basic-auth")
        else:
            self.add(text, low)

    def add_environ(self, environ: Mapping[str, str] | None = None) -> None:
        """Values of credential-named environment variables (``OPENAI_API_KEY``, ``HF_TOKEN``,
        ``AWS_SECRET_ACCESS_KEY`` …) — what a tool printing its environment would show."""
        for name, value in (os.environ if environ is None else environ).items():
            if name.upper() not in _NOT_SECRET_VARS and is_secret_name(name, "env"):
                self.add(value, name.lower())

    def _compiled(self) -> re.Pattern[str] | None:
        with self._lock:
            if self._dirty or self._pattern is None:
                if not self._values:
                    self._pattern = None
                else:
                    # longest first: a value and its prefix both known scrub the longer one
                    alts = []
                    for form in sorted(self._values, key=len, reverse=True):
                        esc = re.escape(form)
                        if len(form) < _WHOLE_WORD_BELOW:
                            esc = rf"(?<![A-Za-z0-9]){esc}(?![A-Za-z0-9])"
                        alts.append(esc)
                    self._pattern = re.compile("|".join(alts))
                self._dirty = False
            return self._pattern

    def spans(self, text: str) -> Iterator[Span]:
        pattern = self._compiled()
        if pattern is None:
            return
        for m in pattern.finditer(text):
            label = self._values.get(m.group(0), "known-secret")
            yield m.start(), m.end(), f"<redacted:{label}>"

    def might_occur(self, text: str) -> bool:
        """A cheap test: could any known value be in ``text``?"""
        if not self._values:
            return False
        pattern = self._compiled()
        return pattern is not None and pattern.search(text) is not None

    def values(self) -> list[str]:
        with self._lock:
            return list(self._values)

    @contextmanager
    def scope(self) -> Iterator[KnownSecrets]:
        """Forget, on exit, what was added inside the block."""
        with self._lock:
            saved = dict(self._values)
        try:
            yield self
        finally:
            with self._lock:
                self._values = saved
                self._dirty = True
                self.generation += 1


KNOWN = KnownSecrets()


def add_all(values: Iterable[str], label: str = "known-secret") -> None:
    for value in values:
        KNOWN.add(value, label)

"""Values this process knows are secret, scrubbed wherever they appear.

A key that is *known* needs no shape: the recorder's API key, the value of every header
and body field it redacts by name, URL passwords, credential-named environment variables.
Once known, the value is removed from any string — a tool printing ``/proc/self/environ``,
a 401 body echoing the key, a model reply — in its raw, percent-encoded and JSON-escaped
forms (and, for ``user:password``, the base64 of HTTP Basic auth); a value of 12 bytes or
more also in its hex and base64/base64url forms, at each of the three byte alignments it can
have inside a longer base64 text (``{"api_key": "<key>"}`` encoded whole); and a key-like
value also in pieces: a key printed in two parts (split anywhere) leaves no part holding
eight or more of the key's own characters (those after a vendor prefix such as ``sk-proj-``,
which every key of that vendor shares).

Why not decode every base64 run and scan the result: recording scans every new string of
every request, and decoding is far dearer than a few substring tests. The encoded forms are
made once, when a value becomes known, and searched with ``in`` (C speed). So are a key's
anchors — the first and last eight characters after its vendor prefix: each part of a
two-way split holds one of them once it holds eight — and only around an anchor found is a
piece measured, character by character; a piece is cut when it is eight or longer and looks
random (letters with a digit, or upper and lower case: ``interaction`` in a cassette holds
the last eight letters of a key ending ``…teractio``, and stays; so does a run of numbers).
The middle of a key cut in three or more is not sought: each anchor costs a scan of every
new string of every recorded request
(two per key, with the encoded forms, cost about 0.04 ms per request; four-character blocks
that found any piece cost three times that, ``benchmarks/redact_bench.py``).

One registry per process (``KNOWN``): the recorder, the CLI and tool recording all add to
and read from the same one. ``scope()`` undoes additions (tests, long-lived processes).
"""

from __future__ import annotations

import base64
import json
import os
import re
import string
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
# Encoded forms (hex, base64) are made for values of at least this many bytes: the shortest
# form kept (a base64 core) is then 12+ characters, which random base64 (an image) does not
# hold by chance (64**12 ≈ 5e21).
_ENCODED_FROM = 12
# A key-like value whose body (``_body``) is this long is also found in pieces of ``_PIECE``
# characters or more that hold one of its anchors (``_anchors``).
_PIECES_FROM = 16
_PIECE = 8
_ALNUM = frozenset(string.ascii_letters + string.digits)
_KEY_CHARS = re.compile(r"[A-Za-z0-9_\-.+=~:/]+")


# Shell variables whose names look like credentials but hold none (PWD: the working
# directory, not a password).
_NOT_SECRET_VARS = frozenset({"PWD", "OLDPWD", "GPG_TTY", "SSH_AUTH_SOCK", "SSH_AGENT_PID",
                              "KRB5CCNAME", "XAUTHORITY", "GIT_ASKPASS", "SSH_ASKPASS"})


def encoded_forms(value: str) -> list[str]:
    """The hex and base64/base64url texts that hold ``value``'s bytes wherever it sits.

    A value inside a longer encoded text (``{"api_key": "<key>"}`` in base64) starts at one of
    three byte offsets modulo 3; for each, the base64 characters fixed by the value's bytes
    alone (its whole 3-byte groups) are one form. At most two bytes at either end stay in
    the characters around a form."""
    raw = value.encode("utf-8")
    if len(raw) < _ENCODED_FROM:
        return []
    # a hex form of digits only (the hex of a value of digits) would match runs of numbers
    hexed = raw.hex()
    forms = [hexed, hexed.upper()] if not hexed.isdigit() else []
    for shift in range(3):
        encoded = base64.b64encode(b"\0" * shift + raw).decode("ascii")
        first = 1 if shift else 0  # the group holding padding bytes is not the value's
        last = (shift + len(raw)) // 3  # groups made of the value's bytes only end here
        core = encoded[4 * first:4 * last]
        if len(core) >= _ENCODED_FROM:
            forms.append(core)
    forms += [f.translate(_URLSAFE) for f in forms if not all(c in _HEX for c in f)]
    return list(dict.fromkeys(forms))


_URLSAFE = str.maketrans("+/", "-_")
_HEX = frozenset("0123456789abcdefABCDEF")


# ``sk-``, ``proj-``, ``api03-``, ``github_``, ``pat_``: lower-case words a vendor puts first
_VENDOR_PREFIX = re.compile(r"(?:[a-z][a-z0-9]{0,9}[-_])+")


def _body(value: str) -> str:
    """``value`` without its vendor prefix: the characters that are the key's own."""
    prefix = _VENDOR_PREFIX.match(value)
    return value[prefix.end():] if prefix is not None else value


def _anchors(value: str) -> list[str]:
    """Substrings of ``value`` that a piece worth finding holds: the first and the last
    random-looking run of ``_PIECE`` characters of its body. A part of a two-way split that
    looks random itself holds one of them: its digit (or mixed case) lies in such a run inside
    it. (The body's own first and last ``_PIECE`` characters were the anchors: a key ending in
    ``…22AAAAAAAA`` had no tail anchor, and its random-looking half ``22AAAAAAAA`` echoed in a
    reply reached disk.)"""
    body = _body(value)  # an anchor of digits only (or letters only) is everyday data
    runs = [body[i:i + _PIECE] for i in range(len(body) - _PIECE + 1)]
    found = [run for run in runs if _random_looking(run)]
    return list(dict.fromkeys(found[:1] + found[-1:]))


def _random_looking(piece: str) -> bool:
    """Letters with a digit, or both cases: what a key's characters have and a word or a
    number of data has not."""
    letters = [c for c in piece if c.isalpha()]
    return bool(letters) and (any(c.isdigit() for c in piece) or (
        any(c.isupper() for c in letters) and any(c.islower() for c in letters)))


def _key_like(value: str) -> bool:
    """A value whose pieces are worth finding: a token (key characters only, letters and
    digits mixed), not a path or prose whose fragments are everyday text."""
    return (len(_body(value)) >= _PIECES_FROM and _KEY_CHARS.fullmatch(value) is not None
            and not value.startswith(("/", ".", "~")) and "://" not in value
            and any(c.isdigit() for c in value) and any(c.isalpha() for c in value))


class KnownSecrets:
    """A set of secret values with their encoded forms, found by substring search."""

    def __init__(self) -> None:
        self._values: dict[str, str] = {}  # form -> label
        self._pieces: dict[str, str] = {}  # key-like value -> label (found in pieces too)
        self._lock = threading.Lock()
        self._search: tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str, str], ...]] = (
            (), ())
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
        forms = [value, quote(value, safe=""), json.dumps(value)[1:-1], *encoded_forms(value)]
        with self._lock:
            new = [f for f in dict.fromkeys(forms)
                   if f not in self._values and len(f) >= MIN_LENGTH]
            for form in new:
                self._values[form] = label
            piece = _key_like(value) and value not in self._pieces
            if piece:
                self._pieces[value] = label
            if new or piece:
                self._rebuild()
                self.generation += 1
        return bool(new)

    def _rebuild(self) -> None:
        """The search tables (made on each addition, read without the lock): the forms,
        longest first, and each key-like value's aligned blocks."""
        forms = tuple(sorted(self._values.items(), key=lambda kv: len(kv[0]), reverse=True))
        blocks = tuple((anchor, value, label) for value, label in self._pieces.items()
                       for anchor in _anchors(value))
        self._search = (forms, blocks)

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

    def spans(self, text: str) -> Iterator[Span]:
        """Where ``text`` holds a known value: each form (overlaps are merged by
        ``rules.secret_spans``), and each piece of a key-like one around an anchor."""
        forms, blocks = self._search
        for form, label in forms:
            start = text.find(form)
            while start >= 0:
                end = start + len(form)
                if len(form) >= _WHOLE_WORD_BELOW or (
                        (start == 0 or text[start - 1] not in _ALNUM)
                        and (end == len(text) or text[end] not in _ALNUM)):
                    yield start, end, f"<redacted:{label}>"
                start = text.find(form, start + 1)
        for block, value, label in blocks:
            if block in text:
                yield from _piece_spans(text, block, value, label)

    def might_occur(self, text: str) -> bool:
        """A cheap test: could any known value be in ``text``? (substring tests only)"""
        forms, blocks = self._search
        for form, _ in forms:  # a plain loop: a generator costs more than the tests
            if form in text:
                return True
        for block, value, label in blocks:
            if block in text and next(_piece_spans(text, block, value, label), None):
                return True
        return False

    def values(self) -> list[str]:
        with self._lock:
            return list(self._values)

    @contextmanager
    def scope(self, empty: bool = False) -> Iterator[KnownSecrets]:
        """Forget, on exit, what was added inside the block; ``empty``: know nothing inside
        it either (a check of the rules alone, whatever this process learnt before)."""
        with self._lock:
            saved, saved_pieces = dict(self._values), dict(self._pieces)
            if empty:
                self._values, self._pieces = {}, {}
                self._rebuild()
                self.generation += 1
        try:
            yield self
        finally:
            with self._lock:
                self._values, self._pieces = saved, saved_pieces
                self._rebuild()
                self.generation += 1


def _piece_spans(text: str, block: str, value: str, label: str) -> Iterator[Span]:
    """Each maximal run of ``value``'s characters around an occurrence of ``block`` (an
    anchor) in ``text``."""
    size = len(block)
    offsets = [i for i in range(len(value) - size + 1) if value.startswith(block, i)]
    at = text.find(block)
    while at >= 0:
        for offset in offsets:
            left = 0
            while (left < offset and at - left > 0
                   and text[at - left - 1] == value[offset - left - 1]):
                left += 1
            right = size
            while (offset + right < len(value) and at + right < len(text)
                   and text[at + right] == value[offset + right]):
                right += 1
            if left + right >= _PIECE and _random_looking(text[at - left:at + right]):
                yield at - left, at + right, f"<redacted:{label}>"
        at = text.find(block, at + 1)


KNOWN = KnownSecrets()


def add_all(values: Iterable[str], label: str = "known-secret") -> None:
    for value in values:
        KNOWN.add(value, label)

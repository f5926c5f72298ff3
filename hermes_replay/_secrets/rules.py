"""The one rule set that says what is secret — used by recording (``_secrets.redact``) and by
``verify`` (``_secrets.scan``), so a cassette that ``record`` wrote always verifies clean and
``verify`` finds everything ``record`` would have scrubbed.

Three kinds of rule:

- **names**: a value is secret because of what it is called — a JSON field, a query
  parameter, a header, a command-line flag, or ``NAME=value`` / ``"name": "value"`` inside
  text (an environment dump, JSON inside a string, a YAML file). Names are split into words
  (``X-Amz-Security-Token`` → ``x amz security token``, ``secretAccessKey`` → ``secret access
  key``) and judged by meaning, so every spelling of a family is one rule.
- **shapes**: provider key formats, JWTs, PEM private keys, ``scheme://user:password@host``.
- **known values** (``_secrets.known``): what this process was told or has seen is secret.

``secret_spans`` gives ``(start, end, placeholder)`` for one string; overlapping spans are
merged, and no placeholder matches any rule (redaction is idempotent).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import Literal

__all__ = [
    "Span",
    "Where",
    "is_placeholder",
    "is_secret_name",
    "might_hold_secret",
    "secret_spans",
]

Where = Literal["field", "query", "header", "flag", "text", "env"]
Span = tuple[int, int, str]

# ----------------------------------------------------------------------------- names

# Words that make a name a credential wherever they appear in it.
_SECRET_WORDS = frozenset({
    "password", "passwd", "pwd", "passphrase", "secret", "secrets", "credential",
    "credentials", "jwt", "bearer", "cookie", "authorization", "apikey", "privatekey",
    "accesskey", "secretkey", "apitoken", "accesstoken", "authtoken", "xsrf", "csrf",
})
# ``<word> key`` is a credential for these words (``access-key``, ``private_key``) …
_KEY_QUALIFIERS = frozenset({
    "api", "access", "private", "secret", "signing", "encryption", "master", "client",
    "account", "subscription", "auth", "license", "app", "consumer", "service", "storage",
    "admin", "deploy", "ssh", "gpg", "pgp", "hmac", "webhook", "session", "x", "openai",
    "anthropic", "groq", "google", "gemini", "hf", "wandb", "mistral", "cohere", "together",
})
# … while ``<word> token`` is a credential unless the word makes it model data
# (``eos_token``, ``max_tokens`` are tokenizer and sampling settings).
_TOKEN_DATA = frozenset({
    "eos", "bos", "pad", "unk", "sep", "cls", "mask", "special", "max", "min", "num", "total",
    "prompt", "completion", "input", "output", "next", "first", "last", "start", "end", "stop",
    "added", "additional", "image", "audio", "video", "vision", "tool", "think", "thinking",
    "reasoning", "im", "default", "chat", "eot", "eom", "fim", "decoder", "encoder", "text",
    "new", "cached", "generated", "sample", "logprob", "top", "bad", "split", "word",
    "cache", "id", "ids", "sampled", "boa", "eoa", "boi", "eoi", "user", "assistant",
})
# Bare names that are credentials in a URL, a header or on a command line but usually data
# in a JSON body (a logprobs ``token``, a dict ``key``, Anthropic's thinking ``signature``).
_BARE_LOOSE = frozenset({"key", "token", "sig", "signature", "auth", "pass", "code"})
_LOOSE_WHERE = frozenset({"query", "header", "flag", "env"})
# Header names that are credentials by convention, whatever their words say.
_HEADER_NAMES = frozenset({"authorization", "proxy-authorization", "cookie", "set-cookie",
                           "x-auth", "openai-organization", "openai-project"})

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_SPLIT = re.compile(r"[^a-z0-9]+")


@lru_cache(maxsize=8192)
def _words(name: str) -> tuple[str, ...]:
    return tuple(w for w in _SPLIT.split(_CAMEL.sub(" ", name).lower()) if w)


@lru_cache(maxsize=16384)
def is_secret_name(name: str, where: Where = "field") -> bool:
    """True if a value called ``name`` at ``where`` is a credential.

    ``where`` decides only the bare, ambiguous names (``key``, ``token``, ``signature``):
    secret in a query string, header, flag or environment variable, data in JSON and text.
    """
    if where == "header" and name.lower() in _HEADER_NAMES:
        return True
    words = _words(name)
    if not words:
        return False
    if len(words) == 1 and words[0] in _BARE_LOOSE:
        return where in _LOOSE_WHERE or (words[0] == "auth" and where == "field")
    if words[-1] in ("sig", "signature") and where in _LOOSE_WHERE:
        return True  # X-Amz-Signature, request_sig
    if words[-1] == "pass" and len(words) > 1:
        return True  # db_pass, smtp-pass
    for i, word in enumerate(words):
        if word in _SECRET_WORDS:
            return True
        if word == "key" and i > 0 and words[i - 1] in _KEY_QUALIFIERS:
            return True
        if word in ("token", "tokens") and i == len(words) - 1 and i > 0 \
                and words[i - 1] not in _TOKEN_DATA:
            return True
    joined = "".join(words)
    return joined.endswith(("apikey", "accesskey", "authtoken", "accesstoken"))


# ----------------------------------------------------------------------------- placeholders

_PLACEHOLDER_WORDS = frozenset({"", "redacted", "<redacted>", "***", "none", "null", "true",
                                "false", "hermes-replay-offline", "placeholder", "xxx",
                                "changeme", "dummy"})


def is_placeholder(value: str) -> bool:
    """A value that is no credential: a redaction marker, empty, or a flag word."""
    text = value.strip().strip("\"'")
    return (text.lower() in _PLACEHOLDER_WORDS or text.startswith("<redacted")
            or text.lower().startswith("bearer <redacted") or set(text) <= {"*"})


# ----------------------------------------------------------------------------- shapes

# (label, pattern). Each is anchored on a distinctive prefix so prose never matches.
SHAPES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("anthropic-key", re.compile(r"\bsk-ant-[A-Za-z0-9_-]{16,}")),
    ("openai-key", re.compile(r"\bsk-(?:proj-|svcacct-|admin-|or-v1-|None-)?[A-Za-z0-9_-]{16,}")),
    ("stripe-key", re.compile(r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}")),
    ("stripe-webhook-secret", re.compile(r"\bwhsec_[A-Za-z0-9]{16,}")),
    ("groq-key", re.compile(r"\bgsk_[A-Za-z0-9]{20,}")),
    ("hf-token", re.compile(r"\bhf_[A-Za-z0-9]{20,}")),
    ("google-key", re.compile(r"\bAIza[0-9A-Za-z_-]{30,}")),
    ("google-oauth-token", re.compile(r"\bya29\.[0-9A-Za-z_-]{20,}")),
    ("github-token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})")),
    ("gitlab-token", re.compile(
        r"\bgl(?:pat|dt|rt|ptt|cbt|soat|ft|imt|agent|oas)-[A-Za-z0-9_-]{20,}")),
    ("slack-token", re.compile(r"\b(?:xox[abposre]-[A-Za-z0-9-]{10,}|xapp-\d-[A-Za-z0-9-]{10,})")),
    ("slack-webhook", re.compile(r"hooks\.slack\.com/services/[A-Za-z0-9/]{16,}")),
    ("aws-key-id", re.compile(r"\b(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|APKA)"
                              r"[0-9A-Z]{16}\b")),
    ("jwt", re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*")),
    ("private-key", re.compile(
        r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----(?:.*?-----END [A-Z0-9 ]*PRIVATE KEY-----|.*)",
        re.DOTALL)),
    ("token", re.compile(r"\bBearer\s+(?!<redacted)[A-Za-z0-9._~+/=-]{8,}")),
)
# scheme://user:password@host — the password part (the user name is kept for the reader).
_USERINFO = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://(?P<user>[^/\s:@<>\"'`]*):"
                       r"(?P<pw>[^/\s@<>\"'`]+)@")
_BASIC = re.compile(r"\bBasic\s+(?P<b64>[A-Za-z0-9+/]{8,}={0,2})")
# NAME=value, NAME: value, "name": "value", {\"name\": \"value\"} inside any text.
_NAMED = re.compile(
    r"(?P<name>[A-Za-z_][A-Za-z0-9_.\-]{0,79})\\*[\"']?\s*[:=]\s*(?:\\*[\"'])?"
    r"(?P<value>[^\s\"'\\,;&}{\]\[)(<>]+)")
# a query string inside text: ``?key=…&sig=…`` uses the query rules, not the text ones
_QUERY_PAIR = re.compile(r"[?&](?P<name>[A-Za-z0-9_.\-]{1,80})=(?P<value>[^&#\s\"'<>]+)")
# AWS secret access keys have no prefix: 40 base64 characters right after a key id
_AWS_SECRET_NEAR_ID = re.compile(
    r"(?:AKIA|ASIA)[0-9A-Z]{16}[\"',:;=\s]{1,6}(?P<value>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])")


def _basic_is_credential(b64: str) -> bool:
    try:
        decoded = base64.b64decode(b64 + "=" * (-len(b64) % 4), validate=True)
    except (binascii.Error, ValueError):
        return False
    return b":" in decoded


def _rule_spans(text: str) -> Iterable[Span]:
    for label, pattern in SHAPES:
        for m in pattern.finditer(text):
            yield m.start(), m.end(), ("Bearer <redacted:token>" if label == "token"
                                       else f"<redacted:{label}>")
    if "://" in text and "@" in text:
        for m in _USERINFO.finditer(text):
            if not is_placeholder(m.group("pw")) and not m.group("user").startswith("<redacted"):
                yield m.start("user"), m.end("pw"), "<redacted:userinfo>"
    for m in _BASIC.finditer(text):
        if _basic_is_credential(m.group("b64")):
            yield m.start(), m.end(), "Basic <redacted:basic-auth>"
    for m in _AWS_SECRET_NEAR_ID.finditer(text):
        yield m.start("value"), m.end("value"), "<redacted:aws-secret>"
    if "=" in text:
        for m in _QUERY_PAIR.finditer(text):
            if is_secret_name(m.group("name"), "query") and not is_placeholder(m.group("value")):
                yield m.start("value"), m.end("value"), f"<redacted:{m.group('name').lower()}>"
    for m in _NAMED.finditer(text):
        name = m.group("name").rsplit(".", 1)[-1].lstrip("-")
        if is_secret_name(name, "text") and not is_placeholder(m.group("value")):
            yield m.start("value"), m.end("value"), f"<redacted:{name.lower()}>"


def secret_spans(text: str, known: Callable[[str], Iterable[Span]] | None = None) -> list[Span]:
    """Where ``text`` holds secrets: merged, sorted ``(start, end, placeholder)`` spans.

    ``known`` adds the spans of values known to be secret (``KnownSecrets.spans``)."""
    spans = list(_rule_spans(text))
    if known is not None:
        spans.extend(known(text))
    if not spans:
        return []
    spans.sort()
    merged: list[Span] = [spans[0]]
    for start, end, label in spans[1:]:
        last_start, last_end, last_label = merged[-1]
        if start < last_end:
            merged[-1] = (last_start, max(end, last_end), last_label)
        else:
            merged.append((start, end, label))
    return merged


def apply_spans(text: str, spans: list[Span]) -> str:
    out: list[str] = []
    pos = 0
    for start, end, label in spans:
        out.append(text[pos:start])
        out.append(label)
        pos = end
    out.append(text[pos:])
    return "".join(out)


# ----------------------------------------------------------------------------- prefilter

# Every rule above needs one of these substrings of the lower-cased text, so a string
# holding none of them is clean without running a regex (scanning was most of what
# recording a request cost). ``\\u`` and ``%`` send escaped text down the full path.
_MARKERS: tuple[str, ...] = (
    "sk-", "sk_", "rk_", "whsec_", "gsk_", "hf_", "aiza", "ya29.", "ghp_", "gho_", "ghu_",
    "ghs_", "ghr_", "github_pat_", "glpat-", "gldt-", "glrt-", "glptt-", "glcbt-", "glsoat-",
    "glft-", "glimt-", "glagent-", "gloas-", "xox", "xapp-",
    "hooks.slack", "akia", "asia", "abia", "acca", "agpa", "aida", "aroa", "aipa", "anpa",
    "anva", "apka", "eyj", "-----begin", "bearer", "basic", "://", "\\u",
    "key", "token", "secret", "pass", "pwd", "auth", "credential", "jwt", "cookie", "sig",
    "csrf", "xsrf",
)


def might_hold_secret(text: str) -> bool:
    """False only when no rule (shape or name) could find anything in ``text``."""
    low = text.lower()
    for marker in _MARKERS:  # a plain loop: a generator costs more than the tests
        if marker in low:
            return True
    return False

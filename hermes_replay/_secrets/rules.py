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
import math
import re
from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import Any, Literal

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
    ("xai-key", re.compile(r"\bxai-[A-Za-z0-9]{20,}")),
    ("perplexity-key", re.compile(r"\bpplx-[A-Za-z0-9]{32,}")),
    ("nvidia-key", re.compile(r"\bnvapi-[A-Za-z0-9_-]{32,}")),
    ("replicate-token", re.compile(r"\br8_[A-Za-z0-9]{30,}")),
    ("fireworks-key", re.compile(r"\bfw_[A-Za-z0-9]{20,}")),
    ("pypi-token", re.compile(r"\bpypi-Ag[A-Za-z0-9_-]{50,}")),
    ("npm-token", re.compile(r"\bnpm_[A-Za-z0-9]{36}\b")),
    ("sendgrid-key", re.compile(r"\bSG\.[A-Za-z0-9_-]{16,32}\.[A-Za-z0-9_-]{30,50}")),
    ("digitalocean-token", re.compile(r"\bdo[opr]_v1_[a-f0-9]{64}\b")),
    ("shopify-token", re.compile(r"\bshp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}\b")),
    ("telegram-bot-token", re.compile(r"\b\d{8,10}:AA[A-Za-z0-9_-]{30,40}")),
    ("discord-token", re.compile(
        r"\b[MNO][A-Za-z0-9_-]{23,27}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,40}")),
    ("discord-webhook", re.compile(r"discord(?:app)?\.com/api/webhooks/\d+/[A-Za-z0-9_-]{20,}")),
    ("mailgun-key", re.compile(r"\bkey-[a-f0-9]{32}\b")),
    ("twilio-key", re.compile(r"\bSK[a-f0-9]{32}\b")),
    ("databricks-token", re.compile(r"\bdapi[a-f0-9]{32}(?:-\d+)?\b")),
    ("square-token", re.compile(
        r"\b(?:EAAA[A-Za-z0-9_-]{60}|sq0(?:atp|csp)-[A-Za-z0-9_-]{22,43})")),
    ("token", re.compile(r"\bBearer\s+(?!<redacted)[A-Za-z0-9._~+/=-]{8,}")),
)
# A substring each shape's match must contain (case as in the pattern): a plain ``in`` test
# is far cheaper than running the regex over a string that cannot match.
_NEEDS: dict[str, tuple[str, ...]] = {
    "anthropic-key": ("sk-ant-",), "openai-key": ("sk-",), "stripe-key": ("k_live_", "k_test_"),
    "stripe-webhook-secret": ("whsec_",), "groq-key": ("gsk_",), "hf-token": ("hf_",),
    "google-key": ("AIza",), "google-oauth-token": ("ya29.",),
    # each prefix the pattern can start with ("gh" and "gl" alone are in "high", "global")
    "github-token": ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    "gitlab-token": ("glpat-", "gldt-", "glrt-", "glptt-", "glcbt-", "glsoat-", "glft-",
                     "glimt-", "glagent-", "gloas-"),
    "slack-token": ("xox", "xapp-"), "slack-webhook": ("hooks.slack",),
    "jwt": ("eyJ",), "private-key": ("-----BEGIN",), "xai-key": ("xai-",),
    "perplexity-key": ("pplx-",), "nvidia-key": ("nvapi-",), "replicate-token": ("r8_",),
    "fireworks-key": ("fw_",), "pypi-token": ("pypi-",), "npm-token": ("npm_",),
    "sendgrid-key": ("SG.",), "digitalocean-token": ("_v1_",),
    "shopify-token": ("shpat_", "shpca_", "shppa_", "shpss_"),
    "aws-key-id": ("AKIA", "ASIA", "ABIA", "ACCA", "AGPA", "AIDA", "AROA", "AIPA", "ANPA",
                   "ANVA", "APKA"),
    "telegram-bot-token": (":AA",), "discord-webhook": ("discord",), "mailgun-key": ("key-",),
    "twilio-key": ("SK",), "databricks-token": ("dapi",), "square-token": ("EAAA", "sq0"),
    "token": ("Bearer",),
}
# Labels whose match ends at the key's last character: a key broken by a newline (a wrapped
# line, ``\n`` inside a JSON string, two SSE deltas) continues on the next line, and that tail
# is part of the secret too.
_CONTINUED = frozenset(label for label, _ in SHAPES) - {"private-key", "token", "jwt",
                                                       "slack-webhook", "discord-webhook"}
_CONTINUATION = re.compile(
    r"(?:\r?\n|\\r\\n|\\n)[ \t]*(?P<tail>[A-Za-z0-9_-]{4,})(?![A-Za-z0-9_-])")
# ``Authorization: Token X``, ``api_key: Bearer X``: the value after a scheme word is the secret
_SCHEMES = frozenset({"token", "bearer", "basic", "digest", "bot", "apikey", "api-key", "key",
                      "sso-key", "splunk", "negotiate", "hmac", "oauth", "jwt"})
_SCHEME_VALUE = re.compile(r"[ \t]+(?P<value>[^\s\"'\\,;&}{\]\[)(<>]+)")
# command lines: ``curl -u user:pw``, ``mysql -pPW``; a netrc ``password X``
_CURL_USER = re.compile(r"(?:^|\s)(?:-u|--user)(?:[ \t]+|=)[\"']?(?P<user>[^\s:\"']+):"
                        r"(?P<pw>[^\s\"']+)")
_MYSQL_PW = re.compile(r"\b(?:mysql\w*|mariadb\w*)\b[^\n]*?\s-p(?P<pw>[^\s\"'-][^\s\"']*)")
_NETRC_PW = re.compile(r"\b(?:machine|login|default)\b[^\n]*?\bpassword[ \t]+(?P<pw>\S+)"
                       r"|(?m:^[ \t]*password[ \t]+(?P<line_pw>\S+)[ \t]*$)")
# YAML: ``name:`` ending its line, with the value (or a block of them) indented below it
_YAML_BLOCK = re.compile(  # the body is a lookahead: a nested ``name:`` is a block of its own
    r"(?m)^(?P<indent>[ \t]*)(?:- )?(?P<name>[A-Za-z_][A-Za-z0-9_.\-]{0,79}):[ \t]*"
    r"(?:[|>][-+]?[ \t]*)?\r?\n(?=(?P<body>(?:(?P=indent)[ \t]+[^\n]*(?:\n|$))+))")
_YAML_LINE = re.compile(r"(?m)^[ \t]+(?:- )?(?:(?P<key>[A-Za-z_][\w.\-]*):[ \t]*)?"
                        r"(?P<value>[^\s#][^\n]*?)[ \t]*$")
# AWS secret access keys have no prefix; alone, one is 40 base64 characters of high entropy.
# A match is always a whole run of these characters (greedy, and the search resumes after
# it), so a start inside a run can never match: the lookbehind says so at once instead of
# rescanning the rest of every word from each of its letters (same matches, far fewer steps).
_BASE64_RUN = re.compile(r"(?<![A-Za-z0-9/+])[A-Za-z0-9/+]{40,}")
# scheme://user:password@host — the password part (the user name is kept for the reader).
_USERINFO = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://(?P<user>[^/\s:@<>\"'`]*):"
                       r"(?P<pw>[^/\s@<>\"'`]+)@")
_BASIC = re.compile(r"\bBasic\s+(?P<b64>[A-Za-z0-9+/]{8,}={0,2})")
# NAME=value, NAME: value, "name": "value", {\"name\": \"value\"} inside any text.
# The name's run is possessive (``{0,79}+``): what follows a name (a backslash, a quote, a
# blank, ``:`` or ``=``) is never a name character, so giving characters back can never make
# a match — it only cost a backtrack per character of every word of prose (same matches).
_NAMED = re.compile(
    r"(?P<name>[A-Za-z_][A-Za-z0-9_.\-]{0,79}+)\\*[\"']?[ \t]*[:=][ \t]*(?P<quote>\\*[\"'])?"
    r"(?P<value>[^\s\"'\\,;&}{\]\[)(<>]+)")
# a multipart/form-data part: ``Content-Disposition: form-data; name="api_key"``, its other
# headers, a blank line, then the value (judged by the query rules: a form field is one)
_MULTIPART_PART = re.compile(
    r"(?i)content-disposition:[ \t]*form-data;[^\r\n]*?\bname=\"(?P<name>[^\"\r\n]{1,80})\""
    r"[^\r\n]*\r?\n(?:[^\r\n]{1,1000}\r?\n){0,20}?\r?\n(?P<value>[^\r\n]+)")
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


def entropy(text: str) -> float:
    """Shannon entropy in bits per character (``scan`` judges plain tokens by it too)."""
    counts: dict[str, int] = {}
    for ch in text:
        counts[ch] = counts.get(ch, 0) + 1
    n = len(text)
    return -sum(c / n * math.log2(c / n) for c in counts.values())


def _bare_aws_secret(run: str) -> bool:
    """A 40-character base64 run that looks random: mixed case and digits (a git SHA is hex,
    a path has words) and high entropy."""
    return (any(c.isupper() for c in run) and any(c.islower() for c in run)
            and any(c.isdigit() for c in run) and entropy(run) > 4.2)


_UNICODE_ESCAPE = re.compile(r"\\u([0-9a-fA-F]{4})")


def _unescaped(text: str) -> tuple[str, list[int]] | None:
    """``text`` with JSON ``\\uXXXX`` escapes decoded, and where each decoded character
    starts in ``text`` (one more entry for the end); None if there is nothing to decode."""
    if "\\u" not in text:
        return None
    out: list[str] = []
    where: list[int] = []
    pos = 0
    for m in _UNICODE_ESCAPE.finditer(text):
        out.append(text[pos:m.start()])
        where.extend(range(pos, m.start()))
        out.append(chr(int(m.group(1), 16)))
        where.append(m.start())
        pos = m.end()
    if pos == 0:
        return None
    out.append(text[pos:])
    where.extend(range(pos, len(text) + 1))
    return "".join(out), where


def _rule_spans(text: str) -> Iterable[Span]:
    decoded = _unescaped(text)
    if decoded is None:
        yield from _plain_rule_spans(text)
        return
    plain, where = decoded  # a key written \u0073k-… is found in the decoded text
    for start, end, label in _plain_rule_spans(plain):
        yield where[start], where[end], label


def _continued(text: str, end: int) -> int:
    """Where a key that ends at ``end`` really ends: past a line break whose next line is
    one more run of key characters with a digit in it (a prose word has none)."""
    m = _CONTINUATION.match(text, end)
    if m is not None and any(c.isdigit() for c in m.group("tail")):
        return m.end("tail")
    return end


# What every Discord token holds (its ``.xxxxxx.`` middle): searched first, far cheaper than
# the token's own pattern, which must try every capital M, N and O of the text.
_DISCORD_MIDDLE = re.compile(r"\.[A-Za-z0-9_-]{6}\.")


def _plain_rule_spans(text: str) -> Iterable[Span]:
    for label, pattern in SHAPES:
        needs = _NEEDS.get(label)
        if needs is not None and not any(n in text for n in needs):
            continue
        if label == "discord-token" and _DISCORD_MIDDLE.search(text) is None:
            continue
        for m in pattern.finditer(text):
            end = _continued(text, m.end()) if label in _CONTINUED else m.end()
            yield m.start(), end, ("Bearer <redacted:token>" if label == "token"
                                   else f"<redacted:{label}>")
    if "://" in text and "@" in text:
        for m in _USERINFO.finditer(text):
            if not is_placeholder(m.group("pw")) and not m.group("user").startswith("<redacted"):
                yield m.start("user"), m.end("pw"), "<redacted:userinfo>"
    if "Basic" in text:  # the pattern's literal: a plain ``in`` is cheaper than the regex
        for m in _BASIC.finditer(text):
            if _basic_is_credential(m.group("b64")):
                yield m.start(), m.end(), "Basic <redacted:basic-auth>"
    for m in _AWS_SECRET_NEAR_ID.finditer(text):
        yield m.start("value"), m.end("value"), "<redacted:aws-secret>"
    for m in _BASE64_RUN.finditer(text):
        run = m.group()
        if len(run) == 40 and not text.startswith("=", m.end()) and _bare_aws_secret(run):
            yield m.start(), m.end(), "<redacted:aws-secret>"
    if "=" in text:
        for m in _QUERY_PAIR.finditer(text):
            if is_secret_name(m.group("name"), "query") and not is_placeholder(m.group("value")):
                yield m.start("value"), m.end("value"), f"<redacted:{m.group('name').lower()}>"
    if "form-data" in text or "Form-Data" in text or "FORM-DATA" in text:
        for m in _MULTIPART_PART.finditer(text):
            if is_secret_name(m.group("name"), "query") and not is_placeholder(m.group("value")):
                yield m.start("value"), m.end("value"), f"<redacted:{m.group('name').lower()}>"
    for m in _NAMED.finditer(text):
        name = m.group("name").rsplit(".", 1)[-1].lstrip("-")
        if is_secret_name(name, "text") and not is_placeholder(m.group("value")):
            end = m.end("value")
            quote = m.group("quote")
            if quote in ("'", '"'):  # a quoted value may hold spaces: it ends at its quote
                close = text.find(quote, end, end + 256)
                if close > 0 and "\n" not in text[end:close]:
                    end = close
            if m.group("value").lower() in _SCHEMES:  # Token XXXX: the token is the secret
                after = _SCHEME_VALUE.match(text, end)
                if after is not None:
                    end = after.end("value")
            yield m.start("value"), end, f"<redacted:{name.lower()}>"
    if "-u" in text or "--user" in text:
        for m in _CURL_USER.finditer(text):
            if not is_placeholder(m.group("pw")):
                yield m.start("pw"), m.end("pw"), "<redacted:password>"
    low = text.lower()
    if "mysql" in low or "mariadb" in low:
        for m in _MYSQL_PW.finditer(text):
            if not is_placeholder(m.group("pw")):
                yield m.start("pw"), m.end("pw"), "<redacted:password>"
    if "password" in low:
        for m in _NETRC_PW.finditer(text):
            group = "pw" if m.group("pw") is not None else "line_pw"
            if not is_placeholder(m.group(group)):
                yield m.start(group), m.end(group), "<redacted:password>"
    if ":\n" in text or ":\r\n" in text or ": |" in text or ": >" in text:
        yield from _yaml_spans(text)


def _yaml_spans(text: str) -> Iterable[Span]:
    """Values indented under a credential-named key: ``api_key:`` then the key on the next
    line, or a block of ``name: value`` lines under ``secrets:`` (each is secret)."""
    for block in _YAML_BLOCK.finditer(text):
        name = block.group("name").rsplit(".", 1)[-1]
        if not is_secret_name(name, "text"):
            continue
        base = block.start("body")
        for line in _YAML_LINE.finditer(block.group("body")):
            value = line.group("value").strip("\"'")
            if value and not is_placeholder(value):
                yield (base + line.start("value"), base + line.end("value"),
                       f"<redacted:{name.lower()}>")


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
    "csrf", "xsrf", "xai-", "pplx-", "nvapi-", "r8_", "fw_", "pypi-", "npm_", "sg.", "_v1_",
    "shpat_", "shpca_", "shppa_", "shpss_", ":aa", "dapi", "eaaa", "sq0", "mysql", "mariadb",
    " -u", "--user", "discord", "form-data",
)
# Shapes with no fixed prefix to look for: a 40-character base64 run (a bare AWS secret), a
# Discord token's ``.xxxxxx.`` middle, a Twilio ``SK`` + 32 hex key.
_SHAPELESS = re.compile(r"[A-Za-z0-9/+]{40}|\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27}|SK[a-f0-9]{32}")


_SCALARS = frozenset({int, float, bool, type(None)})


def scalars_only(items: list[Any]) -> bool:
    """True when ``items`` holds only numbers, booleans and nulls (exactly those types, not
    subclasses), which no rule can match: a token-id or logprob list, skipped whole. One pass
    in C — walking such lists item by item was most of the scan of a report's data."""
    return set(map(type, items)) <= _SCALARS


def might_hold_secret(text: str) -> bool:
    """False only when no rule (shape or name) could find anything in ``text``."""
    low = text.lower()
    for marker in _MARKERS:  # a plain loop: a generator costs more than the tests
        if marker in low:
            return True
    return len(text) >= 34 and _SHAPELESS.search(text) is not None

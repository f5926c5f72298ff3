"""Between bytes on the wire and the stored (redacted, readable) form of a cassette.

Request and response bodies are kept as parsed JSON when they are JSON — readable in a git
diff, and re-serialised on replay. The values a client parses are the same either way, so
everything downstream of the SDK is byte-identical between record and replay. Event
streams are kept as their SSE events, verbatim, and replayed as a stream.
"""

from __future__ import annotations

import base64
import gzip
import json
import json.encoder as _json_encoder
import zlib
from typing import Any
from urllib.parse import urlsplit

from hermes_replay._secrets.known import KNOWN
from hermes_replay._secrets.redact import (
    KEPT_HEADERS,
    CleanBodies,
    needs_redaction,
    redact_bytes,
    redact_headers,
    redact_json,
    redact_text,
    redact_url,
)
from hermes_replay._secrets.rules import secret_spans
from hermes_replay._secrets.sse import redact_events
from hermes_replay._session.intercept import WireRequest, WireResponse

__all__ = [
    "BodyText",
    "ExpectedRequest",
    "header_fields_from",
    "interaction_kind",
    "stored_request",
    "stored_response",
    "wire_response",
]

# The openai SDK retries these statuses; a response with one is a failed attempt, never
# written, and does not use up a sequence number (so retries during recording don't shift
# replay).
RETRYABLE_STATUS = frozenset({408, 409, 429})


def is_failed_attempt(status: int) -> bool:
    return status in RETRYABLE_STATUS or status >= 500


def interaction_kind(path: str) -> str:
    path = path.rstrip("/")
    if path.endswith("/chat/completions"):
        return "chat"
    if path.endswith("/completions"):
        return "completion"
    if path.endswith("/generate"):
        return "generate"
    if path.endswith("/responses"):
        return "responses"
    return "other"


def _header(headers: list[tuple[str, str]], name: str) -> str:
    for key, value in headers:
        if key.lower() == name:
            return value
    return ""


def _decompress(data: bytes, encoding: str) -> bytes:
    encoding = encoding.lower().strip()
    try:
        if encoding == "gzip":
            return gzip.decompress(data)
        if encoding == "deflate":
            return zlib.decompress(data)
    except (OSError, zlib.error):
        pass
    return data


_STYLES: dict[str, dict[str, Any]] = {
    "compact": {"separators": (",", ":")},
    "spaced": {"separators": (", ", ": ")},
    "indent2": {"indent": 2},
}


def _dump(value: Any, style: str) -> bytes:
    if style == "compact":  # what every OpenAI-compatible server and the openai SDK write
        return compact_text(value).encode("utf-8")
    base, *flags = style.split("+")
    text = json.dumps(value, ensure_ascii="ascii" in flags, **_STYLES[base])
    return (text + "\n" if "nl" in flags else text).encode("utf-8")


# ``json.dumps(value, ensure_ascii=False, separators=(",", ":"))`` without its per-call cost:
# each call builds a ``JSONEncoder`` and then a C encoder, several microseconds that a
# replayed request paid once per response and once per new message. This is that same C
# encoder, made once (no circular check: a JSON-decoded value has no cycles, and one that
# had would still stop at the recursion limit).
_COMPACT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
_C_COMPACT = (None if _json_encoder.c_make_encoder is None else _json_encoder.c_make_encoder(
    None, _COMPACT.default, _json_encoder.encode_basestring, None, ":", ",", False, False,
    True))


def compact_text(value: Any) -> str:
    """The compact JSON text of ``value``, exactly as ``json.dumps`` with ``(",", ":")``
    separators and ``ensure_ascii=False`` writes it."""
    if _C_COMPACT is None:  # an interpreter without the _json accelerator
        return _COMPACT.encode(value)
    return "".join(_C_COMPACT(value, 0))


_STYLE_NAMES = tuple(base + flags for base in _STYLES
                     for flags in ("", "+nl", "+ascii", "+ascii+nl"))
# One server writes every body the same way: the style that matched last is tried first, so
# recording serialises a response once instead of up to twelve times.
_last_style = ["compact"]


def _json_style(value: Any, raw: bytes) -> str | None:
    """The serialisation that reproduces the server's bytes exactly, if there is one — so a
    replayed body is byte-identical to the recorded one while the cassette stays readable."""
    hint = _last_style[0]
    for style in (hint, *(s for s in _STYLE_NAMES if s != hint)):
        if _dump(value, style) == raw:
            _last_style[0] = style
            return style
    return None


def _response_body_fields(data: bytes) -> dict[str, Any]:
    try:
        text = data.decode("utf-8")
        value = json.loads(text)
    except ValueError:  # empty, not UTF-8 or not JSON (UnicodeDecodeError is a ValueError)
        return _body_fields(data)
    if value is None:
        return {"body": None}
    style = _json_style(value, data)  # of the server's own value, before any redaction
    if style is None:  # e.g. floats written differently: keep the exact text instead
        return {"text": redact_text(text)}
    fields: dict[str, Any] = {"body": redact_json(value) if needs_redaction(value) else value}
    if style != "compact":
        fields["json_style"] = style
    return fields


def _body_fields(data: bytes, clean: CleanBodies | None = None, key: Any = None,
                 ) -> dict[str, Any]:
    """``{"body": json}`` if JSON, else ``{"text": str}``, else ``{"base64": str}``.
    ``clean``/``key``: the last body under ``key`` that needed no redaction, whose repeated
    list items are not scanned again (``needs_redaction``); this body is kept there if it
    needs none either."""
    if not data:
        return {"body": None}
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:  # scrubbed before encoding: base64 hides every rule's shape
        return {"base64": base64.b64encode(redact_bytes(data)).decode("ascii")}
    try:
        body = json.loads(text)
    except ValueError:
        return {"text": redact_text(text)}
    if needs_redaction(body, clean.get(key) if clean is not None else None):
        return {"body": redact_json(body)}
    if clean is not None:
        clean.put(key, body)
    return {"body": body}


def stored_request(wire: WireRequest, keep_headers: frozenset[str] = KEPT_HEADERS,
                   clean: CleanBodies | None = None, key: Any = None) -> dict:
    """The redacted request as a cassette stores it (and as fingerprints see it).
    ``clean``/``key``: see ``_body_fields`` (a recorder passes its rollout's)."""
    # headers and URL first: the credentials they carry become known secrets, so the same
    # values are scrubbed from the body too
    request: dict[str, Any] = {
        "method": wire.method.upper(),
        "url": redact_url(wire.url),
        "headers": redact_headers(wire.headers, keep_headers),
    }
    data = _decompress(wire.body, _header(wire.headers, "content-encoding"))
    fields = _body_fields(data, clean, key)
    if "body" in fields:
        request["body"] = fields["body"]
    else:  # not JSON: keep it, under its own key, and let the matcher see it as the body
        request["body"] = fields.get("text", fields.get("base64"))
    return request


# How JSON clients write request bodies: the openai SDK (compact, UTF-8) first, then
# ``json.dumps``' defaults (aiohttp's ``json=``). Anything else takes the full path.
_REQUEST_STYLES = ("compact", "spaced+ascii")


class BodyText:
    """The compact JSON bytes of a rollout's recorded request bodies, one turn after another.

    Why: the exact-hit check serialised each recorded body whole, and turn N's body repeats
    the tool schemas and every message of turns 0..N-1 — most of a replayed request's own
    cost. In a decoded cassette those repeated values are the *same objects* (a delta keeps
    the previous turn's list items, a blob is shared), so the bytes of a list item that is
    the very object of the previous body are reused and only the new items are serialised
    (and encoded to UTF-8: the whole body is never encoded again).
    Joined, the pieces are exactly ``json.dumps(body, ensure_ascii=False, separators=(",",
    ":"))``'s UTF-8 bytes: without indentation that text is the items' texts joined, and a
    recorded body is never changed in place (every reader copies). A lone surrogate, which
    the SDK cannot send, is encoded as such (``surrogatepass``): it can only fail the check.
    """

    __slots__ = ("_lists",)

    def __init__(self) -> None:
        # top-level key -> (the list it held last time, the bytes of each of its items)
        self._lists: dict[str, tuple[list[Any], list[bytes]]] = {}

    def pieces(self, body: dict[str, Any]) -> list[bytes] | None:
        """The body's bytes in pieces (a turn's are mostly the previous turn's objects, so
        a rollout's pieces cost memory once); None if a key is not a string."""
        out = [b"{"]
        lists: dict[str, tuple[list[Any], list[bytes]]] = {}
        for key, value in body.items():
            if not isinstance(key, str):  # never from JSON; ``json.dumps`` converts such keys
                return None
            if len(out) > 1:
                out.append(b",")
            out.append(_encode_key(key))
            if isinstance(value, list):
                old_items, old_texts = self._lists.get(key, ((), []))
                same = 0
                for new_item, old_item in zip(value, old_items, strict=False):
                    if new_item is not old_item:
                        break
                    same += 1
                texts = old_texts[:same]
                texts.extend(_utf8(compact_text(item)) for item in value[same:])
                lists[key] = (value, texts)
                out.append(b"[")
                for i, text in enumerate(texts):
                    if i:
                        out.append(b",")
                    out.append(text)
                out.append(b"]")
            else:
                out.append(_utf8(compact_text(value)))
        self._lists = lists
        out.append(b"}")
        return out

    def dump(self, body: dict[str, Any]) -> bytes:
        pieces = self.pieces(body)
        return b"".join(pieces) if pieces is not None else _dump(body, "compact")


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


_KEYS: dict[str, bytes] = {}  # a body's top-level keys, as '"key":' (a handful, reused)


def _encode_key(key: str) -> bytes:
    head = _KEYS.get(key)
    if head is None:
        head = _utf8(compact_text(key)) + b":"
        if len(_KEYS) < 256:  # bounded: keys come from cassettes
            _KEYS[key] = head
    return head


class ExpectedRequest:
    """A recorded request as the bytes its live twin must be, made before its turn comes.

    ``matches`` is the replay's fast path: a live request that is, byte for byte, one that
    the recording is the stored form of, would store as the recording and so fingerprint as
    it under any matcher, so the parse, secret scan, redaction and canonical hashing of the
    live request (most of what replaying a request cost) are skipped. It compares with what
    is *in the cassette*, so a hand-edited recording is judged by its edited content, and
    nothing new is stored. False means only "take the full path".
    """

    __slots__ = ("_body", "_compact", "method", "path", "query")

    def __init__(self, stored: dict[str, Any], text: BodyText | None = None) -> None:
        self.method = str(stored.get("method"))
        recorded = urlsplit(str(stored.get("url", "")))
        self.path, self.query = recorded.path, recorded.query
        body = stored.get("body")
        self._body = body if isinstance(body, (dict, list)) else None
        pieces = (text or BodyText()).pieces(body) if isinstance(body, dict) else None
        # the compact form: the openai SDK's, the first of ``_REQUEST_STYLES``
        self._compact: list[bytes] | bytes | None = (
            pieces if pieces is not None else
            _dump(body, "compact") if self._body is not None else None)

    def matches(self, wire: WireRequest) -> bool:
        if self._body is None or wire.method.upper() != self.method:
            return False
        live = urlsplit(wire.url)
        if live.path != self.path or live.query != self.query:
            return False
        data = _decompress(wire.body, _header(wire.headers, "content-encoding"))
        compact = self._compact
        if (compact if isinstance(compact, bytes) else b"".join(compact or ())) == data:
            return True
        return _dump(self._body, _REQUEST_STYLES[1]) == data


def _sse_secrets(text: str) -> list[tuple[int, int, str]]:
    return secret_spans(text, KNOWN.spans)


def stored_response(wire: WireResponse, keep_headers: frozenset[str] = KEPT_HEADERS) -> dict:
    response: dict[str, Any] = {
        "status": wire.status,
        "headers": redact_headers(wire.headers, keep_headers),
    }
    if wire.chunks is not None:
        text = b"".join(wire.chunks).decode("utf-8", errors="replace")
        # deltas joined before scanning: a streamed key arrives in pieces
        response["chunks"] = redact_events(text, _sse_secrets, redact_json, redact_text)
    else:
        response.update(_response_body_fields(wire.body or b""))
    return response


def wire_response(stored: dict[str, Any]) -> WireResponse:
    """The bytes to hand back on replay (no content-encoding; length set by the adapter)."""
    headers = [(k, str(v)) for k, v in (stored.get("headers") or {}).items()
               if k.lower() not in ("content-length", "content-encoding", "transfer-encoding")]
    status = int(stored.get("status", 200))
    if stored.get("chunks") is not None:
        return WireResponse(status, headers, chunks=[c.encode("utf-8") for c in stored["chunks"]])
    if "text" in stored:
        body = str(stored["text"]).encode("utf-8")
    elif "base64" in stored:
        body = base64.b64decode(stored["base64"])
    elif stored.get("body") is None:
        body = b""
    else:
        body = _dump(stored["body"], str(stored.get("json_style", "compact")))
    return WireResponse(status, headers, body=body)


_SAMPLING_KEYS = ("temperature", "top_p", "top_k", "max_tokens", "max_completion_tokens", "n",
                  "seed", "stop", "presence_penalty", "frequency_penalty", "min_p")


def header_fields_from(inter: Any, llm_paths: tuple[str, ...]) -> dict[str, Any]:
    """Header fields a recorded request reveals: base_url, model, sampling, endpoint type."""
    body = inter.request.get("body")
    body = body if isinstance(body, dict) else {}
    url = inter.request["url"].split("?", 1)[0].rstrip("/")
    derived: dict[str, Any] = {}
    for suffix in llm_paths:
        if url.endswith(suffix):
            derived["base_url"] = url[: -len(suffix)]
            break
    if body.get("model"):
        derived["model"] = body["model"]
    derived["sampling"] = {k: body[k] for k in _SAMPLING_KEYS if k in body}
    derived["endpoint_type"] = {"chat": "openai", "completion": "openai",
                                "responses": "openai"}.get(inter.kind)
    if inter.kind == "generate":
        derived["endpoint_type"] = "sglang" if "input_ids" in body else "vllm"
    return derived

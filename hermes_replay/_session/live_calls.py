"""Which LLM calls of a replay go live, and where (``replay --llm live=PATTERN``).

Re-scoring a recorded run with a changed judge: the policy's requests replay from the
cassette (and must still match: a miss is a miss), while the requests a pattern selects — the
reward calls (``scoring()``), or calls by model name or URL, for plain envs whose judge is
not marked — are sent to a live endpoint, and what it answered is written into a *new*
cassette (``Session.write_rescored``); the input cassette is never written.

Where a live call goes is always an endpoint the user named (``base_url``), never the address
the cassette recorded: a cassette is data from outside (DESIGN 7), and letting it choose the
host that receives the user's key would hand the key to whoever wrote the file. The key comes
from an environment variable the user names (``api_key_env``); it is a known secret from the
start, so no echo of it reaches the new cassette, and no other credential the replayed env
sends (its placeholder key) leaves with a live call.
"""

from __future__ import annotations

import fnmatch
import json
import os
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import parse_qsl, unquote_plus, urlencode, urlsplit, urlunsplit

from hermes_replay._secrets.known import KNOWN
from hermes_replay._secrets.redact import is_credential_header
from hermes_replay._secrets.rules import is_secret_name, secret_spans
from hermes_replay._secrets.scan import scan_string
from hermes_replay._session.intercept import WireRequest, WireResponse
from hermes_replay._terminal.render import sanitize

__all__ = ["DEFAULT_CALL_TIMEOUT", "PATTERN_HELP", "LiveCalls", "LivePattern", "base_url_problem",
           "reply_problem"]

PATTERN_HELP = ("reward (the reward calls: an LLM judge inside compute_reward), "
                "model=GLOB (the request's model name, e.g. model='gpt-4o*'), or "
                "url=HOST|URL-PREFIX (where the env addressed it, e.g. url=judge.internal:8000)")
_REWARD_WORDS = frozenset({"reward", "rewards", "reward-calls", "reward calls", "judge"})
# hop-by-hop headers the client sets again for the new address
_DROPPED = frozenset({"host", "content-length", "transfer-encoding"})


@dataclass(frozen=True)
class LivePattern:
    """One ``--llm live=PATTERN``: which requests it selects."""

    kind: Literal["reward", "model", "url"]
    value: str = ""

    @classmethod
    def parse(cls, text: str) -> LivePattern:
        """``reward``, ``model=GLOB``, ``url=HOST|PREFIX``; a bare ``http(s)://`` prefix is a
        URL, another bare word a model glob. ValueError names the forms."""
        text = text.strip()
        if text.lower() in _REWARD_WORDS:
            return cls("reward")
        key, sep, value = text.partition("=")
        if sep and key.strip().lower() in ("model", "url"):
            value = value.strip()
            if not value:
                example = "model=judge-*" if key.strip() == "model" else "url=host:8000"
                raise ValueError(f"live={text!r}: say which {key.strip()}, e.g. {example}")
            return cls(key.strip().lower(), value)  # type: ignore[arg-type]
        if sep or not text:
            raise ValueError(f"live={text!r} is not a pattern; write one of: {PATTERN_HELP}")
        if text.startswith(("http://", "https://")):
            return cls("url", text)
        return cls("model", text)

    def selects(self, stage: str, url: str, model: str | None) -> bool:
        if self.kind == "reward":
            return stage == "reward"
        if self.kind == "model":
            return model is not None and fnmatch.fnmatchcase(model, self.value)
        if "://" in self.value:
            return url.startswith(self.value)
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
        want = self.value.lower()
        return want in (host, parts.netloc.lower())

    def describe(self) -> str:
        return "reward" if self.kind == "reward" else f"{self.kind}={self.value}"


def _model_of(body: Any) -> str | None:
    model = body.get("model") if isinstance(body, dict) else None
    return model if isinstance(model, str) else None


# Seconds one live call may take, from sending it to the end of its answer. A judge that
# answered before and then goes silent held a replay for 480 s in a probe: atroposlib's own
# timeout is 1,200 s per attempt, with retries. Two minutes is several times what a judge
# reply of a few hundred tokens takes on a loaded endpoint; --live-timeout changes it.
DEFAULT_CALL_TIMEOUT = 120.0


@dataclass
class LiveCalls:
    """The live routing of one replay: patterns, the endpoint, the key (read, never kept on
    disk or in ``repr``), and the counts the verdict reads."""

    patterns: tuple[LivePattern, ...]
    base_url: str
    api_key_env: str | None = None
    key: str | None = field(default=None, repr=False)
    call_timeout: float = DEFAULT_CALL_TIMEOUT  # seconds per live call (the guard enforces it)
    sent: int = 0  # live requests begun (retries included)
    answered: int = 0  # live requests answered (2xx), written to the new cassette
    seen: dict[str, set[str]] = field(default_factory=lambda: {"models": set(), "hosts": set()})
    # per live call (rollout, fingerprint): why its last attempt failed; removed when one answers
    _failed: dict[tuple[str | None, str], str] = field(default_factory=dict, repr=False)
    # live calls under way: id of the exchange -> (time.monotonic() sent, url)
    _pending: dict[int, tuple[float, str]] = field(default_factory=dict, repr=False)
    _late: str | None = field(default=None, repr=False)  # url of a call that timed out
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def build(cls, spec: LiveCalls | Mapping[str, Any],
              environ: Mapping[str, str] | None = None) -> LiveCalls:
        """From ``{"patterns": [...], "base_url": URL, "api_key_env": VAR}`` (what the CLI
        and ``run_cassette(live=...)`` pass, plain data that crosses to worker processes)."""
        if isinstance(spec, LiveCalls):
            return spec
        if not isinstance(spec, Mapping):
            raise ValueError("live must be a mapping like {'patterns': ['reward'], "
                             "'base_url': 'http://127.0.0.1:8000/v1'}")
        raw = spec.get("patterns") or ()
        if isinstance(raw, str):
            raw = [raw]
        patterns = tuple(p if isinstance(p, LivePattern) else LivePattern.parse(str(p))
                         for p in raw)
        if not patterns:
            raise ValueError(f"live: no pattern given; write one of: {PATTERN_HELP}")
        base_url = str(spec.get("base_url") or "").strip()
        problem = base_url_problem(base_url)
        if problem:
            raise ValueError(f"live: {problem}")
        env = os.environ if environ is None else environ
        var = spec.get("api_key_env") or None
        key = None
        if var is not None:
            key = env.get(str(var), "")
            if not key:
                raise ValueError(f"live: the environment variable {var} (api_key_env) is not "
                                 "set or empty; export the judge endpoint's key in it")
        if key is not None:  # known from the start: no echo of it is ever written
            KNOWN.add(key, "live-api-key")
        parts = urlsplit(base_url)
        base_url = urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/"), parts.query,
                               ""))
        timeout = spec.get("call_timeout")
        try:
            timeout = DEFAULT_CALL_TIMEOUT if timeout is None else float(timeout)
        except (TypeError, ValueError):
            timeout = -1.0
        if not 0 < timeout < float("inf"):
            raise ValueError(f"live: the per-call timeout {spec.get('call_timeout')!r} is not "
                             "a positive number of seconds; give e.g. --live-timeout 120")
        return cls(patterns, base_url, str(var) if var else None, key, timeout)

    def host_port(self) -> tuple[str, int]:
        """The one host (and port) a live call may connect to (``_runner.netblock``)."""
        parts = urlsplit(self.base_url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        return (parts.hostname or "").lower(), port

    # ------------------------------------------------------------------ outcomes

    def began(self) -> None:
        with self._lock:
            self.sent += 1

    def opened(self, token: object, url: str) -> None:
        """A live call went out (``token``: its exchange); ``closed`` when it ends."""
        with self._lock:
            self._pending[id(token)] = (time.monotonic(), url)

    def closed(self, token: object, timed_out: bool = False) -> None:
        """The call ended; ``timed_out``: its client gave up at the deadline (the transport
        bound), which stops the run as the deadline itself would, not after retries."""
        with self._lock:
            sent = self._pending.pop(id(token), None)
            if timed_out and sent is not None and self._late is None:
                self._late = sent[1]

    def overdue(self) -> str | None:
        """Why the run must stop: a live call still unanswered after ``call_timeout``."""
        now = time.monotonic()
        with self._lock:
            late = [(start, url) for start, url in self._pending.values()
                    if now - start > self.call_timeout]
            if self._late is not None:
                late.append((0.0, self._late))
        if not late:
            return None
        url = min(late)[1]
        return (f"a live call to {url} got no complete answer within {self.call_timeout:g} s "
                f"(--live-timeout; {len(late)} call(s) overdue)")

    def succeeded(self, rollout: str | None, fingerprint: str) -> None:
        with self._lock:
            self.answered += 1
            self._failed.pop((rollout, fingerprint), None)

    def failed(self, rollout: str | None, fingerprint: str, why: str) -> None:
        """An attempt got no usable answer; a retry that answers clears it."""
        with self._lock:
            self._failed[(rollout, fingerprint)] = why

    def unanswered(self) -> list[str]:
        """The live calls whose every attempt failed: ``rollout R: why``."""
        with self._lock:
            return [f"rollout {r or '-'}: {why}" for (r, _), why in self._failed.items()]

    # ------------------------------------------------------------------ selection

    def selects(self, stage: str, wire: WireRequest) -> bool:
        """Is this intercepted LLM request one of those that go live?"""
        self.seen["hosts"].add(urlsplit(wire.url).netloc)
        if all(p.kind == "reward" for p in self.patterns):
            if stage == "reward":
                return True
            if len(self.seen["models"]) >= 20:  # enough to name in an error
                return False
        try:  # parsed for every pattern kind: the models seen name the fix of a bad pattern
            model = _model_of(json.loads(wire.body or b"null"))
        except (ValueError, UnicodeDecodeError):
            model = None
        if model is not None:
            self.seen["models"].add(model)
        return any(p.selects(stage, wire.url, model) for p in self.patterns)

    def selects_recorded(self, request: Mapping[str, Any], stage: str | None) -> bool:
        """Would a recorded request be sent live? (Those are replaced by the live answers,
        never reported as unused recordings.)"""
        if all(p.kind == "reward" for p in self.patterns):  # the stage alone: no body read
            return stage == "reward"
        url = str(request.get("url", ""))
        model = _model_of(request.get("body"))
        return any(p.selects(stage or "agent", url, model) for p in self.patterns)

    def describe(self) -> str:
        return ", ".join(f"live={p.describe()}" for p in self.patterns)

    def nothing_selected(self) -> str:
        """What the run sent instead, for the error of a rescore that sent nothing live."""
        models = ", ".join(sorted(self.seen["models"])) or "none"
        hosts = ", ".join(sorted(self.seen["hosts"])) or "none"
        return (f"no LLM request of the run matched --llm {self.describe()}, so nothing was "
                f"re-scored (the requests named the models: {models}; hosts: {hosts})")

    # ------------------------------------------------------------------ the live request

    def outgoing(self, wire: WireRequest, llm_paths: Iterable[str]) -> WireRequest:
        """``wire`` as it goes to the live endpoint: the same body, to ``base_url`` + the
        request's LLM path suffix (``/chat/completions`` …, as an SDK joins a base URL),
        with the user's key instead of any credential the replayed env sent."""
        parts = urlsplit(wire.url)
        path = parts.path.rstrip("/")
        suffix = next((s for s in sorted(llm_paths, key=len, reverse=True)
                       if s and path.endswith(s)), path)
        base = urlsplit(self.base_url)
        # the path joins the base URL's path, the queries join after it (a base URL's
        # ``?api-version=…`` first); a credential the env put in its query stays here
        query = [*parse_qsl(base.query, keep_blank_values=True),
                 *((k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True)
                   if not is_secret_name(k, "query") and not secret_spans(v, KNOWN.spans))]
        url = urlunsplit((base.scheme, base.netloc, base.path.rstrip("/") + suffix,
                          urlencode(query), ""))
        # every credential the replayed env sends (its placeholder key, a cookie, a judge
        # token) stays here, by the recorder's own rules: a credential's header name, or a
        # value with a key's shape or a known secret under any name
        headers = [(k, v) for k, v in wire.headers
                   if k.lower() not in _DROPPED and not is_credential_header(k)
                   and not secret_spans(v, KNOWN.spans)]
        if self.key:
            headers.append(("authorization", f"Bearer {self.key}"))
        return WireRequest(wire.method, url, headers, wire.body)

    def header_fields(self) -> dict[str, Any]:
        """What the new cassette's header says about how it was made (no key, no value of
        the variable: its name only)."""
        # not "api_key_env": a field named like a credential is one to `verify`
        return {"live": [p.describe() for p in self.patterns], "endpoint": self.base_url,
                "authorized_by": f"${self.api_key_env}" if self.api_key_env else None}


def base_url_problem(url: str) -> str | None:
    """Why ``url`` cannot be a live endpoint's base URL, or None."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return (f"the live endpoint {url!r} is not an http(s) URL; give its base URL, e.g. "
                "--live-base-url http://127.0.0.1:8000/v1 (never assumed: a live call goes "
                "only where you say)")
    fix = ("put the key in an environment variable and name it with --live-api-key-env VAR "
           "(the URL is printed, and written to replay.json and the rescored cassette)")
    if parts.username or parts.password:
        return f"the live endpoint's URL carries credentials; {fix}"
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if _key_shaped(name):  # a key as a bare name (?sk-proj-…): never printed
            return f"the live endpoint's URL carries a key as a query name; {fix}"
        if is_secret_name(name, "query") or _key_shaped(value):
            return (f"the live endpoint's URL carries a credential in its query "
                    f"({sanitize(name):.40}=…); {fix}")
    for where, text in _url_pieces(parts):
        if _key_shaped(text):
            return f"the live endpoint's URL carries what looks like a key in its {where}; {fix}"
    return None


def _url_pieces(parts: Any) -> Iterable[tuple[str, str]]:
    """Every piece of a URL's path, query and fragment a key could hide in, as written and
    percent-decoded: a segment, a ``;``/``&``/``=``/``,`` separated part, the whole."""
    for where, raw, seps in (("path", parts.path, "/;,"), ("query", parts.query, "&;=,"),
                             ("fragment", parts.fragment, "/&;=,")):
        pieces = [raw]
        for sep in seps:
            pieces = [p for piece in pieces for p in piece.split(sep)]
        for piece in [raw, *pieces]:
            yield where, piece
            if "%" in piece or "+" in piece:
                yield where, unquote_plus(piece)


def _key_shaped(text: str) -> bool:
    """What ``verify`` would flag in a URL: a key shape, a known secret, or a long
    random-looking token (a model or deployment name is words; ``v1`` is short)."""
    return bool(text) and next(scan_string(text, "the URL", credential_slot=True), None) \
        is not None


# paths whose answer is a JSON object with a ``choices`` list (the OpenAI API's)
_CHOICES_PATHS = ("/chat/completions", "/completions")


def reply_problem(wire: WireResponse, url: str) -> str | None:
    """Why a 2xx answer of the live endpoint is not the API's answer, or None.

    A proxy's login page or a misrouted base URL answers ``200 text/html``; the env's client
    fails on it and its judge falls back to something else (a keyword match), so the run
    would score without its judge and write those pages into a cassette that replays
    ``ok``. Only what the API sends counts: an event stream, or a JSON object (with
    ``choices`` on the completion paths). The body is never quoted (it may echo the key)."""
    content_type = next((v for k, v in wire.headers if k.lower() == "content-type"), "")
    kind = content_type.split(";")[0].strip() or "no content-type"
    if wire.chunks is not None:
        return None if "text/event-stream" in content_type else (
            f"HTTP {wire.status} {kind} stream from {url}: not the API's answer")
    body = wire.body or b""
    value: Any = None
    for encoding in ("utf-8", _charset(content_type)):
        try:
            value = json.loads(body.decode(encoding))
            break
        except (ValueError, LookupError):
            continue
    path = urlsplit(url).path.rstrip("/")
    if not isinstance(value, dict) or (path.endswith(_CHOICES_PATHS)
                                       and not isinstance(value.get("choices"), list)):
        shape = "a JSON " + type(value).__name__ if value is not None else f"{len(body)} bytes"
        return (f"HTTP {wire.status} {kind} reply from {url} is not the API's JSON "
                f"({shape}{', no choices' if isinstance(value, dict) else ''})")
    return None


def _charset(content_type: str) -> str:
    for param in content_type.split(";")[1:]:
        name, _, value = param.partition("=")
        if name.strip().lower() == "charset":
            return value.strip().strip('"') or "latin-1"
    return "latin-1"

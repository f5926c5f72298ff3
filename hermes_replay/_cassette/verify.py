"""``verify``: is a cassette well-formed, self-consistent, and free of secrets?

Why a separate pass from ``load_cassette``: loading stops at the first problem and trusts
what it reads; a reviewer (or CI, before a cassette is merged) wants *every* problem, with
its file:line, and wants to know that no credential slipped past redaction — a cassette is
committed to git, where a key lives forever. Three kinds of finding:

- ``schema``: a line that is not JSON, a record of unknown type or with fields of the wrong
  type, a header this version cannot read, an ``env_file`` that points outside the project
  (``replay`` runs that file), a rollout id with path separators or control characters.
- ``integrity``: a blob whose content does not hash to its id (the format's checksum), a
  reference to a blob or an earlier turn that does not exist, duplicate or missing turn
  numbers, an interrupted (``.partial``) recording, signs of a cut-off file, a request body
  that no longer matches its stored fingerprint (edited by hand, ``_cassette.fingerprints``).
- ``secret``: whatever ``record`` would have scrubbed — the same rules (``_secrets.rules``):
  provider key shapes (OpenAI, Anthropic, Google, Hugging Face, GitHub, GitLab, Slack,
  Stripe, Groq, AWS), JWTs, PEM private keys, URL passwords, credential-named fields, query
  parameters, headers, flags and ``NAME=value`` pairs, streamed deltas joined, and the values
  of credential-named environment variables of the process running ``verify``; plus long
  high-entropy tokens in header or query positions. Found values are never printed whole.

Entropy is judged only where a credential can sit (headers, query strings, key-named
fields): message text, ids and token lists are data, and flagging them would drown the
real findings.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

from hermes_replay._cassette import SCHEMA_VERSION, load_cassette
from hermes_replay._cassette.files import cassette_files, first_line, name_too_long, read_lines
from hermes_replay._cassette.fingerprints import EDIT_HINT, edited_requests
from hermes_replay._cassette.format import blob_id
from hermes_replay._cassette.model import ROLLOUT_ID_RULE, rollout_id_problem
from hermes_replay._cassette.normalizers import from_header, use_problem
from hermes_replay._errors import CassetteError
from hermes_replay._secrets.known import KNOWN
from hermes_replay._secrets.payloads import decoded_payloads
from hermes_replay._secrets.scan import scan_command, scan_string, scan_value

__all__ = ["Finding", "find_cassettes", "scan_value", "verify_file", "verify_paths"]

_RERECORD = "re-record it with `hermes-replay record …`"
_SECRET_HINT = ("remove it now: revoke/rotate the credential (git history keeps it), then "
                "re-record (redaction applies) or replace the value with \"<redacted>\"")
_DAMAGED = "restore the file from git, or " + _RERECORD


@dataclass(frozen=True)
class Finding:
    """One problem in one cassette. ``line`` is 1-based (None: the file as a whole)."""

    path: Path
    line: int | None
    kind: str  # "schema" | "integrity" | "secret"
    message: str
    hint: str

    def describe(self) -> str:
        where = f"{self.path}:{self.line}" if self.line is not None else str(self.path)
        return f"{where}: {self.kind}: {self.message}\n  next step: {self.hint}"


# ----------------------------------------------------------------------------- structure

def _check_header(record: dict[str, Any]) -> Iterator[str]:
    version = record.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        yield f"bad schema_version {version!r} (an integer from 1 is required)"
    elif version > SCHEMA_VERSION:
        yield (f"schema_version {version} is newer than this hermes-replay reads "
               f"({SCHEMA_VERSION}); upgrade hermes-replay")
    env_file = record.get("env_file")
    if env_file is not None:
        if not isinstance(env_file, str):
            yield f"env_file must be a string, not {type(env_file).__name__}"
        elif name_too_long(env_file):
            yield f"env_file {name_too_long(env_file)}: no file has that name"
        elif (PurePosixPath(env_file).is_absolute() or PureWindowsPath(env_file).is_absolute()
              or ".." in PurePosixPath(env_file.replace("\\", "/")).parts):
            yield (f"env_file {env_file!r} points outside the project (absolute or '..'); "
                   "`hermes-replay replay` would run that file")
    command = record.get("command", [])
    if not isinstance(command, list) or not all(isinstance(a, str) for a in command):
        yield "command must be a list of strings"
    try:  # the very check a replay makes when it opens the cassette
        from_header(record.get("normalizers"))
    except ValueError as exc:
        yield f"normalizers: {exc} (replay refuses this cassette)"


def _check_interaction(record: dict[str, Any]) -> Iterator[str]:
    rollout = record.get("rollout")
    if rollout is not None and not isinstance(rollout, str):
        yield f"rollout must be a string or null, not {type(rollout).__name__}"
    elif isinstance(rollout, str) and rollout_id_problem(rollout) is not None:
        yield f"{rollout_id_problem(rollout)}; {ROLLOUT_ID_RULE}"
    seq = record.get("seq")
    if not isinstance(seq, int) or isinstance(seq, bool) or seq < 0:
        yield f"seq must be a non-negative integer, not {seq!r:.40}"
    for name in ("kind", "fingerprint", "stage"):
        if name in record and not isinstance(record[name], str):
            yield f"{name} must be a string"
    if not isinstance(record.get("duration_ms", 0), (int, float)):
        yield "duration_ms must be a number"
    request, response = record.get("request"), record.get("response")
    if not isinstance(request, dict):
        yield "request must be an object"
    else:
        if not isinstance(request.get("url"), str):
            yield "request.url must be a string"
        if not isinstance(request.get("method", "POST"), str):
            yield "request.method must be a string"
        if not isinstance(request.get("headers", {}), dict):
            yield "request.headers must be an object"
    if not isinstance(response, dict):
        yield "response must be an object"
    else:
        status = response.get("status")
        if not isinstance(status, int) or isinstance(status, bool) or not 100 <= status <= 599:
            yield f"response.status must be an HTTP status code, not {status!r:.40}"
        elif status >= 500 or status in (408, 409, 429):
            yield (f"response.status {status} is a failed attempt recorded as an interaction "
                   "(replay would return the failure)")
        chunks = response.get("chunks")
        if chunks is not None and not (isinstance(chunks, list)
                                       and all(isinstance(c, str) for c in chunks)):
            yield "response.chunks must be a list of strings"


def _markers(value: Any) -> Iterator[tuple[str, Any]]:
    """Every ``{"$blob": …}`` / ``{"$delta": …}`` marker inside a value."""
    if isinstance(value, dict):
        if len(value) == 1 and next(iter(value)) in ("$blob", "$delta"):
            key = next(iter(value))
            yield key, value[key]
            if key == "$delta" and isinstance(value[key], dict):
                yield from _markers(value[key].get("append"))
            return
        for item in value.values():
            yield from _markers(item)
    elif isinstance(value, list):
        for item in value:
            yield from _markers(item)


@dataclass
class _State:
    blobs: set[str]
    turns: dict[str | None, dict[int, int]]  # rollout -> seq -> line
    outcomes: set[str]
    interactions: int = 0
    tools: int = 0
    header_seen: bool = False


def _check_record(record: dict[str, Any], line: int, state: _State,
                  partial: bool) -> Iterator[tuple[str, str]]:
    kind = record.get("type")
    if kind == "blob":
        ident = record.get("id")
        if not isinstance(ident, str) or "value" not in record:
            yield "schema", "blob record needs a string id and a value"
            return
        if blob_id(record["value"]) != ident:
            yield "integrity", f"blob {ident!r} does not match its content (checksum differs)"
        state.blobs.add(ident)
        return
    if kind == "annotate":
        if not isinstance(record.get("fields"), dict):
            yield "schema", "annotate record needs a fields object"
        return
    if kind == "outcome":
        rollout = record.get("rollout")
        if not isinstance(rollout, str):
            yield "schema", "outcome record needs a string rollout"
        else:
            state.outcomes.add(rollout)
        reward = record.get("reward")
        if reward is not None and (not isinstance(reward, (int, float)) or math.isnan(reward)):
            yield "schema", f"outcome reward must be a number, not {reward!r:.40}"
        return
    if kind == "tool":
        state.tools += 1
        yield from _check_tool(record, state)
        return
    if kind != "interaction":
        yield "schema", f"unknown record type {kind!r}"
        return
    problems = list(_check_interaction(record))
    yield from (("schema", p) for p in problems)
    if problems:
        return
    state.interactions += 1
    rollout, seq = record.get("rollout"), record["seq"]
    turns = state.turns.setdefault(rollout, {})
    if seq in turns and not partial:
        yield "integrity", (f"duplicate recording for rollout {rollout!r} turn {seq} "
                            f"(first at line {turns[seq]})")
    for marker, value in _markers(record):
        if marker == "$blob" and value not in state.blobs:
            yield "integrity", f"refers to blob {value!r:.40}, which no earlier line defines"
        if marker == "$delta":
            prev = value.get("prev") if isinstance(value, dict) else None
            if rollout is None or not isinstance(prev, int) or prev not in turns:
                yield "integrity", (f"delta refers to turn {prev!r:.20} of rollout "
                                    f"{rollout!r}, not recorded on an earlier line")
    turns.setdefault(seq, line)


def _check_tool(record: dict[str, Any], state: _State) -> Iterator[tuple[str, str]]:
    rollout, seq, name = record.get("rollout"), record.get("seq"), record.get("name")
    if rollout is not None and not isinstance(rollout, str):
        yield "schema", "tool record: rollout must be a string or null"
    if not isinstance(seq, int) or isinstance(seq, bool) or seq < 0:
        yield "schema", f"tool record: seq must be a non-negative integer, not {seq!r:.20}"
    if not isinstance(name, str) or not name:
        yield "schema", "tool record needs a string name"
    for marker, value in _markers(record):
        if marker == "$blob" and value not in state.blobs:
            yield "integrity", f"refers to blob {value!r:.40}, which no earlier line defines"
        elif marker == "$delta":
            yield "schema", "tool record: deltas are only allowed in interaction bodies"


def _check_totals(path: Path, state: _State, partial: bool) -> Iterator[Finding]:
    if partial:
        yield Finding(path, None, "integrity",
                      f"interrupted recording (.partial) with {state.interactions} complete "
                      "interaction(s)",
                      "finish or discard it: re-record, or delete the .partial file")
        return
    if state.header_seen and state.interactions == state.tools == 0:  # a replay runs nothing
        yield Finding(path, None, "integrity",
                      "holds no recording (nothing after the header): a replay of it "
                      "runs nothing, and a replay that runs nothing fails",
                      "record it again with a command that runs at least one step, or delete "
                      "it")
    for rollout, turns in state.turns.items():
        if rollout is not None and sorted(turns) != list(range(len(turns))):
            yield Finding(path, min(turns.values()), "integrity",
                          f"rollout {rollout!r} has turns {sorted(turns)[:10]} "
                          f"(expected 0..{len(turns) - 1}: a turn is missing)", _DAMAGED)
    with_turns = {r for r in state.turns if r is not None}
    if state.outcomes and with_turns - state.outcomes:
        missing = sorted(with_turns - state.outcomes)
        yield Finding(path, None, "integrity",
                      f"{len(missing)} rollout(s) have no outcome while others do "
                      f"(e.g. {missing[0]!r}): the file may be cut off", _DAMAGED)


# ----------------------------------------------------------------------------- files


def verify_file(path: str | Path) -> list[Finding]:
    """Every problem in one cassette (empty list: it is fine)."""
    with KNOWN.scope():  # this shell's credential variables, forgotten afterwards
        KNOWN.add_environ()
        return _verify_file(Path(path))


def _verify_file(path: Path) -> list[Finding]:
    partial = path.name.endswith(".partial")
    try:
        raw_lines = read_lines(path)  # zstd streamed, both size caps checked first
    except OSError as exc:
        return [Finding(path, None, "schema", f"cannot read the file: {exc}", _DAMAGED)]
    except CassetteError as exc:  # a damaged or oversized zstd file
        return [Finding(path, exc.line, "integrity", exc.reason, exc.hint or _DAMAGED)]
    findings: list[Finding] = []
    state = _State(set(), {}, set())
    torn = partial and raw_lines[-1] != b""
    if raw_lines[-1] == b"":
        raw_lines.pop()
    if not raw_lines and partial:  # killed before the header line was written
        return list(_check_totals(path, state, partial))
    if not raw_lines:
        return [Finding(path, 1, "schema", "empty file: no header line", _RERECORD)]
    for number, raw in enumerate(raw_lines, start=1):
        if not raw.strip():
            continue
        findings.extend(_check_line(path, number, raw, state, partial,
                                    last_torn=torn and number == len(raw_lines)))
    findings.extend(_check_totals(path, state, partial))
    if partial and not state.header_seen:
        return findings  # only a torn header line: nothing else to load
    if not any(f.kind == "schema" or "blob" in f.message or "delta" in f.message
               for f in findings):
        try:
            cassette = load_cassette(path)
            findings.extend(Finding(path, e.line, "integrity", e.message(), EDIT_HINT)
                            for e in edited_requests(cassette))
            used = _normalizers_in_use(cassette)  # as a replay's index applies them at open
            if used:
                findings.append(Finding(path, 1, "schema", f"normalizers: {used} (replay "
                                        "refuses this cassette)", _RERECORD))
        except CassetteError as exc:
            findings.append(Finding(path, exc.line, "schema", exc.reason, exc.hint or _DAMAGED))
        except Exception as exc:  # a loader bug must still show up as a finding, not a crash
            findings.append(Finding(path, None, "schema",
                                    f"load_cassette fails: {type(exc).__name__}: {exc}"[:300],
                                    _DAMAGED))
    return findings


def _normalizers_in_use(cassette: Any) -> str | None:
    try:
        kept = from_header(cassette.header.normalizers)
    except ValueError:
        return None  # named by the header's own check
    return use_problem(kept, (inter.request for inter in cassette.interactions))


def _check_line(path: Path, number: int, raw: bytes, state: _State, partial: bool,
                last_torn: bool) -> list[Finding]:
    out: list[Finding] = []

    def add(kind: str, message: str, hint: str = _DAMAGED) -> None:
        out.append(Finding(path, number, kind, message, hint))

    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        add("schema", f"not UTF-8 text (byte {exc.start} of the line)")
        return out
    try:
        record = json.loads(text)
    except (ValueError, RecursionError) as exc:
        for problem in scan_string(text, "the line", credential_slot=False):
            add("secret", problem, _SECRET_HINT)  # a damaged line can still hold a key
        if last_torn:
            return out  # the write a crash interrupted; counted by the .partial finding
        reason = getattr(exc, "msg", None) or f"{type(exc).__name__}: {str(exc)[:80]}"
        add("schema", f"not valid JSON ({reason})")
        return out
    if not isinstance(record, dict):
        add("schema", f"a record must be a JSON object, not {type(record).__name__}")
        return out
    if not state.header_seen:
        if record.get("type") != "header":
            add("schema", "line 1 is not a cassette header",
                "is this a hermes-replay cassette? If so, " + _RERECORD)
        else:
            for problem in _check_header(record):
                add("schema", problem, _RERECORD)
            for problem in scan_command(record.get("command")):
                add("secret", problem, _SECRET_HINT)
        state.header_seen = True
        for problem in scan_value({k: v for k, v in record.items() if k != "command"}):
            add("secret", problem, _SECRET_HINT)
        return out
    for kind, problem in _check_record(record, number, state, partial):
        add(kind, problem)
    for problem in scan_value(record):
        add("secret", problem, _SECRET_HINT)
    if record.get("type") == "tool":  # base64 file payloads, decoded (_secrets.payloads)
        for path, text in decoded_payloads(record.get("name"), record.get("result")):
            for problem in scan_string(text, f"downloaded file {path or '(the file)'}",
                                       credential_slot=False):
                add("secret", problem, _SECRET_HINT)
    return out


def find_cassettes(target: Path) -> tuple[list[Path], list[Finding]]:
    """Cassettes at ``target``: the file itself, or every ``*.jsonl`` / ``*.jsonl.zst`` (and
    their ``.partial`` journals) under a folder whose first line is not some other JSON object
    (env data files are skipped). A symlink that leads outside the folder is a finding, never
    followed."""
    if target.is_file():
        return [target], []
    found: list[Path] = []
    findings: list[Finding] = []
    root = target.resolve()
    for path in cassette_files(target, partial=True):
        if path.is_symlink() and not path.resolve().is_relative_to(root):
            findings.append(Finding(path, None, "integrity",
                                    f"symlink to {path.resolve()}, outside {target}",
                                    "replace the link with the cassette itself"))
            continue
        if path.is_file() and _looks_like_cassette(path):
            found.append(path)
    return found, findings


def _looks_like_cassette(path: Path) -> bool:
    try:
        first = json.loads(first_line(path) or b"null")
    except (OSError, ValueError, RecursionError):
        return True  # broken: let verify_file say how
    return not isinstance(first, dict) or first.get("type") == "header" or \
        "schema_version" in first


def verify_paths(paths: Iterable[str | Path]) -> tuple[list[Path], list[Finding]]:
    """Verify files and folders; returns ``(cassettes checked, findings)``."""
    checked: list[Path] = []
    findings: list[Finding] = []
    for target in map(Path, paths):
        if not target.exists() and not target.is_symlink():
            findings.append(Finding(target, None, "schema", "no such file or folder",
                                    "check the path"))
            continue
        cassettes, problems = find_cassettes(target)
        mine = list(problems)
        for path in cassettes:
            checked.append(path)
            mine.extend(verify_file(path))
        findings.extend(mine + _shards_merge(target, mine))
    return checked, findings


def _shards_merge(target: Path, findings: list[Finding]) -> list[Finding]:
    """A ``.shards`` folder whose files are each fine must also merge: same recording, no
    rollout id in two shards (else replay could serve only one of them)."""
    from hermes_replay._cassette.merge import SHARDS_SUFFIX, MergeError, load_shards

    if not (target.is_dir() and target.name.endswith(SHARDS_SUFFIX)) or findings:
        return []
    try:
        load_shards(target)
    except MergeError as exc:
        return [Finding(exc.path or target, None, "integrity", exc.reason,
                        exc.hint or "re-record the shards")]
    except CassetteError:
        return []  # verify_file already reported it
    return []

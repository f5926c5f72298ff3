"""Hermetic tokenizers: a cassette carries the tokenizer it was recorded with.

Token-level data (Phase 2 ``/generate`` prompts, trainer tokens and masks) is only reproducible
with the very tokenizer files it was made with, and a hub model cannot be fetched offline. So:

* The header's ``tokenizer`` is ``{"name", "fingerprint"}`` (the env annotates it; the
  fingerprint is :func:`hermes_replay._tokenizers.bundled.tokenizer_fingerprint`, content only).
* Recording with a tokenizer that is NOT the bundled one copies its files into a
  content-addressed store beside the cassettes — ``<cassettes root>/.tokenizers/<sha256>/`` —
  and the header gets ``"store": "<path relative to the cassette's folder>"``. The cassettes root
  is the nearest ancestor folder named ``cassettes`` (so all envs share one store), else the
  cassette's own folder. The bundled tokenizer ships with the package and is referenced by name
  and fingerprint only.
* Replay: an env whose ``tokenizer_name`` is not a local folder (a hub id, or a path that no
  longer exists) is given the stored copy instead (:func:`tokenizer_for_run`), so replay needs no
  hub. A tokenizer whose fingerprint differs from the recorded one fails the replay with
  :class:`TokenizerMismatch` — what was recorded, what is loaded, how to fix it.

The store is plain files in git: reviewable, deduplicated by content, written once (a folder
that exists is never rewritten, so concurrent recorders cannot corrupt it).
"""

from __future__ import annotations

import logging
import os
import shutil
import uuid
from pathlib import Path
from typing import Any

from hermes_replay._errors import CassetteError

__all__ = [
    "STORE_DIR",
    "TokenizerMismatch",
    "check_tokenizer",
    "describe",
    "mismatch",
    "store_root",
    "store_tokenizer",
    "stored_dir",
    "tokenizer_for_run",
    "with_store",
]

STORE_DIR = ".tokenizers"
# Files that make up a tokenizer in the transformers layouts we meet; model weights are not.
_EXTRA_FILES = ("vocab.json", "merges.txt", "tokenizer.model", "added_tokens.json",
                "chat_template.jinja", "vocab.txt", "spiece.model")


class TokenizerMismatch(CassetteError):
    """Replay: the env loaded a tokenizer other than the one the cassette was recorded with."""


def describe(name: str) -> dict[str, Any]:
    """``{"name", "fingerprint"}`` for the env's ``tokenizer_name`` (for ``annotate``).

    The bundled tokenizer is named by its stable name, not this machine's path; a hub id has
    no local files here, so no fingerprint (it is stored and checked once it was recorded
    from a folder)."""
    from hermes_replay._tokenizers.bundled import (
        TOKENIZER_NAME,
        tokenizer_fingerprint,
        tokenizer_path,
    )

    fingerprint: str | None = None
    if name == TOKENIZER_NAME:  # named, not given as a folder: this install's copy
        return {"name": name, "fingerprint": tokenizer_fingerprint()}
    if os.path.isdir(name):
        try:
            fingerprint = tokenizer_fingerprint(name)
        except OSError:
            fingerprint = None
        if os.path.samefile(name, tokenizer_path()):
            name = TOKENIZER_NAME
    return {"name": name, "fingerprint": fingerprint}


def store_root(cassette: str | Path) -> Path:
    """``<nearest ancestor named cassettes>/.tokenizers``, else ``<cassette dir>/.tokenizers``."""
    folder = Path(cassette).resolve().parent
    for candidate in (folder, *folder.parents):
        if candidate.name == "cassettes":
            return candidate / STORE_DIR
    return folder / STORE_DIR


def _digest(fingerprint: str) -> str:
    digest = fingerprint.split(":", 1)[-1]
    if not digest or not all(c in "0123456789abcdef" for c in digest):
        raise ValueError(f"not a sha256 fingerprint: {fingerprint!r}")
    return digest


def store_tokenizer(cassette: str | Path, source: str | Path, fingerprint: str) -> str:
    """Copy the tokenizer files of ``source`` into the store; returns the header's ``store``.

    Content-addressed by ``fingerprint``: an existing entry is reused as it is. The copy goes to
    a temporary folder renamed into place, so a reader never sees half a tokenizer."""
    from hermes_replay._tokenizers.bundled import TOKENIZER_FILES, tokenizer_fingerprint

    root = store_root(cassette)
    target = root / _digest(fingerprint)
    if not target.is_dir():
        root.mkdir(parents=True, exist_ok=True)
        tmp = root / f".{target.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
        tmp.mkdir()
        try:
            for name in (*TOKENIZER_FILES, *_EXTRA_FILES):
                if (Path(source) / name).is_file():
                    shutil.copyfile(Path(source) / name, tmp / name)
            copied = tokenizer_fingerprint(tmp)
            if copied != fingerprint:  # the source changed while we copied it
                raise ValueError(f"tokenizer files in {source} changed while being stored "
                                 f"({fingerprint} → {copied})")
            try:
                os.rename(tmp, target)
            except OSError:
                if not target.is_dir():  # not "another recorder was first": a real error
                    raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return Path(os.path.relpath(target, Path(cassette).resolve().parent)).as_posix()


def with_store(cassette: str | Path, tokenizer: dict[str, Any]) -> dict[str, Any]:
    """Record: ``tokenizer`` (a header value) plus ``store`` once a non-bundled tokenizer's files
    are copied into the store. A copy that fails is logged, never fatal to the recording."""
    from hermes_replay._tokenizers.bundled import TOKENIZER_NAME

    name, fingerprint = tokenizer.get("name"), tokenizer.get("fingerprint")
    if (not isinstance(name, str) or not fingerprint or name == TOKENIZER_NAME
            or not Path(name).is_dir() or tokenizer.get("store")):
        return tokenizer
    try:
        return {**tokenizer, "store": store_tokenizer(cassette, name, str(fingerprint))}
    except (OSError, ValueError) as exc:
        logging.getLogger(__name__).warning(
            "hermes-replay: tokenizer %s was not stored with %s (%s); a replay will need it at "
            "that path", name, cassette, exc)
        return tokenizer


def stored_dir(cassette: str | Path, recorded: dict[str, Any] | None) -> Path | None:
    """The stored copy the header points at, if it is there — and only if it is an entry of
    this cassette's store (``<store root>/<sha256 hex>``, a real folder): the header is data,
    and ``"store": "../../../somewhere"`` must not make ``show``, the report or a replay open
    a tokenizer from anywhere else on the machine."""
    ref = (recorded or {}).get("store")
    if not isinstance(ref, str) or not ref:
        return None
    root = store_root(cassette).resolve()
    path = Path(cassette).resolve().parent / ref
    if path.is_symlink() or path.resolve().parent != root:
        return None
    path = path.resolve()
    name_ok = bool(path.name) and all(c in "0123456789abcdef" for c in path.name)
    if not name_ok or (path / "tokenizer.json").is_symlink():
        return None
    return path if (path / "tokenizer.json").is_file() else None


def _session() -> Any:
    """The active cassette session of this context (a ``Session``), or None."""
    from hermes_replay import _active

    return _active.current()


def tokenizer_for_run(name: str) -> str:
    """The tokenizer an environment should load for ``tokenizer_name``: the bundled one's folder
    for its name (``hermes-replay/tiny-chatml-bpe``), ``name`` itself, or — during a replay
    whose cassette stored the tokenizer recorded under ``name`` and ``name`` is no local folder
    (a hub id offline) — the stored copy. Public as
    ``hermes_replay.tokenizer_for_run``."""
    from hermes_replay._tokenizers.bundled import TOKENIZER_NAME, tokenizer_path

    if name == TOKENIZER_NAME:  # the bundled one by its name: this install's copy, any mode
        return tokenizer_path()
    session = _session()
    if session is None or session.mode != "replay" or os.path.isdir(name):
        return name
    stored = session.stored_tokenizer(name)
    return str(stored) if stored is not None else name


def check_tokenizer(name: str) -> None:
    """Raise :class:`TokenizerMismatch` now if a replay is active and tokenizer ``name`` is not
    the one the cassette was recorded with (an env calls this right after choosing it, before
    any rollout). Public as ``hermes_replay.check_tokenizer``."""
    session = _session()
    if session is not None:
        session.check_tokenizer(describe(name))


def mismatch(cassette: str | Path, recorded: dict[str, Any] | None,
             loaded: dict[str, Any]) -> TokenizerMismatch | None:
    """The error for a replay whose tokenizer differs from the recorded one, else None.

    Only fingerprints are compared (a stored copy has another name than the original); a side
    without a fingerprint (a hub id never stored, an old cassette) cannot be checked."""
    want, have = (recorded or {}).get("fingerprint"), loaded.get("fingerprint")
    if not want or not have or want == have:
        return None
    stored = stored_dir(cassette, recorded)
    fixes = ["re-record the cassette with this tokenizer (hermes-replay record …)"]
    if stored is not None:
        fixes.insert(0, f"replay with --env.tokenizer_name {stored} (the copy stored with "
                        "the cassette)")
    else:
        fixes.insert(0, f"point --env.tokenizer_name at the tokenizer {recorded.get('name')!r} "
                        "the cassette was recorded with")
    return TokenizerMismatch(
        f"the environment loaded tokenizer {loaded.get('name')!r} ({have}), but the cassette "
        f"was recorded with {recorded.get('name')!r} ({want}); its token ids would not match",
        path=cassette, hint="; or ".join(fixes))

"""Cassette files on disk: plain or zstd-compressed, found the same way by every command.

A cassette is ``*.jsonl`` (the default: small, reviewable, diffable) or ``*.jsonl.zst`` (the
same JSON Lines, zstd-compressed, for large recordings). What a file *is* is decided by its
bytes, not its name — a zstd frame starts with the magic ``28 b5 2f fd`` — so a renamed or
misnamed file still reads. What a *new* file becomes is decided by its name: a path ending in
``.zst`` is written compressed. The recording journal (``<cassette>.partial``) is always plain
JSON Lines, one flushed line per record, so a killed recorder's work stays readable by any
tool; compression happens when the finished cassette is written.

zstd comes from the standard library (``compression.zstd``, Python ≥ 3.14) or from its
backport on PyPI (``backports-zstd``, a dependency on older Pythons): the same API, by the
same authors, so this module loses its fallback when 3.14 is the oldest Python supported.

A compressed cassette is data from outside like any other: a few kilobytes of zstd can claim
terabytes. So it is decompressed as a stream, a megabyte at a time, into lines, and reading
stops with a ``CassetteError`` naming the file (and line) at ``MAX_DECOMPRESSED_BYTES`` in all
or ``MAX_LINE_BYTES`` in one line — before the bytes are decoded or parsed, so a bomb costs
about the cap in memory and a second or two, not gigabytes and minutes. A plain file is held
to the same cap by its size before a byte of it is read (a sparse 3 GB ``.jsonl`` is 4 KB on
disk and was a ``MemoryError``).
"""

from __future__ import annotations

import io
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import IO, BinaryIO

from hermes_replay._errors import CassetteError

__all__ = [
    "CASSETTE_SUFFIXES",
    "MAX_DECOMPRESSED_BYTES",
    "MAX_LINE_BYTES",
    "ZSTD_MAGIC",
    "cassette_files",
    "is_cassette_name",
    "is_compressed",
    "open_for_write",
    "read_bytes",
    "read_head",
    "read_lines",
    "wants_compression",
    "within",
]

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
ZST = ".zst"
CASSETTE_SUFFIXES = (".jsonl", ".jsonl" + ZST)
PARTIAL = ".partial"
# 1 GiB: a 10,000-interaction cassette is ~40 MB of JSON Lines; anything past this is hostile
MAX_DECOMPRESSED_BYTES = 1 << 30
# one record: a 50 MB reply is what the huge-reply probe records; JSON escaping can double it
MAX_LINE_BYTES = 256 << 20
# past 64 MiB, a file that expands more than 1000-fold is a bomb (zstd on a cassette's JSON
# gives 5-30x; a run of one repeated byte gives tens of thousands): stop before the big cap
BOMB_AFTER_BYTES = 64 << 20
BOMB_RATIO = 1000
_CHUNK = 1 << 20
# zstd level for written cassettes: 10 gives most of level 19's size at a fraction of the time
# (benchmarks/storage_bench.py measures both); writing happens once per recording
LEVEL = 10


def _zstd() -> ModuleType:
    try:
        from compression import zstd  # type: ignore[import-not-found]  # Python >= 3.14
    except ImportError:
        try:
            from backports import zstd  # type: ignore[no-redef]
        except ImportError as exc:  # pragma: no cover - a dependency below 3.14
            raise CassetteError(
                "zstd is not available to read or write a .zst cassette",
                hint="pip install backports-zstd (hermes-replay depends on it below "
                     "Python 3.14), or use a plain .jsonl cassette") from exc
    return zstd


def is_cassette_name(name: str, *, partial: bool = False) -> bool:
    """``x.jsonl`` / ``x.jsonl.zst`` (and their ``.partial`` journals if ``partial``)."""
    if partial and name.endswith(PARTIAL):
        name = name[: -len(PARTIAL)]
    return name.endswith(CASSETTE_SUFFIXES)


def wants_compression(path: str | Path) -> bool:
    """A new file at ``path`` is written compressed (its name ends in ``.zst``)."""
    return Path(path).name.endswith(ZST)


def open_regular(path: str | Path) -> BinaryIO:
    """``open(path, "rb")`` for a regular file only. A FIFO, socket or device where a
    cassette should be is refused without blocking (a FIFO's open and read wait for a writer
    forever): a cassette is data from outside, and ``show`` on it must end."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # O_NONBLOCK: a FIFO's open returns
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = "a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) \
                else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a file"
            raise CassetteError(f"{kind}, not a regular file", path=Path(path),
                                hint="a cassette is a .jsonl / .jsonl.zst file; pass that")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def is_compressed(path: str | Path) -> bool:
    try:
        with open_regular(path) as fh:
            return fh.read(4) == ZSTD_MAGIC
    except (OSError, CassetteError):
        return False


def cassette_files(folder: Path, *, partial: bool = False) -> list[Path]:
    """Every cassette file under ``folder`` (recursively), in name order; ``partial`` adds the
    ``.partial`` journals. Only regular files (or links to them)."""
    patterns = ["*.jsonl", "*.jsonl.zst"]
    if partial:
        patterns += ["*.jsonl.partial", "*.jsonl.zst.partial"]
    found = {p for pattern in patterns for p in folder.rglob(pattern)}
    # regular files only: a folder or a FIFO named like a cassette is not one, and opening a
    # FIFO would wait for a writer (``is_file`` only stats: it never blocks)
    return sorted(p for p in found if p.is_file())


def name_too_long(text: str) -> str | None:
    """Why no file can have the path ``text`` (a header's ``env_file`` is data from outside:
    asking the OS about a 6,000-character name raises ``OSError: File name too long``), or
    None. Limits are Linux's, the tightest of the usual ones."""
    if len(text.encode("utf-8", "replace")) > 4095:
        return f"is {len(text):,} characters long (a path holds at most 4,095 bytes)"
    longest = max((part for part in text.replace("\\", "/").split("/")), key=len, default="")
    if len(longest.encode("utf-8", "replace")) > 255:
        return (f"has a {len(longest):,}-character name in it (a file name holds at most 255 "
                "bytes)")
    return None


def not_a_folder(path: Path) -> str | None:
    """Why ``path`` cannot be used as an output folder — it, or a folder above it, is a file
    (``mkdir`` would raise ``FileExistsError`` / ``NotADirectoryError`` at the end of a run) —
    or None when it is a folder or can be made one."""
    probe = path
    while True:
        try:
            mode = os.stat(probe).st_mode  # a link to a folder is a folder here
        except (FileNotFoundError, NotADirectoryError):  # not there (yet), or below a file
            if probe.parent == probe:
                return None
            probe = probe.parent
            continue
        except OSError as exc:
            return f"{probe} cannot be looked at ({exc.strerror or exc})"
        if stat.S_ISDIR(mode):
            return None
        kind = "a file" if stat.S_ISREG(mode) else "not a folder"
        return f"{probe} is {kind}" + ("" if probe == path else f", so {path} cannot be made")


def within(path: Path, folder: Path) -> bool:
    """Whether ``path`` really lies in ``folder``: a symlink planted there (a shard linked to
    a file elsewhere, ``/etc/...`` or another user's cassette) is not part of the folder, so
    listing, showing or merging the folder never reads through it."""
    try:
        return path.resolve().is_relative_to(folder.resolve())
    except OSError:
        return False


def read_bytes(path: Path) -> bytes:
    """The file's JSON Lines bytes, decompressed if it is a zstd frame.

    Raises ``OSError`` as ``Path.read_bytes`` does, and ``CassetteError`` for a damaged or
    oversized compressed file.
    """
    return b"\n".join(read_lines(path))


def read_lines(path: Path) -> list[bytes]:
    """The file's lines as ``bytes.split(b"\n")`` gives them (a last ``b""`` when it ends with a
    newline), decompressed as a stream if it is zstd; ``CassetteError`` past the size caps."""
    with open_regular(path) as fh:
        start = fh.read(4)
        if start != ZSTD_MAGIC:
            # the compressed cap holds for plain bytes too: a 3 GB (sparse) .jsonl is refused
            # before it is read, and a file growing while read is cut at the cap plus one
            size = os.fstat(fh.fileno()).st_size
            if size > MAX_DECOMPRESSED_BYTES:
                raise _too_big(path, size)
            data = start + fh.read(MAX_DECOMPRESSED_BYTES + 1 - len(start))
            if len(data) > MAX_DECOMPRESSED_BYTES:
                raise _too_big(path, len(data))
            lines = data.split(b"\n")
            longest = max(map(len, lines))
            if longest > MAX_LINE_BYTES:
                number = next(i for i, line in enumerate(lines, 1) if len(line) == longest)
                raise _too_long(path, number)
            return lines
        fh.seek(0)
        return _decompressed_lines(path, fh)


def _too_big(path: Path, size: int) -> CassetteError:
    return CassetteError(
        f"is {size:,} bytes long (the limit: {MAX_DECOMPRESSED_BYTES >> 20} MiB, as for a "
        "compressed cassette once decompressed)", path=path,
        hint="no cassette hermes-replay writes is that large (a 10,000-interaction one is "
             "about 40 MB); this is no cassette it wrote: do not use it")


def _too_long(path: Path, number: int) -> CassetteError:
    return CassetteError(
        f"line {number} is longer than {MAX_LINE_BYTES >> 20} MiB", path=path, line=number,
        hint="no record hermes-replay writes is that long; this is no cassette it wrote: do "
             "not use it")


def _decompressed_lines(path: Path, fh: IO[bytes]) -> list[bytes]:
    zstd = _zstd()
    lines: list[bytes] = []
    partial: list[bytes] = []  # pieces of the line not ended yet
    partial_len = total = 0
    decompressor = zstd.ZstdDecompressor()
    data = b""
    try:
        while True:
            if decompressor.eof:  # a frame ended: another may follow (concatenated frames)
                data = decompressor.unused_data or fh.read(_CHUNK)
                if not data:
                    break
                decompressor = zstd.ZstdDecompressor()
            elif decompressor.needs_input and not data:
                data = fh.read(_CHUNK)
                if not data:
                    raise zstd.ZstdError("the compressed data ends in the middle of a frame")
            chunk = decompressor.decompress(data, max_length=_CHUNK)
            data = b""
            total += len(chunk)
            if total > MAX_DECOMPRESSED_BYTES or (
                    total > BOMB_AFTER_BYTES and total > BOMB_RATIO * fh.tell()):
                raise CassetteError(
                    f"decompresses to more than {total >> 20} MiB from {fh.tell()} bytes "
                    f"(the limits: {MAX_DECOMPRESSED_BYTES >> 20} MiB, or {BOMB_RATIO}-fold "
                    f"past {BOMB_AFTER_BYTES >> 20} MiB)", path=path, line=len(lines) + 1,
                    hint="this is no cassette hermes-replay wrote (a decompression bomb?); do "
                         "not use it")
            pieces = chunk.split(b"\n")
            if len(pieces) > 1:
                partial.append(pieces[0])
                lines.append(b"".join(partial))
                if len(lines[-1]) > MAX_LINE_BYTES:
                    raise _too_long(path, len(lines))
                lines.extend(pieces[1:-1])  # each shorter than one chunk
                partial, partial_len = [], 0
            partial.append(pieces[-1])
            partial_len += len(pieces[-1])
            if partial_len > MAX_LINE_BYTES:
                raise _too_long(path, len(lines) + 1)
    except zstd.ZstdError as exc:
        raise CassetteError(f"damaged zstd data ({exc})", path=path,
                            hint="the file is cut off or corrupt; restore it from git, or "
                                 "re-record it") from exc
    lines.append(b"".join(partial))
    return lines


def read_head(path: Path, limit: int = 1 << 20) -> bytes:
    """At most ``limit`` bytes of the start of the (decompressed) file — enough for the header
    line; never decompresses the whole of a large cassette."""
    with open_regular(path) as fh:
        start = fh.read(4)
        fh.seek(0)
        if start != ZSTD_MAGIC:
            return fh.read(limit)
        zstd = _zstd()
        try:
            with zstd.ZstdFile(fh, "rb") as zf:
                return zf.read(limit)
        except zstd.ZstdError:
            return b""


def first_line(path: Path, limit: int = 1 << 20) -> bytes:
    """The header line of a cassette (plain or compressed), without its newline."""
    return read_head(path, limit).split(b"\n", 1)[0]


@contextmanager
def open_for_write(path: Path, *, compress: bool) -> Iterator[IO[str]]:
    """A text stream writing ``path`` (compressed if ``compress``), fsynced before it is
    closed, so the caller's ``os.replace`` never publishes a half-written file."""
    with open(path, "wb") as raw:
        inner: IO[bytes] = _zstd().ZstdFile(raw, "w", level=LEVEL) if compress else raw
        text = io.TextIOWrapper(inner, encoding="utf-8", newline="\n")
        yield text
        text.flush()
        text.detach()
        if compress:
            inner.close()  # ends the zstd frame; a ZstdFile leaves a file it was given open
        raw.flush()
        os.fsync(raw.fileno())


def write_text_atomic(path: Path, text: str, *, suffix: str = ".tmp") -> None:
    """Write ``text`` to ``path`` through a temp file beside it and ``os.replace``: a reader
    (or a crash) sees the old file or the new one, never half of it."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}{suffix}")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def relative_to_cwd(path: Path) -> str:
    """``path`` relative to the working directory, POSIX style (stable across machines)."""
    try:
        return Path(os.path.relpath(path.resolve(), Path.cwd())).as_posix()
    except ValueError:  # another drive on Windows
        return path.resolve().as_posix()

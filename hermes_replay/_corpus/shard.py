"""``replay DIR --shard I/N``: which cassettes of a corpus one of N jobs replays.

The split depends only on each cassette's path relative to DIR (a hash of it, modulo N), so N
jobs started anywhere — a Slurm array, a CI matrix, N laptops — cover every cassette exactly
once with no coordinator, and a cassette keeps its shard when others are added or removed
(round-robin over a sorted list would move every cassette after an insertion). Balance is
statistical: with many cassettes per shard each gets close to 1/N of them.

``I`` counts from 1 (``1/4`` … ``4/4``). Inside a Slurm array job, ``I/N`` defaults from
``SLURM_ARRAY_TASK_ID``, ``SLURM_ARRAY_TASK_MIN``, ``SLURM_ARRAY_TASK_STEP`` and
``SLURM_ARRAY_TASK_COUNT``, so ``--array=0-7`` and ``--array=1-8`` both give shards 1/8 … 8/8.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

__all__ = ["Shard", "ShardError", "parse_shard", "shard_from_slurm", "shard_of", "take_shard"]


class ShardError(ValueError):
    """A ``--shard`` value or Slurm array variables that name no valid shard."""


@dataclass(frozen=True)
class Shard:
    index: int  # 1 … count
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    @property
    def folder_name(self) -> str:
        """The out folder of this shard below a run's folder (``shard-2-of-8``)."""
        return f"shard-{self.index}-of-{self.count}"


def _number(text: str) -> int:
    """A plain ASCII count: ``int`` also takes ``"３"``, ``" 3"``, ``"+3"`` and ``"1_0"``, which
    no shard or Slurm variable is meant to be."""
    if not re.fullmatch(r"[0-9]{1,9}", text):
        raise ValueError(text)
    return int(text)


def parse_shard(text: str) -> Shard:
    """``"I/N"`` with 1 ≤ I ≤ N, in ASCII digits."""
    index, sep, count = text.partition("/")
    try:
        shard = Shard(_number(index), _number(count))
    except ValueError:
        raise ShardError(f"--shard {text}: give I/N, e.g. --shard 2/8 (the 2nd of 8 "
                         "shards; I counts from 1)") from None
    if not sep or shard.count < 1 or not 1 <= shard.index <= shard.count:
        raise ShardError(f"--shard {text}: I must be between 1 and N, and N at least 1 "
                         "(e.g. --shard 1/4 … 4/4)")
    return shard


def shard_from_slurm(environ: Mapping[str, str]) -> Shard | None:
    """The shard a Slurm array task replays, or None outside an array job."""
    task = environ.get("SLURM_ARRAY_TASK_ID")
    count = environ.get("SLURM_ARRAY_TASK_COUNT")
    if task is None or count is None:
        return None
    try:
        task_id, total = _number(task), _number(count)
        first = _number(environ.get("SLURM_ARRAY_TASK_MIN", "0"))
        step = _number(environ.get("SLURM_ARRAY_TASK_STEP", "1") or "1")
    except ValueError:
        raise ShardError(
            f"SLURM_ARRAY_TASK_ID={task!r:.20}, SLURM_ARRAY_TASK_COUNT={count!r:.20}, "
            f"SLURM_ARRAY_TASK_MIN and SLURM_ARRAY_TASK_STEP: not all plain numbers; pass "
            "--shard I/N yourself") from None
    if step < 1:  # divided by below
        raise ShardError(f"SLURM_ARRAY_TASK_STEP={step}: an array's step is at least 1; "
                         "pass --shard I/N yourself (I from 1 to N)")
    offset, rest = divmod(task_id - first, step)
    if rest or total < 1 or not 0 <= offset < total:
        raise ShardError(
            f"Slurm array task {task_id} (min {first}, step {step}, count {total}) is not "
            "one of an evenly spaced array; pass --shard I/N yourself (I from 1 to N)")
    return Shard(offset + 1, total)


def shard_key(rel: Path | str) -> str:
    """The text a cassette's shard is computed from: its path relative to the corpus, with
    forward slashes (the same shard on Linux and Windows runners)."""
    return PurePosixPath(Path(rel).as_posix()).as_posix()


def shard_of(rel: Path | str, count: int) -> int:
    """The shard (1 … count) that replays the cassette at ``rel`` (relative to the corpus)."""
    digest = hashlib.sha256(shard_key(rel).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % count + 1


def take_shard(rels: Sequence[Path], shard: Shard) -> list[int]:
    """Positions in ``rels`` (in their order) of the cassettes that ``shard`` replays."""
    return [i for i, rel in enumerate(rels) if shard_of(rel, shard.count) == shard.index]

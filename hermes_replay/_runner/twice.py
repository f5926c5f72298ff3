"""``replay --twice``: is the replay of a cassette deterministic? Found, not guessed.

The cassette's command is replayed twice, each time in a fresh interpreter (so module state,
import-time randomness and caches are fresh, as in CI), each run writing a *trace*: every LLM
request it sent (in the matcher's canonical form, after ``ignore_paths``/``normalizers``), every
tool call (and, when executed, its result) and every rollout's reward. The two traces are then
compared, and the first difference — earliest turn first — is reported with what to do:

- a request field whose values differ only by a timestamp, uuid, number… → the ``normalizers``
  entry that makes them equal; any other request field → its ``ignore_paths`` entry;
- an executed tool result → a normalizer, or keep tools replayed (the default);
- a reward, or a set of rollouts, that differs while every request agrees → a note to seed
  (randomness in the environment that the cassette does not fix).
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hermes_replay._cassette.matching import _flatten
from hermes_replay._interpreter import python_command

__all__ = ["TRACE_FILE", "Difference", "TwiceReport", "compare_traces", "replay_twice"]

TRACE_FILE = "trace.jsonl"
FAILURE_FILE = "failure.txt"  # a run that failed (missed, crashed) says why here
RUN_TIMEOUT = 1800.0

# (what it is, regex, replacement) — tried in order on the differing values
VOLATILE: tuple[tuple[str, str, str], ...] = (
    ("a timestamp", r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d(?::\d\d(?:\.\d+)?)?(?:Z|[+-]\d\d:?\d\d)?",
     "<time>"),
    ("a time of day", r"\d\d:\d\d:\d\d(?:\.\d+)?", "<time>"),
    ("a uuid", r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}",
     "<uuid>"),
    ("a temporary path", r"/tmp/[\w.-]+", "<tmp>"),
    ("a long number (a clock, a counter)", r"\d{9,}", "<n>"),
    ("a hex id", r"\b[0-9a-f]{12,}\b", "<hex>"),
    ("a duration", r"\d+(?:\.\d+)?\s?(?:ms|s)\b", "<duration>"),
    ("a number", r"\d+(?:\.\d+)?", "<n>"),
)


@dataclass(frozen=True)
class Difference:
    """The first thing the two runs did differently."""

    what: str  # "request" | "tool call" | "tool result" | "reward" | "rollouts"
    rollout: str | None
    position: str  # "turn 2", "tool call 3", ""
    field: str  # "body.messages[0].content", "result.output", "reward"
    first: Any
    second: Any
    suggestion: str

    def lines(self) -> list[str]:
        where = f"rollout {self.rollout}" if self.rollout else "outside any rollout"
        head = f"the two replays differ first at {self.what} · {where}"
        if self.position:
            head += f" · {self.position}"
        return [head, f"  field  {self.field}",
                f"  run 1  {_short(self.first)}", f"  run 2  {_short(self.second)}",
                f"  next   {self.suggestion}"]


@dataclass
class TwiceReport:
    cassette: str
    difference: Difference | None = None
    compared: dict[str, int] = field(default_factory=dict)
    # "run N failed: why", one per run that failed: it missed, crashed, ran nothing or wrote
    # no trace. Two failed runs that agree prove nothing, so any of these is a failure.
    errors: list[str] = field(default_factory=list)

    @property
    def deterministic(self) -> bool:
        return self.difference is None and not self.errors

    def lines(self) -> list[str]:
        out = [f"hermes-replay replay --twice · {self.cassette}"]
        out += [f"  {e}" for e in self.errors]
        if self.difference is not None:
            out += ["  " + line for line in self.difference.lines()]
        elif not self.errors:
            counts = ", ".join(f"{n} {k}" for k, n in self.compared.items())
            out.append(f"  the two replays agree ({counts} compared)")
        else:
            out.append("  not judged deterministic: a replay that failed proves nothing by "
                       "agreeing; fix the failure above (replay the cassette once to see it "
                       "in full), then run --twice again")
        return out


def _short(value: Any, limit: int = 160) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False,
                                                           default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


# --------------------------------------------------------------------------- running


def replay_twice(cassette: str | Path, out_dir: str | Path,
                 **options: Any) -> TwiceReport:
    """Replay ``cassette`` twice in fresh interpreters and compare what they did.

    ``options`` go to ``run_cassette`` (``tools``, ``normalizers``, ``ignore_paths`` …).
    """
    cassette, out = Path(cassette), Path(out_dir)
    report = TwiceReport(str(cassette))
    traces = []
    for n in (1, 2):
        run_dir = (out / f"run-{n}").resolve()
        run_dir.mkdir(parents=True, exist_ok=True)
        spec = json.dumps({"cassette": str(cassette.resolve()), "out_dir": str(run_dir),
                           "options": options})
        done = subprocess.run(python_command("-m", "hermes_replay._runner.twice", spec),
                              capture_output=True, text=True, timeout=RUN_TIMEOUT)
        trace, failure = run_dir / TRACE_FILE, run_dir / FAILURE_FILE
        if not trace.is_file():
            tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
            report.errors.append(f"run {n} failed: exit {done.returncode}, no trace written: "
                                 + " | ".join(tail))
            continue
        if failure.is_file():
            report.errors.append(f"run {n} failed: "
                                 + failure.read_text(encoding="utf-8", errors="replace"))
        traces.append(read_trace(trace))
    if len(traces) == 2:
        report.difference, report.compared = compare_traces(*traces)
    return report


def _child(spec_text: str) -> int:
    """One replay in this (fresh) interpreter, writing its trace; see ``replay_twice``."""
    from hermes_replay._runner.run import run_cassette

    spec = json.loads(spec_text)
    options = dict(spec["options"])
    if options.get("normalizers"):
        options["normalizers"] = [tuple(n) for n in options["normalizers"]]
    out = Path(spec["out_dir"])
    (out / FAILURE_FILE).unlink(missing_ok=True)
    result = run_cassette(spec["cassette"], out_dir=out, trace=out / TRACE_FILE,
                          raise_errors=False, **options)
    if result.error is not None:
        (out / FAILURE_FILE).write_text(_failure_summary(result.error), encoding="utf-8")
        return 1
    return 0


def _failure_summary(error: BaseException, lines: int = 4) -> str:
    """The first lines of why a run failed (a miss report can be long: its diffs follow)."""
    text = str(error).strip().splitlines() or [type(error).__name__]
    more = f" … ({len(text) - lines} more lines)" if len(text) > lines else ""
    return " | ".join(line.strip() for line in text[:lines]) + more


def read_trace(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


# --------------------------------------------------------------------------- comparing


def _order(entry: dict[str, Any]) -> tuple[float, str, int]:
    kind, turn = entry["kind"], entry.get("turn", 0)
    rank = {"request": 0.0, "tool": 0.5, "outcome": math.inf}[kind]
    return (turn + rank if kind != "outcome" else rank, entry.get("rollout") or "", 0)


def _key(entry: dict[str, Any]) -> tuple[str, str | None, int]:
    return (entry["kind"], entry.get("rollout"), int(entry.get("seq", 0)))


def compare_traces(a: list[dict[str, Any]], b: list[dict[str, Any]]
                   ) -> tuple[Difference | None, dict[str, int]]:
    """The first difference (earliest turn first), and how much was compared."""
    by_a, by_b = {_key(e): e for e in a}, {_key(e): e for e in b}
    counts = {"requests": 0, "tool calls": 0, "rewards": 0}
    names = {"request": "requests", "tool": "tool calls", "outcome": "rewards"}
    rollouts_a = {e.get("rollout") for e in a if e["kind"] == "outcome"}
    rollouts_b = {e.get("rollout") for e in b if e["kind"] == "outcome"}
    for entry in sorted(list(by_a.values()) + [e for k, e in by_b.items() if k not in by_a],
                        key=_order):
        key = _key(entry)
        ea, eb = by_a.get(key), by_b.get(key)
        counts[names[entry["kind"]]] += 1
        found = _entry_difference(entry["kind"], entry.get("rollout"), ea, eb,
                                  rollouts_a != rollouts_b)
        if found is not None:
            return found, counts
    if rollouts_a != rollouts_b:
        return _rollout_difference(rollouts_a, rollouts_b), counts
    return None, counts


_SEED_NOTE = ("the environment uses randomness or state the cassette does not fix. Replay seeds "
              "Python's `random` and numpy's global generator with the cassette's seed; "
              "anything else (random.SystemRandom, os.urandom, uuid4, a generator of its own, "
              "the clock, iteration over a set) is not: seed it from `random` or derive it "
              "from the item")


def _rollout_difference(a: set, b: set) -> Difference:
    only_a, only_b = sorted(x for x in a - b if x), sorted(x for x in b - a if x)
    return Difference("rollouts", None, "", "rollout ids", only_a[:3], only_b[:3],
                      "the runs scored different rollouts (different items were drawn): "
                      + _SEED_NOTE)


def _entry_difference(kind: str, rollout: str | None, ea: dict | None, eb: dict | None,
                      rollouts_differ: bool) -> Difference | None:
    if ea is None or eb is None:
        if kind == "outcome" or rollouts_differ:
            return None  # reported as different rollouts at the end
        present = ea or eb
        which = "only run 1" if eb is None else "only run 2"
        return Difference("request" if kind == "request" else "tool call", rollout,
                          _position(present), f"({which} made it)", ea and _payload(ea),
                          eb and _payload(eb), "one run made a call the other did not: "
                          + _SEED_NOTE)
    if ea == eb:
        return None
    if kind == "outcome":
        if ea.get("reward") == eb.get("reward"):
            return None
        return Difference("reward", rollout, "", "reward", ea.get("reward"), eb.get("reward"),
                          "every request and tool call agreed but the reward did not: "
                          + _SEED_NOTE)
    if kind == "tool" and ea.get("request") == eb.get("request"):
        if ea.get("answer") == eb.get("answer"):
            return None
        path, x, y = _first_field(ea.get("answer"), eb.get("answer"))
        hint = _normalizer_hint(x, y) or ("the tool's output is not deterministic; replay "
                                          "tools from the cassette (the default, --tools "
                                          "replay) or make the command's output stable")
        return Difference("tool result", rollout, _position(ea), path, x, y, hint)
    path, x, y = _first_field(ea.get("request"), eb.get("request"))
    what = "request" if kind == "request" else "tool call"
    hint = _normalizer_hint(x, y)
    if hint is None:
        ignore = re.sub(r"\[\d+\]", "[*]", path) if kind == "request" else path
        hint = (f"if this field may vary, leave it out of matching: "
                f"ignore_paths=[{ignore!r}]; if it should not vary: " + _SEED_NOTE)
    return Difference(what, rollout, _position(ea), path, x, y, hint)


def _position(entry: dict[str, Any]) -> str:
    if entry["kind"] == "request":  # turns counted from 1, as miss reports count them
        return f"turn {int(entry.get('seq', 0)) + 1}"
    return f"tool call {entry.get('seq')} ({entry.get('name', '?')})"


def _payload(entry: dict[str, Any]) -> Any:
    return entry.get("request")


def _first_field(a: Any, b: Any) -> tuple[str, Any, Any]:
    """The first differing leaf of two JSON values: (path, value in a, value in b)."""
    la: list[str] = []
    lb: list[str] = []
    _flatten(a, "", la)
    _flatten(b, "", lb)
    for x, y in zip(la, lb, strict=False):
        if x != y:
            return _split(x), _value(x), _value(y)
    longer = la if len(la) > len(lb) else lb
    if len(la) == len(lb):
        return "", a, b
    extra = longer[min(len(la), len(lb))]
    return _split(extra), _value(extra) if longer is la else None, (
        _value(extra) if longer is lb else None)


def _split(line: str) -> str:
    return re.split(r": | \| ", line, maxsplit=1)[0]


def _value(line: str) -> Any:
    parts = re.split(r"(: | \| )", line, maxsplit=1)
    if len(parts) < 3:
        return line
    text = parts[2]
    if parts[1] == ": ":
        try:
            return json.loads(text)
        except ValueError:
            return text
    return text


def _builtin_for(x: str, y: str) -> str | None:
    """The built-in normalizer that makes ``x`` and ``y`` equal, if one does."""
    from hermes_replay._cassette.normalizers import BUILTINS

    for builtin in BUILTINS.values():
        a, b = x, y
        for pattern, repl in builtin.rewrites:
            a, b = re.sub(pattern, repl, a), re.sub(pattern, repl, b)
        if a == b:
            return builtin.name
    return None


def _normalizer_hint(x: Any, y: Any) -> str | None:
    if not isinstance(x, str) or not isinstance(y, str):
        x, y = json.dumps(x, default=str), json.dumps(y, default=str)
    builtin = _builtin_for(x, y)
    keep = (f"keep the built-in normalizer with the cassette (every replay then applies it): "
            f"hermes-replay normalize CASSETTE --add {builtin}; or " if builtin else "")
    for name, pattern, repl in VOLATILE:
        regex = re.compile(pattern)
        if regex.search(x) and regex.sub(repl, x) == regex.sub(repl, y):
            return (f"the values differ by {name}: {keep}normalize it, e.g. "
                    f"normalizers=[(r'{pattern}', {repl!r})] in cassette()/run_cassette()/the "
                    f"pytest marker, or on the command line --normalize '{pattern}={repl}'")
    if builtin:
        return f"the values differ by what the built-in normalizer {builtin} covers: " + keep[:-5]
    return None


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1]))

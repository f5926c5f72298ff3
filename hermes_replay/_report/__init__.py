"""``hermes-replay report``: one self-contained HTML page of rollouts, rewards and changes.

::

    write_report(path, out, against=None) -> Path   # what the CLI calls
    build_report(path, against=None) -> str         # the page as text
    report_line(folder, against=None) -> str        # replay/probe: write folder/report.html,
                                                    # return the line to print (never raises)

``path`` / ``against``: a cassette, a folder of cassettes, a replay output folder, a
``result.json``, or a ``RunResult`` in memory. With ``against``, each run is compared with
the run of the same environment and mode there (``against`` is the "before"); a replay result
alone is compared with the recording it replayed.

Errors: ``CassetteError`` for input that cannot be read, ``ReportExtraMissing`` when the
``report`` extra (plotly) is not installed, ``ReportRefused`` when a secret survives redaction.
Modules: ``_sources`` (inputs, pairing) → ``_model`` (the page's JSON, with ``_transcript`` and
``_tokens``) → ``_scrub`` → ``_page`` (HTML; charts from ``_charts``).

Room ``_report``: may import the foundation, ``_secrets``, ``_tokenizers``, ``_cassette``,
``_session.session``, ``_runner`` and ``_diff.compare``; never the CLI.
"""

from __future__ import annotations

import os
from pathlib import Path

from hermes_replay._cassette.files import write_text_atomic
from hermes_replay._errors import HermesReplayError
from hermes_replay._report._extra import EXTRA_HINT, ReportExtraMissing, extra_missing
from hermes_replay._report._scrub import ReportRefused
from hermes_replay._report._sources import Run, load_runs, pair_runs, run_from_result
from hermes_replay._runner.result import RunResult

__all__ = [
    "REPORT_FILE",
    "ReportExtraMissing",
    "ReportRefused",
    "build_report",
    "report_line",
    "report_unavailable",
    "write_report",
]

REPORT_FILE = "report.html"
Source = str | os.PathLike[str] | RunResult | list[str | os.PathLike[str]]


def _runs(source: Source) -> tuple[list[Run], str]:
    if isinstance(source, list):  # several out folders as one run (`hermes-replay results`)
        # a shard whose cassettes all failed before replaying wrote no result.json: it has
        # nothing for the page (its rows are in the joined table), and is no error here
        parts = [p for p in source if not Path(p).is_dir() or any(Path(p).rglob("result.json"))]
        runs = [run for part in parts or source for run in load_runs(part)]
        return runs, ", ".join(str(part) for part in source)
    if isinstance(source, RunResult):
        label = str(source.out_dir or source.cassette or "run result")
        return [run_from_result(source, label, Path(source.out_dir) if source.out_dir
                                else None)], label
    return load_runs(source), str(source)


def report_unavailable() -> ReportExtraMissing | None:
    """Why no report can be written here (the ``report`` extra is missing), or None."""
    return extra_missing()


def build_report(source: Source, *, against: Source | None = None) -> str:
    """The HTML page for ``source`` (compared with ``against``)."""
    from hermes_replay._report import _charts  # raises ReportExtraMissing without plotly
    from hermes_replay._report._model import build_state
    from hermes_replay._report._page import render_page
    from hermes_replay._report._scrub import scrub

    runs, subject = _runs(source)
    baselines, label = _runs(against) if against is not None else (None, None)
    sections = pair_runs(runs, baselines)
    state = build_state(sections, subject=subject, against=label, charts=_charts)
    sources = [subject] + ([label] if label else [])
    return render_page(scrub(state, sources), _charts.plotly_js())


def write_report(source: Source, out: str | os.PathLike[str], *,
                 against: Source | None = None) -> Path:
    """Write the page to ``out`` (a folder gets ``out/report.html``); returns the path.

    Never replaces a file that is not a hermes-replay report; written atomically, so a
    failure leaves no half page and a refused report writes nothing."""
    from hermes_replay._report._page import GENERATOR

    target = Path(out)
    if target.is_dir():
        target = target / REPORT_FILE
    if target.exists():
        try:
            head = target.open("rb").read(2048)
        except OSError as exc:
            raise HermesReplayError(f"{target}: cannot read the existing file ({exc}); "
                                    "next step: pass another -o path") from exc
        if GENERATOR.encode() not in head:
            raise HermesReplayError(
                f"{target}: exists and is not a hermes-replay report; not overwriting it. "
                "Next step: pass another -o path, or remove that file first")
    page = build_report(source, against=against)
    target.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(target, page)
    return target


def report_line(folder: str | os.PathLike[str], *, against: Source | None = None) -> str:
    """For commands that just wrote a run's outputs into ``folder`` (``replay``, ``probe``):
    write ``folder/report.html`` and return the line to print — its path, or why there is none
    (the extra is missing, a secret was refused). Never raises: the run's own result stands."""
    if extra_missing() is not None:
        return f"report: not written (the HTML report is an extra: {EXTRA_HINT})"
    if Path(folder).is_dir() and not any(
            p.name == "result.json" or ".jsonl" in p.name for p in Path(folder).rglob("*")):
        # a replay whose every cassette stopped before it ran (refused, unreadable): its row
        # says why; a "no cassette, result.json … found here" with a next step to record was
        # noise. (A folder of cassettes — probe's — is reported as before.)
        return "report: not written (no cassette ran)"
    try:
        return f"report: {write_report(folder, folder, against=against)}"
    except HermesReplayError as exc:
        return f"report: not written — {exc}"

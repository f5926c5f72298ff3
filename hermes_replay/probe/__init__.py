"""``hermes-replay probe``: find reward hacks before the trainer does.

A battery of scripted adversarial policies — probes — runs through an environment's real
``process`` path offline (agent loop, tools in the rollout's sandbox, the real
``compute_reward``), each on a few items, and a table says what each earned::

    from hermes_replay.probe import run_probes

    report = run_probes("environments/my_env.py", items=3)
    print("\\n".join(report.lines()))
    report.assert_clean()          # AssertionError with the table on any finding

Every probe run is recorded as ``cassettes/<env>/probe-<name>.jsonl`` and replayed once at
once (same replies: a different reward is nondeterminism); committed, those cassettes replay
in ``pytest`` like any other, so a reward change on a probe shows as a snapshot diff.

A probe is a list of scripted-endpoint rules (``hermes_replay.scripted_endpoint``) registered
with :func:`register_probe`; environment-specific probes live in ``<env file stem>_probes.py``
beside the env file (loaded automatically) or in any file given with ``--probes FILE``::

    from hermes_replay.probe import register_probe
    from hermes_replay.scripted_endpoint import Reply, Rule

    @register_probe("keyword-stuffing", env="research_judge_env",
                    description="a bag of the topic's keywords, no sentence")
    def keyword_stuffing(ctx):
        return [Rule("stuff", lambda c: True,
                     lambda c, rng: Reply(content="scattering rayleigh wavelength ..."))]

The known-good probe answers each item with the reply the environment offers through its
``known_good_reply(item)`` hook (``HermesAgentBaseEnv``); see ``hermes_replay.offer_known_good``.
For an env file you may not edit, ``known_good=`` gives the reference instead: a template over
the item's fields (``"ANSWER: {answer}"``) or a function of the item. ``env_args`` are the
env's own flags for every run (``["--env.terminal_backend", "local"]``).

Room ``probe`` (public): may import every room up to ``_check`` and ``scripted_endpoint``;
never the CLI (its command, ``_cli/probe.py``, calls in here).
"""

from __future__ import annotations

import runpy
import tempfile
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from hermes_replay._session.known_good import Reference
from hermes_replay.probe._catalog import get_probe, list_probes
from hermes_replay.probe._registry import Probe, ProbeContext, register_probe
from hermes_replay.probe._runner import ProbeRun, ProbeRunaway, probe_env_args, run_probe
from hermes_replay.probe._verdict import ProbeFinding, ProbeReport, ProbeRow, judge_runs

__all__ = [
    "Probe",
    "ProbeContext",
    "ProbeFinding",
    "ProbeReport",
    "ProbeRow",
    "ProbeRun",
    "ProbeRunaway",
    "get_probe",
    "list_probes",
    "load_probe_files",
    "probe_env_args",
    "register_probe",
    "run_probes",
]

DEFAULT_ITEMS = 3


def load_probe_files(env_file: Path, extra: Iterable[str | Path] = ()) -> list[Path]:
    """Run ``<env stem>_probes.py`` beside ``env_file`` (if present) and every file in ``extra``,
    so their ``@register_probe`` calls take effect. Returns the files loaded."""
    files = [Path(p) for p in extra]
    beside = env_file.with_name(f"{env_file.stem}_probes.py")
    if beside.is_file() and beside not in files:
        files.insert(0, beside)
    for path in files:
        if not path.is_file():
            raise FileNotFoundError(f"probe file {path} does not exist")
        runpy.run_path(str(path), run_name=f"hermes_replay_probes_{path.stem}")
    return files


def run_probes(
    env_file: str | Path,
    *,
    items: int = DEFAULT_ITEMS,
    probes: Sequence[str] | None = None,
    cassette_dir: str | Path | None = None,
    work_dir: str | Path | None = None,
    threshold: float | None = None,
    reward_range: tuple[float, float] | None = None,
    judge: str = "examples",
    seed: int = 0,
    probe_files: Iterable[str | Path] = (),
    on_probe: Callable[[ProbeRun], None] | None = None,
    env_args: Sequence[str] = (),
    known_good: Reference | None = None,
    server_type: str = "openai",
) -> ProbeReport:
    """Run the battery (or the named ``probes``) against ``env_file``; see the module docstring.

    ``cassette_dir`` defaults to ``cassettes/<env file stem>``; ``work_dir`` (outputs and one
    ``env.log`` per probe) to a fresh temporary folder. ``judge`` names the scripted-endpoint
    script that answers judge-style requests. ``env_args``: the env's own flags, given to
    every run (a probe's own flags are refused: ``ValueError``). ``known_good``: where the
    known-good probe's replies come from instead of the env's hook. ``server_type``: how the
    env's atroposlib servers speak to the stand-in (``vllm``/``sglang``: ``/generate``).
    """
    env = Path(env_file)
    if not env.is_file():
        raise FileNotFoundError(f"environment file {env} does not exist")
    if items < 1:
        raise ValueError(f"items must be at least 1, not {items}")
    env_args = probe_env_args(env_args)  # a bad flag fails here, before any probe ran
    load_probe_files(env, probe_files)
    chosen = [get_probe(n) for n in probes] if probes else list_probes(env.stem)
    chosen.sort(key=lambda p: p.kind != "known-good")  # its mean sets the threshold
    cassettes = Path(cassette_dir) if cassette_dir is not None else Path("cassettes") / env.stem
    work = Path(work_dir) if work_dir is not None else Path(tempfile.mkdtemp(prefix="probe-"))
    runs = []
    for probe in chosen:
        run = run_probe(env, probe, items=items, cassette=cassettes / f"probe-{probe.name}.jsonl",
                        work_dir=work, judge=judge, seed=seed, env_args=env_args,
                        known_good=known_good, server_type=server_type)
        runs.append(run)
        if on_probe is not None:
            on_probe(run)
    report = judge_runs(str(env), items, runs, threshold=threshold, declared=reward_range)
    report.sandbox = recording_sandbox()
    return report


def recording_sandbox() -> str:
    """The ``HERMES_SANDBOX`` policy a probe's recording runs get (see ``_session.isolation``)."""
    import os

    from hermes_replay._session.isolation import ISOLATION_VAR, policy_for

    return policy_for("record", False, os.environ.get(ISOLATION_VAR))

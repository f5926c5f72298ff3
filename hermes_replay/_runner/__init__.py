"""Room ``_runner``: running an environment file under a cassette and judging the run.

- ``run`` — the one runner (CLI, pytest plugin, ``run_cassette``); ``envrun`` runs an env's
  CLI in-process; ``plan`` finds cassettes and env files and rewrites the recorded argv;
  ``env_guard`` decides which files may run at all (read, never executed)
- bounds: ``offline`` (``netblock``: loopback only; ``stall``: no endless loops),
  ``signals`` (SIGTERM like Ctrl-C), ``seed`` (the run's seed)
- ``warm`` — a process with the environment stack imported, each run a fresh fork of it
  (``hermes-replay watch``)
- results: ``result`` (``RunResult``), ``result_io`` (``result.json``), ``verdict`` (did the
  replay really run?), ``twice`` (is it deterministic?), ``wandb`` (captured metrics),
  ``scrub_outputs`` (what a live run writes outside the cassette), ``json_ints``

May import: the foundation, ``_secrets``, ``_tokenizers``, ``_cassette``, ``_session.session``.
"""

"""Room ``_runner``: running an environment file under a cassette and judging the run.

- ``run`` — runs an env file under a cassette (``run_cassette``, ``run_env``), with its
  options as one value (``options.RunOptions``); ``envrun`` runs an env's CLI in-process;
  ``env_target`` resolves the env a user names (a file, or a module as ``python -m`` takes
  it); ``plan`` finds cassettes and env files and rewrites the recorded argv; ``env_guard``
  decides which files may run at all (read, never executed); ``trust`` is which folders'
  env files a cassette may name, ``vouch`` which file found there is the project's own (a
  recording's seal, git, the user's ``trust``); ``log_folder`` is where a live run's own
  output goes
- bounds: ``offline`` (``netblock``: loopback only; ``stall``: no endless loops),
  ``signals`` (SIGTERM like Ctrl-C), ``seed`` (the run's seed)
- ``warm`` — a process with the environment stack imported, each run a fresh fork of it
  (``hermes-replay watch``)
- results: ``result`` (``RunResult``), ``result_io`` (``result.json``), ``verdict`` (did the
  replay really run?), ``twice`` (is it deterministic?), ``wandb`` (captured metrics),
  ``scrub_outputs`` (what a live run writes outside the cassette), ``json_ints``

May import: the foundation, ``_secrets``, ``_tokenizers``, ``_cassette``, ``_session.session``.
"""

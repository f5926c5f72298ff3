"""One module per ``hermes-replay`` sub-command.

Each module defines ``register(subparsers) -> None``, which adds its parser and sets
``func=run`` where ``run(args) -> int`` is the exit code. Modules are imported only
when the CLI starts, never by ``import hermes_replay``.

Room ``_cli`` (see ARCHITECTURE.md): parsing and presentation only; the work is in the
rooms below, so the pytest plugin and the API share it. May import every room but the top.
"""

"""One module per ``hermes-replay`` sub-command.

Each module defines ``register(subparsers) -> None``, which adds its parser and sets
``func=run`` where ``run(args) -> int`` is the exit code. Modules are imported only
when the CLI starts, never by ``import hermes_replay``.
"""

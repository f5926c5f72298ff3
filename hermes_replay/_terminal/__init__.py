"""Room ``_terminal``: how text reaches a person's terminal (tables, progress, styles).

``render`` draws every CLI table and progress bar through rich on a terminal and as plain
text otherwise. It knows nothing of cassettes; the CLI, ``check`` and ``probe`` use it.

May import: the standard library and rich. Nothing from the package.
"""

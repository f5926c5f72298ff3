"""pytest plugin (registered through the ``pytest11`` entry point).

Kept thin: hooks delegate to the library, which is imported lazily so that test
sessions that never touch a cassette pay nothing.
"""

"""LongcatToolCallParser under its former module path (``longcat_parser``).

Environment files written for it import parsers by this module name; the implementation lives
in ``hermes.py``.
"""

from .hermes import LongcatToolCallParser

__all__ = ['LongcatToolCallParser']

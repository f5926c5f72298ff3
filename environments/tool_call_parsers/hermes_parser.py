"""HermesToolCallParser under its former module path (``hermes_parser``).

Environment files written for it import parsers by this module name; the implementation lives
in ``hermes.py``.
"""

from .hermes import HermesToolCallParser

__all__ = ['HermesToolCallParser']

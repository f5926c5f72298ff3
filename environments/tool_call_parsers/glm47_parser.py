"""Glm47ToolCallParser under its former module path (``glm47_parser``).

Environment files written for it import parsers by this module name; the implementation lives
in ``glm.py``.
"""

from .glm import Glm47ToolCallParser

__all__ = ['Glm47ToolCallParser']

"""Glm45ToolCallParser under its former module path (``glm45_parser``).

Environment files written for it import parsers by this module name; the implementation lives
in ``glm.py``.
"""

from .glm import Glm45ToolCallParser

__all__ = ['Glm45ToolCallParser']

"""KimiK2ToolCallParser under its former module path (``kimi_k2_parser``).

Environment files written for it import parsers by this module name; the implementation lives
in ``kimi_k2.py``.
"""

from .kimi_k2 import KimiK2ToolCallParser

__all__ = ['KimiK2ToolCallParser']

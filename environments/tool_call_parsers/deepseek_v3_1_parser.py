"""DeepSeekV31ToolCallParser under its former module path (``deepseek_v3_1_parser``).

Environment files written for it import parsers by this module name; the implementation lives
in ``deepseek.py``.
"""

from .deepseek import DeepSeekV31ToolCallParser

__all__ = ['DeepSeekV31ToolCallParser']

"""QwenToolCallParser under its former module path (``qwen_parser``).

Environment files written for it import parsers by this module name; the implementation lives
in ``hermes.py``.
"""

from .hermes import QwenToolCallParser

__all__ = ['QwenToolCallParser']

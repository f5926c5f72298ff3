"""Qwen3CoderToolCallParser under its former module path (``qwen3_coder_parser``).

Environment files written for it import parsers by this module name; the implementation lives
in ``qwen3_coder.py``.
"""

from .qwen3_coder import Qwen3CoderToolCallParser

__all__ = ['Qwen3CoderToolCallParser']

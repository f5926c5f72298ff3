"""LlamaToolCallParser under its former module path (``llama_parser``).

Environment files written for it import parsers by this module name; the implementation lives
in ``llama.py``.
"""

from .llama import LlamaToolCallParser

__all__ = ['LlamaToolCallParser']

"""MistralToolCallParser under its former module path (``mistral_parser``).

Environment files written for it import parsers by this module name; the implementation lives
in ``mistral.py``.
"""

from .mistral import MistralToolCallParser

__all__ = ['MistralToolCallParser']

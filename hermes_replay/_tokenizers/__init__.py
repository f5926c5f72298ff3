"""Room ``_tokenizers``: the project's own tokenizer and the hermetic tokenizer store.

``bundled`` builds and loads the small byte-level BPE the package ships (``corpus`` is its
deterministic training text); ``store`` keeps the tokenizer a cassette was recorded with and
hands it back on replay, so token-level data never depends on a hub download. ``decode`` and
``fold`` turn stored token ids back into text for reading (``show``, miss messages).

May import: the foundation (``_errors``, ``_active``) only; the public facade lazily.
"""

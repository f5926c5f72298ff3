"""Rebuild the shipped tokenizer into hermes_replay/assets/tokenizer/ (or the directory given).

Thin wrapper around :func:`hermes_replay._tokenizers.bundled.build_tokenizer`; the output is
deterministic, so a rebuild without changes to the corpus or template leaves git clean.
"""

from __future__ import annotations

from hermes_replay._tokenizers.bundled import main

if __name__ == "__main__":
    raise SystemExit(main())

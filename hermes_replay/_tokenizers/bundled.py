"""The project's own tiny tokenizer: a byte-level BPE with a Hermes/ChatML chat template.

Why it exists: atroposlib's ``BaseEnv`` loads ``AutoTokenizer.from_pretrained(tokenizer_name)``
and its trainer tokens/masks come from ``apply_chat_template``. No hub model can be downloaded
here, so the project trains a small tokenizer from deterministic text
(:mod:`hermes_replay._tokenizers.corpus`) and ships the built files in
``hermes_replay/assets/tokenizer/``. Cassettes name it by :data:`TOKENIZER_NAME` and
:func:`tokenizer_fingerprint`, so a replay can tell when tokens were produced by other files.

Rebuild with ``python scripts/build_tokenizer.py`` or ``python -m
hermes_replay._tokenizers.bundled``;
a test checks the rebuild is byte-identical to the committed files.

Token roles: ``<|im_start|>``, ``<|im_end|>`` (eos) and ``<|endoftext|>`` (pad) are *special*
(dropped by ``decode(skip_special_tokens=True)``). The markup tokens ``<tool_call>``,
``<tool_response>``, ``<think>``, ``<tools>`` and their closing forms are atomic added tokens
but not special, as in Qwen/Hermes tokenizers, so decoded text keeps the markup a tool-call
parser needs.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any

TOKENIZER_NAME = "hermes-replay/tiny-chatml-bpe"
VOCAB_SIZE = 6000

SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
MARKUP_TOKENS = (
    "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>",
    "<think>", "</think>", "<tools>", "</tools>",
)
EOS_TOKEN = "<|im_end|>"
PAD_TOKEN = "<|endoftext|>"
# Files whose bytes define the tokenizer; the fingerprint covers exactly these.
TOKENIZER_FILES = ("special_tokens_map.json", "tokenizer.json", "tokenizer_config.json")

# Hermes/ChatML template. Invariant the trainer masks rely on: rendering messages[:i] with
# add_generation_prompt=True is a text prefix of rendering messages[:i+1] when message i is an
# assistant turn (content, reasoning and tool calls are rendered verbatim, never rewritten by
# later turns). Tool-call arguments given as a JSON string are inserted verbatim (Jinja cannot
# parse JSON); a dict is rendered with tojson.
CHAT_TEMPLATE = r"""{%- macro render_content(content) -%}
{%- if content is string -%}{{- content -}}
{%- elif content is iterable and content is not mapping -%}
{%- for part in content -%}
{%- if part.type == 'text' -%}{{- part.text -}}{%- endif -%}
{%- endfor -%}
{%- endif -%}
{%- endmacro -%}
{%- if tools -%}
{{- '<|im_start|>system\n' -}}
{%- if messages and messages[0].role == 'system' -%}
{{- render_content(messages[0].content) + '\n\n' -}}
{%- endif -%}
{{- '# Tools\n\nYou may call one or more functions to assist with the user query.\n\n'
    ~ 'You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n[' -}}
{%- for tool in tools -%}{{- (',\n' if not loop.first else '') + (tool | tojson) -}}{%- endfor -%}
{{- ']\n</tools>\n\nFor each function call, return a json object with function name and '
    ~ 'arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n'
    ~ '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n' -}}
{%- endif -%}
{%- for message in messages -%}
{%- if message.role == 'system' -%}
{%- if not (tools and loop.first) -%}
{{- '<|im_start|>system\n' + render_content(message.content) + '<|im_end|>\n' -}}
{%- endif -%}
{%- elif message.role == 'assistant' -%}
{{- '<|im_start|>assistant\n' -}}
{%- if message.reasoning_content -%}
{{- '<think>\n' + message.reasoning_content + '\n</think>\n\n' -}}
{%- endif -%}
{{- render_content(message.content) -}}
{%- for tc in (message.tool_calls or []) -%}
{%- set fn = tc.function if tc.function is defined else tc -%}
{%- if not loop.first or message.content -%}{{- '\n' -}}{%- endif -%}
{{- '<tool_call>\n{"name": ' + (fn.name | tojson) + ', "arguments": ' -}}
{%- if fn.arguments is string -%}{{- fn.arguments if fn.arguments | trim else '{}' -}}
{%- elif fn.arguments is mapping -%}{{- fn.arguments | tojson -}}
{%- else -%}{{- '{}' -}}
{%- endif -%}
{{- '}\n</tool_call>' -}}
{%- endfor -%}
{{- '<|im_end|>\n' -}}
{%- elif message.role == 'tool' -%}
{{- '<|im_start|>tool\n<tool_response>\n' + render_content(message.content)
    + '\n</tool_response><|im_end|>\n' -}}
{%- else -%}
{{- '<|im_start|>' + message.role + '\n' + render_content(message.content) + '<|im_end|>\n' -}}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\n' -}}{%- endif -%}
"""


def tokenizer_path() -> str:
    """Absolute path of the shipped tokenizer directory (loadable offline by AutoTokenizer)."""
    return str(Path(__file__).resolve().parents[1] / "assets" / "tokenizer")


def tokenizer_fingerprint(path: str | os.PathLike[str] | None = None) -> str:
    """sha256 over the names and bytes of the tokenizer files, e.g. ``"sha256:3f2a..."``.

    Stable across machines and checkouts (content only, no mtimes or absolute paths), so a
    cassette can record it and a replay can detect that tokens came from different files.
    """
    root = Path(path) if path is not None else Path(tokenizer_path())
    digest = hashlib.sha256()
    for name in TOKENIZER_FILES:
        file = root / name
        if not file.is_file():
            raise FileNotFoundError(
                f"tokenizer file {file} is missing; rebuild it with"
                " `python scripts/build_tokenizer.py` or pass a complete tokenizer directory"
            )
        data = file.read_bytes()
        digest.update(f"{name}\0{len(data)}\0".encode())
        digest.update(data)
    return "sha256:" + digest.hexdigest()


@functools.lru_cache(maxsize=1)
def load_tokenizer() -> Any:
    """The shipped tokenizer as a ``PreTrainedTokenizerFast`` (loaded once, never from the hub)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tokenizer_path(), local_files_only=True)


def _train_backend() -> Any:
    """Train the byte-level BPE on the deterministic corpus (``tokenizers.Tokenizer``)."""
    from tokenizers import (
        AddedToken,
        Regex,
        Tokenizer,
        decoders,
        models,
        pre_tokenizers,
        processors,
    )
    from tokenizers.trainers import BpeTrainer

    from hermes_replay._tokenizers.corpus import corpus_lines

    tok = Tokenizer(models.BPE())
    # Every "\n" is its own pre-token. The template ends each role header with "\n", and the
    # GPT-2 regex alone would glue that newline to leading whitespace of the content ("\n\n",
    # "\n  "), so encoding the generation prompt and the reply separately (as a model sees them)
    # would differ from encoding the whole conversation and masks would be off by a token.
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex("\n"), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    tok.decoder = decoders.ByteLevel()
    # trim_offsets=False: offsets cover the exact characters a token came from, spaces included.
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = BpeTrainer(
        vocab_size=VOCAB_SIZE,
        min_frequency=2,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus_lines(), trainer=trainer)
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in MARKUP_TOKENS])
    return tok


def _config_files(tok: Any) -> dict[str, Any]:
    """tokenizer_config.json and special_tokens_map.json, written by us for stable bytes."""
    decoder = {
        str(tok.token_to_id(t)): {
            "content": t, "lstrip": False, "normalized": False, "rstrip": False,
            "single_word": False, "special": t in SPECIAL_TOKENS,
        }
        for t in (*SPECIAL_TOKENS, *MARKUP_TOKENS)
    }
    extra = [t for t in SPECIAL_TOKENS if t not in (EOS_TOKEN, PAD_TOKEN)]
    config = {
        "added_tokens_decoder": decoder,
        "additional_special_tokens": extra,
        "bos_token": None,
        "chat_template": CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False,
        "eos_token": EOS_TOKEN,
        "model_max_length": 32768,
        "name_or_path": TOKENIZER_NAME,
        "pad_token": PAD_TOKEN,
        "padding_side": "right",
        "tokenizer_class": "PreTrainedTokenizerFast",
        "unk_token": None,
    }
    special_map = {
        "additional_special_tokens": extra, "eos_token": EOS_TOKEN, "pad_token": PAD_TOKEN,
    }
    return {"tokenizer_config.json": config, "special_tokens_map.json": special_map}


def build_tokenizer(out_dir: Path) -> None:
    """Train and write the tokenizer files into ``out_dir`` (same inputs, same bytes)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tok = _train_backend()
    files = {"tokenizer.json": tok.to_str(pretty=True) + "\n"}
    for name, data in _config_files(tok).items():
        files[name] = json.dumps(data, indent=2, ensure_ascii=False, sort_keys=True) + "\n"
    for name, text in files.items():
        (out_dir / name).write_text(text, encoding="utf-8", newline="\n")


def main(argv: list[str] | None = None) -> int:
    """CLI: ``python -m hermes_replay._tokenizers.bundled [OUT_DIR]`` (default: the package
    assets)."""
    args = sys.argv[1:] if argv is None else argv
    out = Path(args[0]) if args else Path(tokenizer_path())
    build_tokenizer(out)
    print(f"wrote {TOKENIZER_NAME} to {out} ({tokenizer_fingerprint(out)})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

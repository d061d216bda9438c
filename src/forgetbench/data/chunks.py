"""Documents cut into token chunks, as the reference code of the document benchmarks trains on
them (MUSE's `DefaultDataset`, WMDP's RMU `get_data` + `tokenizer(..., truncation=True)`).

- `stream`: the documents joined as MUSE's `raw/*.txt` joins them (a blank line between two),
  tokenised as one text and cut into consecutive chunks of `length` tokens (the last one shorter):
  every token of the corpus is in exactly one chunk. MUSE's max_len is 2048.
- `truncate`: each document on its own, kept to its first `length` tokens (WMDP's RMU code
  truncates each corpus document at 512 tokens; the rest of a long document is never seen).

A chunk is returned as the slice of the text its tokens cover (by the tokenizer's character
offsets), so the unlearning engine re-tokenises the same characters."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from forgetbench.errors import ConfigError

ChunkMode = Literal["stream", "truncate"]
DOCUMENT_SEPARATOR = "\n\n"  # MUSE's raw/*.txt: the documents of raw/*.json joined by a blank line


def chunk_bounds(n_tokens: int, length: int) -> list[tuple[int, int]]:
    """[start, end) token indices of consecutive chunks of `length` tokens covering `n_tokens`."""
    if length < 1:
        raise ConfigError(f"chunk length must be at least 1 token, got {length}")
    return [(start, min(start + length, n_tokens)) for start in range(0, n_tokens, length)]


def _offsets(tokenizer: Any, text: str) -> list[tuple[int, int]]:
    encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    return [tuple(span) for span in encoded["offset_mapping"]]


def text_chunks(
    tokenizer: Any, documents: Sequence[str], *, length: int, mode: ChunkMode
) -> list[str]:
    """The documents as chunks of at most `length` tokens (see the module docstring)."""
    texts = [DOCUMENT_SEPARATOR.join(documents)] if mode == "stream" else list(documents)
    chunks = []
    for text in texts:
        offsets = _offsets(tokenizer, text)
        bounds = chunk_bounds(len(offsets), length)
        if mode == "truncate":
            bounds = bounds[:1]
        for start, end in bounds:
            chunk = text[offsets[start][0] : offsets[end - 1][1]].strip()
            if chunk:
                chunks.append(chunk)
    return chunks

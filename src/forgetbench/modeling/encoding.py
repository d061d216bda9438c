"""Prompt and answer as token ids: one tokenizer call over both, the prompt's tokens masked out
of every loss (`encode_prompt_answer`), document chunks as plain language modelling, and a padded
batch (`collate`)."""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from forgetbench.errors import DataError
from forgetbench.records import IGNORE_INDEX
from forgetbench.tokenized import remembered


@dataclass(frozen=True)
class Encoded:
    input_ids: list[int]
    labels: list[int]  # IGNORE_INDEX on prompt tokens; answer tokens and the final EOS are trained
    prompt_length: int


def adds_bos(tokenizer: object, text: str) -> bool:
    """Whether to let the tokenizer add its special tokens: not when the text already opens with
    BOS (a rendered chat template), so BOS is never doubled."""
    bos = getattr(tokenizer, "bos_token", None)
    return not (bos and text.startswith(bos))


def encode_text(tokenizer: object, text: str) -> list[int]:
    """A prompt's ids as the model sees them before its answer (generation, prompt caches)."""
    return tokenizer(text, add_special_tokens=adds_bos(tokenizer, text))["input_ids"]  # type: ignore[operator]


def _split_prompt_answer(tokenizer: object, prompt: str, text: str) -> tuple[list[int], int]:
    """`text` = prompt + answer tokenised once: its ids, and how many leading ones belong to the
    prompt, i.e. end at or before the prompt's last character (by character offsets). A token
    that starts in the prompt and ends in the answer makes the split ambiguous, and is an error.
    Remembered per process (forgetbench.tokenized): a study scores the same pairs on every model."""

    def split() -> tuple[array, int]:
        ids, count = _split_uncached(tokenizer, prompt, text)
        return array("l", ids), count

    ids, count = remembered(tokenizer, "prompt-answer", (prompt, text), split)
    return list(ids), count


def _split_uncached(tokenizer: object, prompt: str, text: str) -> tuple[list[int], int]:
    boundary = len(prompt)
    special = adds_bos(tokenizer, text)
    head = tokenizer(prompt, add_special_tokens=special)["input_ids"]  # type: ignore[operator]
    try:
        encoded = tokenizer(text, add_special_tokens=special, return_offsets_mapping=True)  # type: ignore[operator]
    except NotImplementedError:  # slow (Python) tokenizers have no offsets: compare prefixes
        ids = tokenizer(text, add_special_tokens=special)["input_ids"]  # type: ignore[operator]
        if ids[: len(head)] != head:
            raise _straddle_error(tokenizer, prompt, text) from None
        return ids, len(head)
    count = 0
    for start, end in encoded["offset_mapping"]:
        if end <= boundary or (start == end == 0 and count == 0):
            count += 1
        elif start < boundary:
            raise _straddle_error(tokenizer, prompt, text)
        else:
            break
    # Offsets alone can hide a straddle: byte-level tokenizers with trim_offsets report " Umar"
    # without its space. The prompt tokenised alone must be exactly the counted tokens.
    ids = encoded["input_ids"]
    if ids[:count] != head:
        raise _straddle_error(tokenizer, prompt, text)
    return ids, count


def _straddle_error(tokenizer: object, prompt: str, text: str) -> DataError:
    return DataError(
        f"a token spans the end of the prompt {prompt[-20:]!r} and the start of its answer "
        f"{text[len(prompt) : len(prompt) + 20]!r}, so the scored tokens are ambiguous",
        "use a template whose prompt ends where a token ends (put the separating space on the "
        "answer side, as model.template=question_answer does)",
    )


def encode_prompt_answer(
    tokenizer: object, prompt: str, answer: str, *, max_length: int, add_eos: bool = True
) -> Encoded:
    """Tokenise prompt + answer as ONE text, as TOFU's and open-unlearning's data code do (the
    published checkpoints were trained that way); the answer's tokens are those after the prompt's
    last character. The answer keeps an EOS so the model learns to stop, and it is scored, as
    TOFU's labels score it."""
    ids, n_prompt = _split_prompt_answer(tokenizer, prompt, prompt + answer)
    if add_eos:
        ids = [*ids, tokenizer.eos_token_id]  # type: ignore[attr-defined]
    ids = ids[:max_length]
    labels = ([IGNORE_INDEX] * n_prompt + ids[n_prompt:])[:max_length]
    return Encoded(ids, labels, n_prompt)


def encode_chunk(tokenizer: object, text: str, *, max_length: int) -> Encoded:
    """A document chunk as plain language modelling: every token a label (the BOS the tokenizer
    adds is a label too, and never predicted), no EOS since a chunk may end mid-document, as MUSE's
    and WMDP's training code label their chunks."""
    return encode_prompt_answer(tokenizer, "", text, max_length=max_length, add_eos=False)


def collate(
    examples: Sequence[Encoded], *, pad_id: int, padding_side: str = "right"
) -> dict[str, Tensor]:
    """Pad a batch with the real pad token (never by reusing EOS, whose labels must stay)."""
    width = max(len(e.input_ids) for e in examples)
    ids = torch.full((len(examples), width), pad_id, dtype=torch.long)
    labels = torch.full((len(examples), width), IGNORE_INDEX, dtype=torch.long)
    mask = torch.zeros((len(examples), width), dtype=torch.long)
    for row, e in enumerate(examples):
        n = len(e.input_ids)
        cols = slice(width - n, width) if padding_side == "left" else slice(0, n)
        ids[row, cols] = torch.tensor(e.input_ids)
        labels[row, cols] = torch.tensor(e.labels)
        mask[row, cols] = 1
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}

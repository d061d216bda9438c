"""The reference scorer the fast one is checked and timed against (`forgetbench bench eval`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from forgetbench.eval.outputs.scoring import prompt_too_long
from forgetbench.eval.outputs.statistics import AnswerScore, token_statistics
from forgetbench.modeling.encoding import encode_prompt_answer
from forgetbench.records import IGNORE_INDEX


@torch.no_grad()
def score_answers_naive(
    model: Any,
    tokenizer: Any,
    pairs: Sequence[tuple[str, str]],
    *,
    max_length: int = 512,
    add_eos: bool = True,
) -> list[AnswerScore]:
    """The reference path `forgetbench bench eval` times the fast ones against: one pair at a time,
    every prompt re-encoded, logits over every position, no cache, no de-duplication."""
    model.eval()
    out = []
    for prompt, answer in pairs:
        e = encode_prompt_answer(tokenizer, prompt, answer, max_length=max_length, add_eos=add_eos)
        if e.prompt_length >= max_length:
            raise prompt_too_long(prompt, e.prompt_length, max_length)
        ids = torch.tensor([e.input_ids], device=model.device)
        labels = torch.tensor([e.labels], device=model.device)[:, 1:]
        logits = model(input_ids=ids).logits[:, :-1]
        out += token_statistics(logits, labels, labels != IGNORE_INDEX, model=model)
    return out

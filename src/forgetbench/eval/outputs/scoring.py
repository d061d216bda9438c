"""Teacher-forced scoring of answers: independent (prompt, answer) texts, or several answers
continuing one prompt's KV cache."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from forgetbench.errors import DataError
from forgetbench.eval.outputs.prefix_cache import left_pad, shared_prefix_stage, shared_prefixes
from forgetbench.eval.outputs.statistics import (
    AnswerScore,
    accepts_logits_to_keep,
    require_pad,
    returned_cache,
    token_statistics,
    with_cache,
)
from forgetbench.modeling.encoding import collate, encode_prompt_answer
from forgetbench.modeling.limits import position_limit
from forgetbench.records import IGNORE_INDEX


def prompt_too_long(prompt: str, tokens: int, max_length: int) -> DataError:
    """A prompt that leaves no room for its answer is refused, not cut: cutting the prompt
    would score the answer to another question (a comprehension passage without its question),
    and a score of no answer tokens means nothing."""
    start = " ".join(prompt.split())[:50]
    return DataError(
        f"an evaluation prompt of {tokens} tokens ({start!r}...) leaves no room for its answer "
        f"within max_length={max_length} tokens (eval.max_length; unset = train.max_length)",
        "raise eval.max_length (at most the model's context), or turn off the task with such "
        "long prompts (e.g. eval.formats=false, eval.lume=false)",
    )


@torch.no_grad()
def score_answers(
    model: Any,
    tokenizer: Any,
    pairs: Sequence[tuple[str, str]],
    *,
    batch_size: int = 32,
    max_length: int = 512,
    add_eos: bool = True,
) -> list[AnswerScore]:
    """Score independent (prompt, answer) pairs: one teacher-forced pass per *unique* pair.

    Sorted by length so padding is small; the vocabulary projection runs only from the first
    answer position of the batch on (`logits_to_keep`), not over the prompts. The result is
    independent of batch size and order (tested). Pairs that share a prompt are scored faster
    by `score_candidates`, which encodes the prompt once.
    """
    require_pad(tokenizer)
    model.eval()
    unique = list(dict.fromkeys(pairs))
    encoded = [
        encode_prompt_answer(tokenizer, prompt, answer, max_length=max_length, add_eos=add_eos)
        for prompt, answer in unique
    ]
    for (prompt, _), e in zip(unique, encoded, strict=True):
        if e.prompt_length >= max_length:
            raise prompt_too_long(prompt, e.prompt_length, max_length)
    order = sorted(range(len(unique)), key=lambda i: len(encoded[i].input_ids))
    trim = accepts_logits_to_keep(type(model))
    scores: dict[tuple[str, str], AnswerScore] = {}
    for start in range(0, len(order), batch_size):
        chunk = order[start : start + batch_size]
        batch = collate([encoded[i] for i in chunk], pad_id=tokenizer.pad_token_id)
        batch = {k: v.to(model.device) for k, v in batch.items()}
        labels = batch["labels"][:, 1:]  # position t predicts token t + 1
        # The first position whose logits predict an answer token, over the whole batch.
        first = min(encoded[i].prompt_length for i in chunk) - 1
        kwargs: dict[str, Any] = {}
        if trim and first > 0:
            kwargs["logits_to_keep"] = torch.arange(
                first, batch["input_ids"].shape[1] - 1, device=model.device
            )
            labels = labels[:, first:]
        logits = model(
            input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], **kwargs
        ).logits
        if "logits_to_keep" not in kwargs:
            logits = logits[:, :-1]
        mask = labels != IGNORE_INDEX
        for i, score in zip(
            chunk, token_statistics(logits, labels, mask, model=model), strict=True
        ):
            scores[unique[i]] = score
    return [scores[pair] for pair in pairs]


@torch.no_grad()
def score_candidates(
    model: Any,
    tokenizer: Any,
    groups: Sequence[tuple[str, Sequence[str]]],
    *,
    batch_size: int = 32,
    max_length: int = 512,
    add_eos: bool = True,
) -> list[list[AnswerScore]]:
    """Score several answers to one prompt (truth ratio: answer, paraphrase, perturbed; multiple
    choice: the options) with the prompt encoded once and its KV cache reused for every candidate.

    Prompts of a batch are left-padded (positions count real tokens only, so padding changes
    nothing but rounding), run once with only the last position projected onto the vocabulary,
    and their cache rows are repeated for each candidate; the candidates then run as one batch
    continuing from that cache. A long prefix several prompts share (a comprehension passage
    asked about many times) is encoded once more upstream: prefix, then each prompt's rest, then
    its candidates. Numbers equal `score_answers` on the same pairs to float rounding (tested).
    `batch_size` counts candidate sequences per forward pass.
    """
    require_pad(tokenizer)
    model.eval()
    prompts: list[list[int]] = []
    answers: list[list[list[int]]] = []
    for prompt, candidates in groups:
        # Each candidate is tokenised jointly with the prompt (as in training); the prompt's
        # tokens are then the same for every candidate, since no token crosses the boundary.
        encoded = [
            encode_prompt_answer(tokenizer, prompt, c, max_length=1 << 30, add_eos=add_eos)
            for c in candidates
        ]
        prompt_ids = encoded[0].input_ids[: encoded[0].prompt_length]
        if any(e.input_ids[: e.prompt_length] != prompt_ids for e in encoded):
            raise ValueError(f"the tokens of prompt {prompt[-40:]!r} depend on its answer")
        room = max_length - len(prompt_ids)
        if room <= 0:
            raise prompt_too_long(prompt, len(prompt_ids), max_length)
        prompts.append(prompt_ids)
        answers.append([e.input_ids[e.prompt_length :][:room] for e in encoded])
    shared, cluster = shared_prefixes(prompts)
    cost = [len(p) + max(len(a) for a in answers[g]) for g, p in enumerate(prompts)]
    # Prompts sharing a prefix are batched together so it is encoded once per batch.
    order = sorted(range(len(groups)), key=lambda g: (cluster[g] if shared[g] else -1, cost[g]))
    results: list[list[AnswerScore] | None] = [None] * len(groups)
    chunk: list[int] = []
    rows = 0
    for g in order:
        if chunk and rows + len(answers[g]) > batch_size:
            _score_chunk(model, tokenizer, chunk, prompts, shared, answers, results)
            chunk, rows = [], 0
        chunk.append(g)
        rows += len(answers[g])
    if chunk:
        _score_chunk(model, tokenizer, chunk, prompts, shared, answers, results)
    return [r for r in results if r is not None]


def _score_chunk(
    model: Any,
    tokenizer: Any,
    chunk: list[int],
    prompts: list[list[int]],
    shared: list[int],
    answers: list[list[list[int]]],
    results: list[list[AnswerScore] | None],
) -> None:
    device = model.device
    pad = tokenizer.pad_token_id
    cache, _, head_mask, tails = shared_prefix_stage(
        model, [prompts[g] for g in chunk], [shared[g] for g in chunk], pad
    )
    # Each prompt's rest, left-padded: its last token sits in the last column for every row, and
    # any padding between head and rest is masked out.
    tail_ids, tail_mask = left_pad(tails, pad, device)
    prompt_mask = torch.cat([head_mask, tail_mask], dim=1)
    positions = (prompt_mask.cumsum(-1) - 1).clamp_min(0)[:, head_mask.shape[1] :]
    kwargs: dict[str, Any] = {"logits_to_keep": 1} if accepts_logits_to_keep(type(model)) else {}
    out = model(
        input_ids=tail_ids,
        attention_mask=prompt_mask,
        position_ids=positions,
        **with_cache(model, cache),
        use_cache=True,
        **kwargs,
    )
    first_logits = out.logits[:, -1:, :]  # (G, 1, V): predicts each candidate's first token
    # One cache row per candidate: row r continues prompt owner[r].
    owner = torch.tensor(
        [row for row, g in enumerate(chunk) for _ in answers[g]], dtype=torch.long, device=device
    )
    cache = returned_cache(out)
    cache.batch_select_indices(owner)
    candidates = [a for g in chunk for a in answers[g]]
    length = max(len(a) for a in candidates)
    ids = torch.full((len(candidates), length), pad, dtype=torch.long)
    mask = torch.zeros((len(candidates), length), dtype=torch.bool)
    for row, a in enumerate(candidates):
        ids[row, : len(a)] = torch.tensor(a)
        mask[row, : len(a)] = True
    ids, mask = ids.to(device), mask.to(device)
    lengths = prompt_mask.sum(-1)[owner]  # (R,) real prompt tokens
    positions = lengths[:, None] + torch.arange(length, device=device)[None, :]
    # A short answer's padding after a long prompt may count past a learned position table; its
    # positions are masked, but the table is still indexed with them.
    limit = position_limit(model)
    if limit is not None:
        positions = positions.clamp_max(limit - 1)
    logits = model(
        input_ids=ids,
        attention_mask=torch.cat([prompt_mask[owner], mask.long()], dim=1),
        position_ids=positions,
        **with_cache(model, cache),
        use_cache=True,
    ).logits
    # Token t of a candidate is predicted by the prompt's last position (t = 0) or by candidate
    # position t - 1.
    predicting = torch.cat([first_logits[owner], logits[:, :-1, :]], dim=1)  # (R, L, V)
    scores = token_statistics(predicting, ids, mask, model=model)
    start = 0
    for g in chunk:
        results[g] = scores[start : start + len(answers[g])]
        start += len(answers[g])

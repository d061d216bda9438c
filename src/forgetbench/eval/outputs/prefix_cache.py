"""A long prompt prefix several prompts share (a comprehension passage asked about many times) is
run through the model once per batch; every prompt sharing it continues from its KV cache. Used by
scoring and by generation alike."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from forgetbench.eval.outputs.statistics import accepts_logits_to_keep, returned_cache

# A prompt prefix shared by several prompts is encoded once when it is at least this long:
# comprehension formats repeat a passage of ~220 tokens before every question and option set,
# while short shared openings ("Question: What") are not worth an extra forward pass.
MIN_SHARED_PREFIX = 32


def shared_prefixes(
    sequences: Sequence[Sequence[int]], min_tokens: int = MIN_SHARED_PREFIX
) -> tuple[list[int], list[int]]:
    """For each token sequence, the length of the leading tokens it shares with the others of its
    cluster (0 when it shares fewer than `min_tokens` with any), and its cluster id.

    Sorted lexicographically, sequences with a common prefix are adjacent; a cluster is a run whose
    neighbours share at least `min_tokens`, and its prefix is what all its members share, at most
    one token short of the shortest member (each member keeps a token to predict from)."""
    order = sorted(range(len(sequences)), key=lambda i: list(sequences[i]))
    shared = [0] * len(sequences)
    cluster = [0] * len(sequences)

    def common(a: Sequence[int], b: Sequence[int]) -> int:
        n = 0
        for x, y in zip(a, b, strict=False):
            if x != y:
                break
            n += 1
        return n

    runs: list[list[int]] = []
    prefix: list[int] = []
    for i in order:
        if runs:
            n = common(sequences[runs[-1][-1]], sequences[i])
            if n >= min_tokens:
                runs[-1].append(i)
                prefix[-1] = min(prefix[-1], n)
                continue
        runs.append([i])
        prefix.append(len(sequences[i]))
    for run_id, (run, n) in enumerate(zip(runs, prefix, strict=True)):
        n = min(n, min(len(sequences[i]) for i in run) - 1)
        for i in run:
            shared[i] = n if len(run) > 1 and n >= min_tokens else 0
            cluster[i] = run_id
    return shared, cluster


def left_pad(rows: Sequence[Sequence[int]], pad: int, device: Any) -> tuple[Tensor, Tensor]:
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        if r:
            ids[i, width - len(r) :] = torch.tensor(list(r))
            mask[i, width - len(r) :] = 1
    return ids.to(device), mask.to(device)


def _encode_heads(model: Any, heads: list[tuple[int, ...]], pad: int) -> tuple[Any, Tensor, Tensor]:
    """Runs the distinct shared prefixes once, left-padded; returns their KV cache (one row per
    head), token ids and attention mask. Positions count real tokens only, so the padding changes
    nothing but rounding."""
    ids, mask = left_pad(heads, pad, model.device)
    kwargs: dict[str, Any] = {"logits_to_keep": 1} if accepts_logits_to_keep(type(model)) else {}
    out = model(
        input_ids=ids,
        attention_mask=mask,
        position_ids=(mask.cumsum(-1) - 1).clamp_min(0),
        use_cache=True,
        **kwargs,
    )
    return returned_cache(out), ids, mask


def shared_prefix_stage(
    model: Any, rows: Sequence[Sequence[int]], shared: Sequence[int], pad: int
) -> tuple[Any, Tensor, Tensor, list[Sequence[int]]]:
    """Per row of a batch: the KV cache of its shared prefix, the prefix's left-padded ids and
    mask, and the rest of the row. When no row shares a prefix there is no cache and the prefix
    columns are empty, so the rest is the whole row. In a batch that shares, a row without a
    shared prefix uses all but its last token as its own prefix, so every row has a real prefix
    and a non-empty rest."""
    device = model.device
    if not any(shared):
        empty = torch.zeros((len(rows), 0), dtype=torch.long, device=device)
        return None, empty, empty, list(rows)
    heads = [tuple(r[: n if n else len(r) - 1]) for r, n in zip(rows, shared, strict=True)]
    distinct = list(dict.fromkeys(heads))
    index = {h: k for k, h in enumerate(distinct)}
    cache, ids, mask = _encode_heads(model, distinct, pad)
    owner = torch.tensor([index[h] for h in heads], dtype=torch.long, device=device)
    cache.batch_select_indices(owner)
    tails = [r[len(h) :] for r, h in zip(rows, heads, strict=True)]
    return cache, ids[owner], mask[owner], tails

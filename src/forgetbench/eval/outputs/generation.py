"""Greedy generation, batched and left-padded, continuing shared prompt prefixes from their cache."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch

from forgetbench.eval.outputs.prefix_cache import left_pad, shared_prefix_stage, shared_prefixes
from forgetbench.eval.outputs.statistics import require_pad, with_cache
from forgetbench.modeling.encoding import adds_bos
from forgetbench.modeling.limits import model_context

CACHE_IMPLEMENTATIONS = ("dynamic", "static")


@torch.no_grad()
def greedy_generate(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[str],
    *,
    max_new_tokens: int = 200,
    batch_size: int = 16,
    stop_strings: Sequence[str] = (),
    cache_implementation: str = "dynamic",
    compile_decoding: bool = True,
) -> list[str]:
    """Greedy continuations (no sampling), decoded without the prompt, in input order.

    Prompts are sorted by length so each left-padded batch wastes little compute (prompts sharing
    a long prefix are batched together and the prefix is encoded once); the KV cache makes each
    new token one forward step. Stops at EOS, or at a stop string (transformers' `stop_strings`,
    which matches the text however the tokenizer splits it; the string is cut from the output). Padding uses the
    real pad token, never EOS. A prompt longer than the model's context minus `max_new_tokens`
    keeps its last tokens (LUME's documents can exceed a small model's context; the end of the
    text is what the continuation depends on); a context no longer than `max_new_tokens` gives
    half of it to the answer.

    `cache_implementation="static"` (`eval.cache_implementation`): transformers' static KV cache,
    allocated once per batch at its full length instead of grown each token, so on a CUDA GPU
    transformers compiles the decoding step with torch.compile (unless `compile_decoding` is
    off). Batches continuing a shared prefix keep the prefix's growing cache. Greedy decoding
    picks the same tokens either way (tested on the CPU, where nothing is compiled).
    """
    require_pad(tokenizer)
    model.eval()
    pad = tokenizer.pad_token_id
    stops = {"stop_strings": [s for s in stop_strings if s], "tokenizer": tokenizer}
    if cache_implementation not in CACHE_IMPLEMENTATIONS:
        raise ValueError(f"cache_implementation must be one of {CACHE_IMPLEMENTATIONS}")
    static: dict[str, Any] = (
        {"cache_implementation": "static", "disable_compile": not compile_decoding}
        if cache_implementation == "static"
        else {}
    )
    context = model_context(model)
    if context and max_new_tokens >= context:
        # A context shorter than the answer asked for: half for the prompt's end, half for the
        # answer (any more would index past the model's positions).
        max_new_tokens = max(1, context // 2)
    room = context - max_new_tokens if context else None
    limit = {"truncation": True, "max_length": room} if room and room > 0 else {}
    previous_side = tokenizer.truncation_side
    tokenizer.truncation_side = "left"
    try:
        encoded = [
            tokenizer(p, add_special_tokens=adds_bos(tokenizer, p), **limit)["input_ids"]
            for p in prompts
        ]
    finally:
        tokenizer.truncation_side = previous_side
    shared, cluster = shared_prefixes(encoded)
    order = sorted(
        range(len(prompts)), key=lambda i: (cluster[i] if shared[i] else -1, len(encoded[i]))
    )
    outputs: list[str] = [""] * len(prompts)
    for start in range(0, len(order), batch_size):
        chunk = order[start : start + batch_size]
        rows = [encoded[i] for i in chunk]
        # A shared prefix (a passage asked about several times) is encoded once; generate
        # continues from its cache, reading positions from the mask across the padding between
        # the prefix and each prompt's rest.
        cache, head_ids, head_mask, tails = shared_prefix_stage(
            model, rows, [shared[i] for i in chunk], pad
        )
        tail_ids, tail_mask = left_pad(tails, pad, model.device)
        ids = torch.cat([head_ids, tail_ids], dim=1)
        mask = torch.cat([head_mask, tail_mask], dim=1)
        width = ids.shape[1]
        with _width_warning_off(fits=bool(limit)):
            generated = model.generate(
                input_ids=ids,
                attention_mask=mask,
                **with_cache(model, cache),
                max_new_tokens=max_new_tokens,
                do_sample=False,
                eos_token_id=tokenizer.eos_token_id,
                pad_token_id=pad,
                **(stops if stops["stop_strings"] else {}),
                **(static if cache is None else {}),
            )
        for i, row in zip(chunk, generated[:, width:], strict=True):
            text = tokenizer.decode(row, skip_special_tokens=True)
            for s in stop_strings:
                if s and s in text:
                    text = text[: text.index(s)]
            outputs[i] = text
    return outputs


@contextmanager
def _width_warning_off(*, fits: bool) -> Iterator[None]:
    """transformers warns that generation "exceeded the model's predefined maximum length" when the
    batch tensor is wider than the context. A batch continuing shared prefixes is the longest prefix
    plus the longest rest, wider than any of its rows, while each row's positions are read from the
    mask. When every prompt was cut to the context minus the new tokens (`fits`), no row can pass
    the context, so that warning is noise on stderr. It is the only message that module logs;
    transformers' other warnings still show."""
    if not fits:
        yield
        return
    log = logging.getLogger("transformers.generation.stopping_criteria")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        log.setLevel(level)

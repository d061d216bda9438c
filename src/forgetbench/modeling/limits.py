"""How long a sequence a model takes: its context (`model_context`) and, for models with a
learned table of absolute positions, where that table ends (`position_limit`)."""

from __future__ import annotations

import torch


def model_context(model: object) -> int | None:
    """The longest sequence the model (or its config) has positions for
    (`max_position_embeddings`; GPT-2's `n_positions` maps to it), or None when it does not say."""
    config = getattr(model, "config", model)
    context = getattr(config, "max_position_embeddings", None)
    return context if isinstance(context, int) and context > 0 else None


def position_limit(model: object) -> int | None:
    """The size of the model's learned table of absolute positions (GPT-2's `wpe`, OPT's and
    BART's `embed_positions`), past which a sequence indexes out of it; None for rotary or ALiBi
    models (Llama, Mistral, Qwen, the built-in one), which have no table to run off."""
    for name, module in getattr(model, "named_modules", lambda: ())():
        leaf = name.rsplit(".", 1)[-1]
        if isinstance(module, torch.nn.Embedding) and leaf in ("wpe", "embed_positions"):
            offset = getattr(module, "offset", 0)  # OPT keeps two extra rows at the front
            return module.num_embeddings - offset
    return None

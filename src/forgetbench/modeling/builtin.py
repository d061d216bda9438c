"""The built-in model: a small Llama-architecture model built from a config, at a scale's shape or
a named size (`model.size`), with a byte-level BPE tokenizer trained on the miniature corpus, so
nothing is downloaded."""

from __future__ import annotations

from collections.abc import Iterable

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import (
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedTokenizerFast,
)

from forgetbench.benchmarks.mini.scales import SCALES, ModelShape
from forgetbench.config_names import MODEL_SIZES
from forgetbench.errors import ConfigError

BOS, EOS, PAD = "<s>", "</s>", "<pad>"


# The sizes people run, as `model.size` for the built-in model (the world and its tokenizer stay
# the scale's, so the vocabulary is the scale's): GPT-2-small-like ~125M, and the block shapes of
# Llama-3.2-1B and Llama-3-8B (grouped-query attention). Without their 128k-token vocabularies
# they hold ~0.11 B, ~0.97 B and ~6.98 B parameters outside the embeddings.
LLAMA_SHAPES: dict[str, ModelShape] = {
    "125m": ModelShape(
        hidden=768, layers=12, heads=12, intermediate=3072, vocab=0, max_positions=2048
    ),
    "1b": ModelShape(
        hidden=2048, layers=16, heads=32, intermediate=8192, vocab=0, max_positions=2048,
        kv_heads=8,
    ),
    "8b": ModelShape(
        hidden=4096, layers=32, heads=32, intermediate=14336, vocab=0, max_positions=2048,
        kv_heads=8,
    ),
}  # fmt: skip
assert set(MODEL_SIZES) == {"auto", *SCALES, *LLAMA_SHAPES}


def train_tokenizer(texts: Iterable[str], *, vocab_size: int):  # -> PreTrainedTokenizerFast
    """Byte-level BPE trained on our corpus: no unknown characters, no download."""
    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[PAD, BOS, EOS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    core.train_from_iterator(texts, trainer=trainer)
    bos_id = core.token_to_id(BOS)
    core.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A", special_tokens=[(BOS, bos_id)]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=core, bos_token=BOS, eos_token=EOS, pad_token=PAD
    )


def build_tiny_model(
    tokenizer: object, *, scale: str = "tiny", seed: int = 0, size: str = "auto"
):  # -> LlamaForCausalLM
    """A Llama-architecture model from a config, initialised from `seed`: the scale's own shape,
    or `size` (`model.size`: another scale's, or 125m / 1b / 8b). Dropout stays 0 so a run is a
    deterministic function of seed and data (and resume reproduces it exactly)."""
    if scale not in SCALES:
        raise ConfigError(
            f"unknown scale '{scale}' for the tiny model", f"use one of {', '.join(SCALES)}"
        )
    if size not in MODEL_SIZES:
        raise ConfigError(f"model.size must be one of {', '.join(MODEL_SIZES)}, got {size!r}")
    shape = LLAMA_SHAPES.get(size) or SCALES[scale if size == "auto" else size].model
    config = LlamaConfig(
        vocab_size=len(tokenizer),  # type: ignore[arg-type]
        hidden_size=shape.hidden,
        num_hidden_layers=shape.layers,
        num_attention_heads=shape.heads,
        num_key_value_heads=shape.kv_heads or shape.heads,
        intermediate_size=shape.intermediate,
        max_position_embeddings=shape.max_positions,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,  # type: ignore[attr-defined]
        eos_token_id=tokenizer.eos_token_id,  # type: ignore[attr-defined]
        pad_token_id=tokenizer.pad_token_id,  # type: ignore[attr-defined]
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id  # type: ignore[attr-defined]
    return model

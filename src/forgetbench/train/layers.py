"""Partial-layer unlearning (`unlearn.layers`): only the named decoder blocks' weights train.

RWKU's `--train_layers a-b` sets `requires_grad` on the parameters whose name holds `layers.{i}.`
for i in range(a, b) and freezes every other one (embeddings, final norm and head included).
Here the blocks are found by the module tree (`modeling.decoder_blocks`), not by a name, so GPT-2's
`transformer.h.{i}` is covered as Llama's `model.layers.{i}`; with LoRA the adapters go on those
blocks only (PEFT's `layers_to_transform`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from forgetbench.errors import ConfigError
from forgetbench.modeling.forward import decoder_blocks


def checked_layers(model: Any, layers: Sequence[int]) -> list[int]:
    """`layers` sorted, each a block `model` has; else one ConfigError naming the option."""
    depth = len(decoder_blocks(model))
    wrong = [i for i in layers if not 0 <= i < depth]
    if wrong or not layers:
        raise ConfigError(
            f"unlearn.layers names block{'s' if len(wrong) > 1 else ''} "
            f"{', '.join(map(str, wrong)) or '(none)'}, which this model does not have",
            f"name decoder blocks 0..{depth - 1}, or leave unlearn.layers unset to train every "
            "weight",
        )
    return sorted(set(layers))


def train_only_layers(model: Any, layers: Sequence[int]) -> int:
    """Freeze every parameter outside the decoder blocks `layers` (a parameter a method had
    frozen already stays frozen); returns how many parameter tensors still train."""
    blocks = decoder_blocks(model)
    inside = {id(p) for i in checked_layers(model, layers) for p in blocks[i].parameters()}
    kept = 0
    for parameter in model.parameters():
        parameter.requires_grad = parameter.requires_grad and id(parameter) in inside
        kept += parameter.requires_grad
    if not kept:
        raise ConfigError(
            f"unlearn.layers={list(layers)} leaves nothing to train: the method trains no "
            "parameter of those blocks",
            "name the blocks the method updates, or leave unlearn.layers unset",
        )
    return kept

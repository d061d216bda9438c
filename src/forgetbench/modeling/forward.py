"""Running a model in training code: next-token logits (`forward_logits`), and the output of one
decoder block itself (`hidden_states_at`, found through any wrapper by `decoder_blocks`)."""

from __future__ import annotations

import torch
from torch import Tensor

from forgetbench.device import to_model_device
from forgetbench.errors import ConfigError, ModelError
from forgetbench.modeling.packing import PACKED, packed_logits


def forward_logits(model: object, batch: dict[str, Tensor], *, padded: bool = False) -> Tensor:
    """(B, T, V) next-token logits. The single place training code runs the model; the batch
    goes to the model's device first (a frozen reference model reads the same batch). A batch
    the loop packed (`modeling/packing.py`) runs as one padding-free row, its logits put back at
    their padded places, unless `padded`: a loss that reads the full distribution at every
    position (KL over "all" positions counts the padding's) runs the padded batch."""
    batch = to_model_device(batch, model)
    if PACKED in batch and not padded:
        return packed_logits(model, batch[PACKED], batch["input_ids"].shape)
    return model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits  # type: ignore[operator]


def decoder_blocks(model: object) -> torch.nn.ModuleList:
    """The model's decoder blocks, in order: the first ModuleList with one entry per hidden layer
    (`model.layers` of Llama, Mistral, Qwen; `transformer.h` of GPT-2), found through any
    wrapper (PEFT, DDP) since it only walks the module tree."""
    inner = getattr(model, "module", model)
    depth = getattr(getattr(inner, "config", None), "num_hidden_layers", None)
    for module in inner.modules():  # type: ignore[attr-defined]
        if isinstance(module, torch.nn.ModuleList) and len(module) == depth:
            return module
    raise ModelError(
        f"cannot find the decoder blocks of this model (no module list of {depth} blocks)",
        "representation methods (RMU) need a model whose config names num_hidden_layers",
    )


def hidden_states_at(model: object, batch: dict[str, Tensor], layer: int) -> Tensor:
    """(B, T, H) output of decoder block `layer` itself, read by a forward hook on the block as
    the WMDP code and open-unlearning do. Not HF's `hidden_states[layer + 1]`: for the last block
    that entry is taken after the model's final norm, a different tensor. Used by RMU."""
    blocks = decoder_blocks(model)
    if not 0 <= layer < len(blocks):
        raise ConfigError(
            f"layer {layer} does not exist",
            f"the model has {len(blocks)} decoder blocks (0..{len(blocks) - 1})",
        )
    batch = to_model_device(batch, model)
    captured: list[Tensor] = []

    def keep(_module: object, _inputs: object, output: object) -> None:
        # Blocks return a tensor (transformers 5) or a tuple whose first entry is it (4.x).
        captured.append(output[0] if isinstance(output, tuple) else output)  # type: ignore[arg-type]

    handle = blocks[layer].register_forward_hook(keep)
    try:
        model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])  # type: ignore[operator]
    finally:
        handle.remove()
    return captured[0]

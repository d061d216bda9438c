"""Padding-free batches (`model.padding_free`): a training batch's sequences concatenated into one
row, the position ids restarting at 0 for each, so the model computes no padded position.

Transformers keeps the sequences apart itself: with no attention mask and position ids that
restart, its mask functions build a block-diagonal causal mask (sdpa, eager, flex), and the flash
implementations run their variable-length kernels on the sequence boundaries given here
(`cu_seq_lens_*`, as its `DataCollatorWithFlattening` gives them), so nothing is inferred on the
device. The packing is made on the host while collating (the loader's work, no device read), and
`unpack_logits` puts the logits back at their padded places: every loss downstream reads the same
(B, T, V) layout, padded positions holding zeros that every mask excludes.

Only right-padded batches are packed (training's): a real token's position is then its column in
the padded row, exactly the position the padded forward gives it, so each sequence's logits are
the padded batch's to float rounding.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from forgetbench.errors import ConfigError

PACKED = "packed"  # the key of a packed part beside its padded tensors
# The attention implementations transformers keeps packed sequences apart in.
PACKING_ATTENTION = frozenset(
    {"sdpa", "eager", "flex_attention", "flash_attention_2", "flash_attention_3"}
)
# The ones whose kernels skip what they do not need (variable-length flash attention): packing
# there computes only the real tokens, attention included. sdpa and eager apply a dense mask
# over the whole packed row, whose attention grows with its square: packing them is correct but
# not taken by default.
VARLEN_ATTENTION = frozenset({"flash_attention_2", "flash_attention_3"})


def attention_implementation(model: Any) -> str | None:
    base = getattr(model, "module", model)  # DDP
    if hasattr(base, "get_base_model"):  # PEFT
        base = base.get_base_model()
    return getattr(getattr(base, "config", None), "_attn_implementation", None)


def uses_padding_free(model: Any, device: torch.device, *, asked: bool | None) -> bool:
    """Whether the loop packs `model`'s batches: as `asked`; unset, on a CUDA GPU where the
    attention is a variable-length flash kernel (the CPU keeps padded batches, and with them the
    numbers every cached stage and the golden study were made with)."""
    attention = attention_implementation(model)
    if asked is None:
        return device.type == "cuda" and attention in VARLEN_ATTENTION
    if asked and attention not in PACKING_ATTENTION:
        raise ConfigError(
            f"model.padding_free=true: this model's attention ({attention}) does not keep "
            f"packed sequences apart",
            f"use one of {', '.join(sorted(PACKING_ATTENTION))} or set model.padding_free=false",
        )
    return asked


def pack(part: dict[str, Tensor]) -> dict[str, Tensor | int]:
    """The real tokens of a right-padded part (`input_ids`, `attention_mask`), as one row: its
    ids, position ids restarting per sequence, the flat index of each token in the padded
    (B x T) layout, and the flash kernels' boundaries."""
    mask = part["attention_mask"].bool()
    lengths = mask.sum(dim=1)
    width = mask.shape[1]
    columns = torch.arange(width).expand_as(mask)
    if not torch.equal(mask, columns < lengths.unsqueeze(1)):
        raise ValueError("padding-free batches need right-padded sequences")
    index = torch.nonzero(mask.flatten()).squeeze(1)
    bounds = torch.zeros(len(lengths) + 1, dtype=torch.int32)
    bounds[1:] = torch.cumsum(lengths, dim=0)
    longest = int(lengths.max())
    return {
        "input_ids": part["input_ids"].flatten()[index].unsqueeze(0),
        "position_ids": columns.flatten()[index].unsqueeze(0),
        "index": index,
        "cu_seq_lens_q": bounds,
        "cu_seq_lens_k": bounds,
        "max_length_q": longest,
        "max_length_k": longest,
    }


def with_packed(batch: Any) -> Any:
    """`batch` with every padded part (a dict of `input_ids` and `attention_mask`, at any depth:
    finetuning's batch, or unlearning's forget, retain, refusal and alternate parts) given its
    packed form under `PACKED`, beside its padded tensors."""
    if not isinstance(batch, dict):
        return batch
    if "input_ids" in batch and "attention_mask" in batch:
        return {**batch, PACKED: pack(batch)}
    return {k: with_packed(v) for k, v in batch.items()}


def packing_collate(collate_fn: Callable[[list[Any]], Any]) -> Callable[[list[Any]], Any]:
    def collate(examples: list[Any]) -> Any:
        return with_packed(collate_fn(examples))

    return collate


def packed_logits(model: Any, packed: dict[str, Any], shape: torch.Size) -> Tensor:
    """(B, T, V) logits of the packed part's sequences at their padded places (zeros at the
    padding), from one forward pass over the packed row."""
    flash = attention_implementation(model) in VARLEN_ATTENTION
    kwargs = {
        k: packed[k] for k in ("cu_seq_lens_q", "cu_seq_lens_k", "max_length_q", "max_length_k")
    }
    logits = model(
        input_ids=packed["input_ids"],
        position_ids=packed["position_ids"],
        use_cache=False,
        **(kwargs if flash else {}),
    ).logits[0]
    rows, width = shape
    flat = logits.new_zeros((rows * width, logits.shape[-1]))
    return flat.index_copy(0, packed["index"], logits).view(rows, width, -1)

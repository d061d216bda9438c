"""Weight quantisation as an attack (Zhang et al. 2025, "Catastrophic Failure of LLM Unlearning via
Quantization", ICLR): unlearning moves weights by less than one quantisation step, so rounding can
put the finetuned model back.

Simulated ("fake") quantisation: each weight is replaced by its dequantised value, so the model
keeps its architecture and dtype and runs through the same evaluation on any device. The rounding
is what a real kernel stores:

- `int8`, `int4`: symmetric absmax round-to-nearest. Per group of `group_size` consecutive
  input weights of one output row (0 = the whole row, i.e. per output channel): scale =
  max|w| / (2^(bits-1) - 1), w' = scale * clamp(round(w / scale), -qmax, qmax). int8 per row is
  LLM.int8's vector-wise quantisation without its fp16 outlier columns.
- `nf4`: QLoRA's 4-bit NormalFloat (Dettmers et al. 2023, Sec. 3): per block of 64 consecutive
  weights (bitsandbytes' default block), w / absmax is rounded to the nearest of 16 levels placed
  at quantiles of N(0, 1) (`nf4_levels`), then rescaled. No double quantisation of the scales.

As bitsandbytes does by default, every `nn.Linear` inside the model is quantised except the output
head, and embeddings are left as they are.
"""

from __future__ import annotations

from functools import cache
from typing import Any, Literal

import torch
from scipy.stats import norm
from torch import Tensor

from forgetbench.errors import ConfigError

Scheme = Literal["int8", "int4", "nf4"]
SCHEMES: tuple[str, ...] = ("int8", "int4", "nf4")
NF4_BLOCK = 64


def _grouped(weight: Tensor, group_size: int) -> tuple[Tensor, tuple[int, ...]]:
    """`weight` as rows of `group_size` values (each output row cut into groups); 0 = whole rows."""
    rows = weight.reshape(weight.shape[0], -1) if weight.dim() > 1 else weight.reshape(1, -1)
    width = rows.shape[1]
    size = width if group_size == 0 else group_size
    if width % size:
        raise ConfigError(
            f"attack.group_size={group_size} does not divide a weight row of {width} values",
            "choose a divisor of the model's hidden sizes, or 0 for one group per output channel",
        )
    return rows.reshape(-1, size), weight.shape


def round_to_nearest(weight: Tensor, *, bits: int, group_size: int = 0) -> Tensor:
    """Symmetric absmax round-to-nearest with `bits` bits, dequantised (same shape and dtype)."""
    groups, shape = _grouped(weight.detach().float(), group_size)
    qmax = 2 ** (bits - 1) - 1
    scale = groups.abs().amax(dim=1, keepdim=True) / qmax
    # An all-zero group has scale 0: it stays zero instead of dividing by zero.
    safe = torch.where(scale > 0, scale, torch.ones_like(scale))
    quantised = torch.clamp(torch.round(groups / safe), -qmax, qmax) * scale
    return quantised.reshape(shape).to(weight.dtype)


@cache
def nf4_levels() -> tuple[float, ...]:
    """The 16 NormalFloat-4 levels: 8 positive quantiles of N(0, 1) and 7 negative ones, plus an
    exact zero, normalised to [-1, 1]. The outermost quantile is taken at the midpoint of
    1 - 1/(2*15) and 1 - 1/(2*16), which keeps the levels finite (QLoRA, Appendix E)."""
    offset = (1 - 1 / (2 * 15) + 1 - 1 / (2 * 16)) / 2
    positive = norm.ppf(torch.linspace(offset, 0.5, 9)[:-1].double().numpy())
    negative = -norm.ppf(torch.linspace(offset, 0.5, 8)[:-1].double().numpy())
    levels = sorted([*positive.tolist(), 0.0, *negative.tolist()])
    top = max(abs(v) for v in levels)
    return tuple(v / top for v in levels)


def normal_float4(weight: Tensor, *, block_size: int = NF4_BLOCK) -> Tensor:
    """NF4 blockwise quantisation over the flattened weight, dequantised."""
    flat = weight.detach().float().reshape(-1)
    if flat.numel() % block_size:
        raise ConfigError(
            f"a weight of {flat.numel()} values is not a whole number of NF4 blocks of {block_size}"
        )
    blocks = flat.reshape(-1, block_size)
    absmax = blocks.abs().amax(dim=1, keepdim=True)
    safe = torch.where(absmax > 0, absmax, torch.ones_like(absmax))
    levels = torch.tensor(nf4_levels(), dtype=torch.float32)
    nearest = (blocks / safe).unsqueeze(-1).sub(levels).abs().argmin(dim=-1)
    return (levels[nearest] * absmax).reshape(weight.shape).to(weight.dtype)


def quantise_tensor(weight: Tensor, scheme: str, *, group_size: int = 0) -> Tensor:
    if scheme == "int8":
        return round_to_nearest(weight, bits=8, group_size=group_size)
    if scheme == "int4":
        return round_to_nearest(weight, bits=4, group_size=group_size)
    if scheme == "nf4":
        return normal_float4(weight)
    raise ConfigError(
        f"unknown quantisation scheme '{scheme}'", f"choose from {', '.join(SCHEMES)}"
    )


def quantise_model(model: Any, scheme: str, *, group_size: int = 0) -> list[str]:
    """Quantise every linear layer of `model` in place but its output head; returns their names."""
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    done = []
    with torch.no_grad():
        for name, module in model.named_modules():
            if isinstance(module, torch.nn.Linear) and module is not head:
                module.weight.copy_(quantise_tensor(module.weight, scheme, group_size=group_size))
                done.append(name)
    return done

"""The optimizer a training loop steps (AdamW, no weight decay on biases and norms) and its
learning-rate schedule (linear warm-up, then linear decay to 0), counted in optimizer steps."""

from __future__ import annotations

import torch

from forgetbench.train.loop_config import LoopConfig


def warmup_steps(config: LoopConfig, n_examples: int, steps_per_epoch: int) -> int:
    if config.warmup_epochs <= 0:
        return 0
    if config.schedule == "hf":
        return int(config.warmup_epochs * n_examples // config.batch_size)
    return max(1, round(config.warmup_epochs * steps_per_epoch))


def lr_factor(step: int, warmup: int, total: int, *, offset: int = 1) -> float:
    # offset 1: the first warm-up step already moves (1/warmup); 0: HF's, which starts at lr 0.
    if warmup and step < warmup:
        return (step + offset) / warmup
    return max(0.0, (total - step) / max(1, total - warmup))


def build_optimizer(
    model: torch.nn.Module, config: LoopConfig, *, device: torch.device | None
) -> torch.optim.AdamW:
    """AdamW over `_parameter_groups`. Where the parameters train on CUDA, its fused kernel: the
    whole update in a few launches instead of several per parameter tensor, the same arithmetic
    up to float rounding. Elsewhere (the CPU, whose numbers the golden study pins) as before."""
    decay, no_decay = _parameter_groups(model)
    return torch.optim.AdamW(
        [
            {"params": decay, "weight_decay": config.weight_decay},
            {"params": no_decay, "weight_decay": 0.0},
        ],
        lr=config.lr,
        fused=True if device is not None and device.type == "cuda" else None,
    )


def _parameter_groups(model: torch.nn.Module) -> tuple[list, list]:
    # No weight decay on biases and norms, as in HF Trainer (TOFU's recipe).
    decay, no_decay = [], []
    for name, parameter in model.named_parameters():
        if not parameter.requires_grad:
            continue
        (no_decay if parameter.ndim < 2 or "norm" in name.lower() else decay).append(parameter)
    return decay, no_decay

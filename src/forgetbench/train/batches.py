"""How a loop cuts an epoch into batches: the effective batch as per-device batches x processes x
accumulated micro-batches, each epoch's loader in its seeded order, and the real tokens a batch
holds."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch.utils.data import DataLoader

from forgetbench.errors import ConfigError
from forgetbench.train.loop_config import LoopConfig
from forgetbench.train.order import epoch_generator, epoch_order, example_lengths


def accumulation_steps(config: LoopConfig, processes: int) -> int:
    per_step = config.per_device_batch_size * processes
    if config.batch_size % per_step:
        raise ConfigError(
            f"train.batch_size={config.batch_size} is not a multiple of per_device_batch_size x processes = {per_step}",
            "choose sizes so the effective batch divides evenly",
        )
    return config.batch_size // per_step


def fit_per_device(batch_size: int, per_device: int, processes: int | None = None) -> int:
    """A per-device batch size that a recipe set (not the user) fitted to the processes the
    run is launched with: the largest size up to `per_device` whose multiple by the processes
    divides `batch_size`, so the effective batch stays `batch_size` and accumulation adapts. A
    batch that the processes do not divide keeps `per_device` (the loop then says so)."""
    processes = launched_processes() if processes is None else processes
    if batch_size % processes:
        return per_device
    per_process = batch_size // processes
    return max(d for d in range(1, min(per_device, per_process) + 1) if per_process % d == 0)


def launched_processes() -> int:

    return int(os.environ.get("WORLD_SIZE", "1"))


def epoch_loader(
    examples: Sequence[Any],
    config: LoopConfig,
    epoch: int,
    collate_fn: Callable,
    *,
    pin: bool = False,
) -> DataLoader:
    generator = epoch_generator(config, epoch)
    lengths = example_lengths(examples) if config.group_by_length else None
    order = epoch_order(config, len(examples), epoch, generator=generator, lengths=lengths)
    # `generator` also feeds the seed each new iterator draws (for workers), which would otherwise
    # come from the global RNG: a resumed run opens its epoch's iterator after the checkpoint
    # restored that RNG, the uninterrupted run before, so a loss that draws random numbers would
    # see them shifted by one.
    return DataLoader(
        [examples[i] for i in order],
        batch_size=config.per_device_batch_size,
        shuffle=False,
        collate_fn=collate_fn,
        generator=generator,
        pin_memory=pin,
    )


def count_tokens(batch: Any) -> torch.Tensor | int:
    # A tensor on the batch's device, read with the step's other numbers (int() here would wait).
    if isinstance(batch, dict) and "attention_mask" in batch:
        return batch["attention_mask"].sum()
    if isinstance(batch, dict):
        return sum(
            (count_tokens(v) for v in batch.values() if isinstance(v, dict)),
            start=0,
        )
    return 0

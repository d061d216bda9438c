"""The order a training epoch visits its examples in (`epoch_order`): a pure function of the
seed and the epoch, random, or with `group_by_length` grouped as Hugging Face's Trainer groups it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import torch

from forgetbench.errors import ConfigError


class OrderOptions(Protocol):
    """What the order reads of a training recipe (the loop's `LoopConfig`), named here so this
    module needs nothing from the loop that calls it."""

    seed: int
    batch_size: int
    group_by_length: bool


def epoch_order(
    config: OrderOptions,
    n_examples: int,
    epoch: int,
    *,
    generator: torch.Generator | None = None,
    lengths: Sequence[int] | None = None,
) -> list[int]:
    """The order an epoch visits the examples in: a pure function of (seed, epoch), so resume and
    every process agree without carrying sampler state around (and another trainer can be fed
    the same order, `forgetbench.train.throughput`). `generator`: the epoch's own, to go on
    drawing from it. With `config.group_by_length`, grouped by the examples' `lengths`."""
    generator = generator or epoch_generator(config, epoch)
    if config.group_by_length:
        if lengths is None or len(lengths) != n_examples:
            raise ValueError("group_by_length needs one length per example")
        return length_grouped_order(lengths, config.batch_size, generator)
    return torch.randperm(n_examples, generator=generator).tolist()


def length_grouped_order(
    lengths: Sequence[int], batch_size: int, generator: torch.Generator
) -> list[int]:
    """HF Trainer's `group_by_length` order, by its own function: the same random permutation
    as without grouping (the first draw from `generator`), cut into megabatches of
    min(50, n / (4 x batch_size)) batches, each sorted longest first, the longest example of all
    moved to the front (an out-of-memory error shows at the first step, not the last).
    `batch_size`: the effective batch, as HF's sampler (per-device x accumulation)."""
    from transformers.trainer_pt_utils import get_length_grouped_indices

    return [
        int(i) for i in get_length_grouped_indices(list(lengths), batch_size, generator=generator)
    ]


def example_lengths(examples: Sequence[Any]) -> list[int]:
    """Each training example's token count (`Encoded.input_ids`), what length grouping sorts."""
    lengths = []
    for example in examples:
        ids = getattr(example, "input_ids", None)
        if ids is None:
            raise ConfigError(
                f"group_by_length needs examples with input_ids, not {type(example).__name__}",
                "turn group_by_length off for this training",
            )
        lengths.append(len(ids))
    return lengths


def epoch_generator(config: OrderOptions, epoch: int) -> torch.Generator:
    return torch.Generator().manual_seed(config.seed * 100_003 + epoch)

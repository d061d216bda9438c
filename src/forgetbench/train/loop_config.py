"""`LoopConfig`: what one training loop is told (learning rate, epochs, batch sizes, schedule,
data order), and `config_key`, the part of it a cached training stage is named by."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from forgetbench.device import default_device, precision_key

SCHEDULES = ("linear", "hf")


@dataclass(frozen=True)
class LoopConfig:
    lr: float
    epochs: int
    batch_size: int = 32  # effective: per_device_batch_size x processes x accumulation
    per_device_batch_size: int = 4
    # A recipe's (or preset's) per-device size, not the user's: the loop fits it to the processes
    # it is launched with (`fit_per_device`), the effective batch staying `batch_size`. Not in the
    # stage's key, as the process count is not: a torchrun launch reuses the one-process stage.
    fit_per_device: bool = False
    weight_decay: float = 0.01
    warmup_epochs: float = 1.0
    max_grad_norm: float = 1.0
    seed: int = 0
    checkpoint_every: int = 0  # optimizer steps; 0 = only at the end of each epoch
    # Linear warm-up then linear decay to 0 (`schedule.lr_factor`). "linear": round(warmup_epochs x steps
    # per epoch) warm-up steps, the first at lr/warmup. "hf": as open-unlearning sets up HF's
    # Trainer: floor(warmup_epochs x examples / batch_size) warm-up steps (its
    # `load_trainer_args`), the first at lr 0 (`get_linear_schedule_with_warmup`).
    schedule: str = "linear"
    # Each epoch's order as HF Trainer's `group_by_length` (order.length_grouped_order): a random
    # permutation cut into megabatches, each sorted longest first, so a batch holds examples of
    # similar length and pads little. Off unless asked for (`length_grouping_default`): it changes
    # the order, hence the numbers.
    group_by_length: bool = False


def config_key(config: LoopConfig) -> dict[str, Any]:
    """The settings a cached training stage's key covers: the loop's, and the command's precision
    settings where they are not the defaults (so every stage cached before they existed keeps
    its name, and a bf16 run never reuses a float32 one's model). `group_by_length` counts only
    when on, for the same reason."""
    key = asdict(config)
    del key["fit_per_device"]
    if not config.group_by_length:
        del key["group_by_length"]
    return {**key, **precision_key()}


def length_grouping_default(asked: bool | None = None) -> bool:
    """Whether a finetuning loop groups its batches by length (`train.group_by_length`): as
    `asked`, and unset, on when the command trains on a CUDA GPU. There a batch's padding is
    compute paid for (31 % of the tokens of `bench train`'s 1B run in random order); on the CPU the order stays
    the random one every cached stage and the golden numbers were made with."""
    if asked is not None:
        return asked
    return default_device().type == "cuda"

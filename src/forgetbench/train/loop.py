"""The one training loop. Finetuning and every unlearning method run through `train_loop`; they
differ only in their data and their `loss_fn(model, batch) -> scalar` — or, for a method whose
update is not the gradient of one scalar (NGDiff's two-gradient step), a `StepHook` the loop calls
in place of `backward` and `optimizer.step()`.

Accelerate handles devices, DDP (`accelerate launch`, `torchrun`), gradient accumulation
and each process's part of a checkpoint (`save_state`, see checkpoint.py). With
`model.sharding=fsdp` the model is sharded with FSDP2 instead (sharding.py): accelerate then
still splits the data and reduces the logged numbers, but never wraps the model.
The schedule is computed in optimizer steps and stepped by hand once per optimizer step, so one
process with accumulation and N processes without it follow the same learning-rate curve.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import torch
from accelerate import Accelerator
from accelerate.utils import DataLoaderConfiguration
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
)
from torch.utils.data import DataLoader

from forgetbench.device import model_device, precision, precision_key
from forgetbench.errors import ConfigError, ForgetbenchError, PluginError
from forgetbench.train.checkpoint import LoopPosition, load_checkpoint, save_checkpoint
from forgetbench.train.integrity import note
from forgetbench.train.order import epoch_generator, epoch_order, example_lengths
from forgetbench.train.sharding import (
    clip_sharded_gradients,
    shard_model,
    sharding_requested,
    two_gradient_refusal,
)
from forgetbench.train.step_numbers import StepNumbers

# A loss function returns the scalar to minimise, or (scalar, named parts to log: 0-d tensors,
# read with the step's other numbers, or floats).
LossFn = Callable[[torch.nn.Module, Any], torch.Tensor | tuple[torch.Tensor, dict[str, Any]]]
# The examples of one epoch, or a function epoch -> that epoch's examples (same count every epoch;
# e.g. unlearning redraws each forget sample's retain partner per epoch).
Examples = Sequence[Any] | Callable[[int], Sequence[Any]]
TRAIN_LOG = "train_log.jsonl"


@runtime_checkable
class StepHook(Protocol):
    """How a method whose update is not `backward(loss)` + `optimizer.step()` joins the loop.

    The loop still owns the data order, gradient accumulation, the optimizer (AdamW) and its
    schedule, gradient clipping, the log, checkpoints and resume; the hook only replaces the two
    calls in between. Calls per optimizer step: `backward` once per micro-batch, then
    `prepare_step` (the update direction goes into `.grad`), clipping, then `step`.
    One process only (the hook's gradients bypass DDP's all-reduce).
    """

    def backward(self, model: torch.nn.Module, batch: Any) -> tuple[torch.Tensor, dict[str, Any]]:
        """One micro-batch: keep its share of the step's gradients; return a scalar to log (a
        non-finite one stops the run) and named parts."""
        ...

    def prepare_step(self, model: torch.nn.Module) -> None:
        """All micro-batches of the step are in: write the update direction into `.grad`."""
        ...

    def step(self, model: torch.nn.Module, optimizer: Any, *, step: int) -> dict[str, float]:
        """Take the optimizer step (`step` = optimizer steps done before it); return named
        numbers to log."""
        ...

    def state_dict(self) -> dict[str, Any]:
        """JSON-able state saved with each checkpoint, so a resumed run continues exactly."""
        ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


@runtime_checkable
class StatefulLoss(Protocol):
    """A `loss_fn` with state beyond the model's and the optimizer's (a method's dual variable):
    the loop calls `end_step` once after each optimizer step (`reduce` averages a tensor over
    processes; `epoch` is the 0-based epoch of the step) and saves `state_dict()` with every
    checkpoint, restoring it on resume, as it does a step hook's."""

    def __call__(
        self, model: torch.nn.Module, batch: Any
    ) -> torch.Tensor | tuple[torch.Tensor, dict[str, Any]]: ...

    def end_step(self, reduce: Callable[[torch.Tensor], torch.Tensor], *, epoch: int) -> None: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


SCHEDULES = ("linear", "hf")


class NonFiniteLoss(ForgetbenchError):
    pass


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
    # Linear warm-up then linear decay to 0 (`_lr_factor`). "linear": round(warmup_epochs x steps
    # per epoch) warm-up steps, the first at lr/warmup. "hf": as open-unlearning sets up HF's
    # Trainer: floor(warmup_epochs x examples / batch_size) warm-up steps (its
    # `load_trainer_args`), the first at lr 0 (`get_linear_schedule_with_warmup`).
    schedule: str = "linear"
    # Each epoch's order as HF Trainer's `group_by_length` (order.length_grouped_order): a random
    # permutation cut into megabatches, each sorted longest first, so a batch holds examples of
    # similar length and pads little. Off by default: it changes the order, hence the numbers.
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


@dataclass
class LoopResult:
    steps: int
    losses: list[float] = field(
        default_factory=list
    )  # one per optimizer step, mean over the effective batch
    seconds: float = 0.0


def train_loop(
    model: torch.nn.Module,
    examples: Examples,
    *,
    loss_fn: LossFn | None = None,
    step_hook: StepHook | None = None,
    collate_fn: Callable[[list[Any]], Any],
    config: LoopConfig,
    out_dir: str | Path,
    accelerator: Any = None,
    progress: bool = True,
    on_step: Callable[[int, torch.nn.Module], None] | None = None,
    save_checkpoints: bool = True,
) -> LoopResult:
    """Train `model` in place on `examples`; checkpoints and `train_log.jsonl` go to `out_dir`.

    Give exactly one of `loss_fn` (minimise a scalar) and `step_hook` (a method's own update).
    Resumes from `out_dir/checkpoint` when one exists, replaying the same data order, so a killed
    run ends with the same weights as an uninterrupted one. `save_checkpoints=False` (a throughput
    benchmark, which never resumes) skips writing them: a 1B model's optimizer state is ~16 GB.
    """
    if (loss_fn is None) == (step_hook is None):
        raise ValueError("train_loop needs exactly one of loss_fn and step_hook")
    epoch_examples = examples if callable(examples) else (lambda _epoch: examples)
    out = Path(out_dir)
    processes = accelerator.num_processes if accelerator else _launched_processes()
    if config.fit_per_device:
        config = replace(
            config,
            per_device_batch_size=fit_per_device(
                config.batch_size, config.per_device_batch_size, processes
            ),
        )
    sharded = sharding_requested()
    if step_hook is not None and sharded:
        raise two_gradient_refusal()
    if step_hook is not None and processes > 1:
        raise ConfigError(
            f"this method takes its own two-gradient step, which runs in one process, "
            f"not {processes}",
            "run it without accelerate launch (unlearn.batch_size still accumulates)",
        )
    accumulation = _accumulation_steps(config, processes)
    if accelerator is None:
        # The model is already where `place_model` put it: the accelerator trains it there, so a
        # frozen reference model placed beside it stays on the same device.
        device = model_device(model)
        if device.type == "cuda" and device.index is not None:
            torch.cuda.set_device(device)
        accelerator = Accelerator(
            gradient_accumulation_steps=accumulation,
            cpu=device.type != "cuda",
            # Batches go to the GPU from pinned memory without the host waiting for the copy.
            dataloader_config=DataLoaderConfiguration(non_blocking=device.type == "cuda"),
            # Sharded, FSDP's own policy computes in bf16 (sharding.py), not accelerate's autocast.
            mixed_precision="no" if sharded else precision().mixed_precision,
        )
    elif accelerator.gradient_accumulation_steps != accumulation:
        raise ConfigError(
            f"the accelerator accumulates {accelerator.gradient_accumulation_steps} steps but the config needs {accumulation}"
        )

    pin = accelerator.device.type == "cuda"
    n_examples = len(epoch_examples(0))
    batches_per_epoch = math.ceil(n_examples / (config.per_device_batch_size * processes))
    steps_per_epoch = math.ceil(batches_per_epoch / accumulation)
    total_steps = steps_per_epoch * config.epochs
    if config.schedule not in SCHEDULES:
        raise ConfigError(
            f"schedule must be one of {', '.join(SCHEDULES)}, got {config.schedule!r}",
            "fix the preset's loop.schedule",
        )
    warmup = _warmup_steps(config, n_examples, steps_per_epoch)
    offset = 1 if config.schedule == "linear" else 0

    if precision().gradient_checkpointing:
        enable_gradient_checkpointing(model)
    if sharded:  # before the optimizer: it must hold the shards that replace the parameters
        shard_model(model)
    # FSDP's sharded parameters keep the multi-tensor AdamW they were tested with.
    optimizer = build_optimizer(model, config, device=None if sharded else accelerator.device)
    # Not given to accelerator.prepare: its wrapper steps the schedule once per process, and ours
    # is already counted in optimizer steps. A checkpoint keeps its state_dict in our JSON.
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: _lr_factor(s, warmup, total_steps, offset=offset)
    )
    if not sharded:
        model, optimizer = accelerator.prepare(model, optimizer)
    position = LoopPosition(0, 0, 0)
    resumed = load_checkpoint(out, accelerator=accelerator, model=model, optimizer=optimizer)
    stateful = loss_fn if isinstance(loss_fn, StatefulLoss) else None
    # Whatever keeps state of its own across steps: a step hook or a stateful loss (never both).
    holder = step_hook if step_hook is not None else stateful
    if resumed is not None:
        position = resumed.position
        scheduler.load_state_dict(resumed.schedule)
        if holder is not None:
            holder.load_state_dict(resumed.extra)

    log_path = out / TRAIN_LOG
    losses = []
    if accelerator.is_main_process:
        out.mkdir(parents=True, exist_ok=True)
        losses = _resume_log(log_path, upto=position.step)

    started = time.perf_counter()
    step = position.step
    tokens_seen = 0
    # Nothing in a step reads a number off the device (step_numbers.py): the step's losses, named
    # terms, tokens and gradient norm are read in one copy once its optimizer step is queued.
    numbers = StepNumbers()
    with _Progress(
        enabled=progress and accelerator.is_main_process, total=total_steps, done=step
    ) as bar:
        for epoch in range(position.epoch, config.epochs):
            this_epoch = epoch_examples(epoch)
            if len(this_epoch) != n_examples:
                raise ValueError(
                    f"epoch {epoch + 1} has {len(this_epoch)} examples, epoch 1 had {n_examples}"
                )
            loader = accelerator.prepare_data_loader(
                _epoch_loader(this_epoch, config, epoch, collate_fn, pin=pin)
            )
            skip = position.batches_done if epoch == position.epoch else 0
            if skip:
                loader = accelerator.skip_first_batches(loader, skip)
            model.train()
            for index, batch in enumerate(loader, start=skip):
                with accelerator.accumulate(model):
                    try:
                        if step_hook is None:
                            loss, parts = _split_loss(loss_fn(model, batch))
                        else:
                            loss, parts = step_hook.backward(model, batch)
                    except PluginError as exc:
                        where = f"step {step + 1} (epoch {epoch + 1})"
                        raise exc.at(where) from exc.__cause__
                    if step_hook is None:
                        accelerator.backward(loss)
                    else:
                        # A two-gradient step reads its gradients' norms anyway, and its next
                        # calls need this micro-batch's gradients: it stops at once.
                        _stop_if_non_finite(loss, step, epoch)
                    numbers.add(loss, parts, _count_tokens(batch))
                    if accelerator.sync_gradients:
                        if step_hook is not None:
                            step_hook.prepare_step(model)
                        if config.max_grad_norm > 0:
                            # An overflowing norm makes clipping scale every gradient to 0 (or
                            # NaN): training would silently stop. The read below says so.
                            numbers.grad_norm = (
                                clip_sharded_gradients(model, config.max_grad_norm)
                                if sharded
                                else accelerator.clip_grad_norm_(
                                    model.parameters(), config.max_grad_norm
                                )
                            )
                        if step_hook is None:
                            optimizer.step()
                        else:
                            numbers.add_parts(step_hook.step(model, optimizer, step=step))
                        scheduler.step()
                        optimizer.zero_grad()
                if not accelerator.sync_gradients:
                    continue
                reading = numbers.read(lambda t: accelerator.reduce(t, reduction="mean"))
                bad = reading.non_finite()
                if bad is not None:
                    raise NonFiniteLoss(
                        f"{bad[0]} became {bad[1]} at step {step + 1} (epoch {epoch + 1})",
                        "lower the learning rate or the loss weights or check the data; "
                        "finished stages are kept",
                    )
                if stateful is not None:
                    stateful.end_step(
                        lambda t: accelerator.reduce(t, reduction="mean"), epoch=epoch
                    )
                step += 1
                mean_loss = reading.loss
                tokens_seen += reading.tokens
                losses.append(mean_loss)
                elapsed = time.perf_counter() - started
                if accelerator.is_main_process:
                    _append_log(
                        log_path,
                        {
                            "step": step,
                            "epoch": epoch + 1,
                            "loss": mean_loss,
                            "lr": scheduler.get_last_lr()[0],
                            "tokens_per_s": round(tokens_seen * processes / max(elapsed, 1e-9), 1),
                            "elapsed_s": round(elapsed, 3),
                            # the method's named terms: this process's mean over the step's
                            # micro-batches (a float a method gives: the last one)
                            **{k: round(v, 6) for k, v in reading.parts.items()},
                        },
                    )
                bar.update(
                    step, loss=mean_loss, tokens_per_s=tokens_seen * processes / max(elapsed, 1e-9)
                )
                end_of_epoch = index + 1 == batches_per_epoch
                if save_checkpoints and (
                    (config.checkpoint_every and step % config.checkpoint_every == 0)
                    or end_of_epoch
                ):
                    next_position = (
                        LoopPosition(step, epoch + 1, 0)
                        if end_of_epoch
                        else LoopPosition(step, epoch, index + 1)
                    )
                    save_checkpoint(
                        out,
                        accelerator=accelerator,
                        position=next_position,
                        schedule=scheduler.state_dict(),
                        extra=holder.state_dict() if holder is not None else None,
                        shards=(model, optimizer) if sharded else None,
                    )
                if on_step is not None:
                    on_step(step, model)
    return LoopResult(steps=step, losses=losses, seconds=time.perf_counter() - started)


def enable_gradient_checkpointing(model: torch.nn.Module) -> None:
    """Activation checkpointing for a transformers model (PEFT-wrapped or not). Non-reentrant, so
    frozen inputs (LoRA's frozen embeddings) still carry gradients to the adapters."""
    if not hasattr(model, "gradient_checkpointing_enable"):
        raise ConfigError(
            f"train.gradient_checkpointing: {type(model).__name__} does not support it",
            "set train.gradient_checkpointing=false",
        )
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if getattr(model, "config", None) is not None:
        model.config.use_cache = False  # a KV cache is meaningless while recomputing activations


def _stop_if_non_finite(loss: torch.Tensor, step: int, epoch: int) -> None:
    if not torch.isfinite(loss):
        raise NonFiniteLoss(
            f"loss became {loss.item()} at step {step + 1} (epoch {epoch + 1})",
            "lower the learning rate or check the data; finished stages are kept",
        )


def _split_loss(output: Any) -> tuple[torch.Tensor, dict[str, Any]]:
    return output if isinstance(output, tuple) else (output, {})


def _accumulation_steps(config: LoopConfig, processes: int) -> int:
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
    processes = _launched_processes() if processes is None else processes
    if batch_size % processes:
        return per_device
    per_process = batch_size // processes
    return max(d for d in range(1, min(per_device, per_process) + 1) if per_process % d == 0)


def _launched_processes() -> int:

    return int(os.environ.get("WORLD_SIZE", "1"))


def _warmup_steps(config: LoopConfig, n_examples: int, steps_per_epoch: int) -> int:
    if config.warmup_epochs <= 0:
        return 0
    if config.schedule == "hf":
        return int(config.warmup_epochs * n_examples // config.batch_size)
    return max(1, round(config.warmup_epochs * steps_per_epoch))


def _lr_factor(step: int, warmup: int, total: int, *, offset: int = 1) -> float:
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


def _epoch_loader(
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


def _count_tokens(batch: Any) -> torch.Tensor | int:
    # A tensor on the batch's device, read with the step's other numbers (int() here would wait).
    if isinstance(batch, dict) and "attention_mask" in batch:
        return batch["attention_mask"].sum()
    if isinstance(batch, dict):
        return sum(
            (_count_tokens(v) for v in batch.values() if isinstance(v, dict)),
            start=0,
        )
    return 0


def _log_rows(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """(line, row) of every complete log line. A line that is not a JSON object with a step and a
    loss — the torn last line of a run killed mid-write, or bytes damaged since — is dropped with
    one line on stderr: the log is a record of the run, the checkpoint is what resume trusts."""
    if not path.is_file():
        return []
    rows, dropped = [], 0
    for line in path.read_bytes().decode("utf-8", errors="replace").splitlines():
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            if not isinstance(row, dict) or not isinstance(row["step"], int):
                raise ValueError(line)
            float(row["loss"])
        except (ValueError, KeyError, TypeError):
            dropped += 1
            continue
        rows.append((line, row))
    if dropped:
        note(f"{path}: dropped {dropped} torn or unreadable line(s); the rest is kept")
    return rows


def _resume_log(path: Path, *, upto: int) -> list[float]:
    """Keep the log lines up to the checkpoint we resume from (later ones will be written again),
    drop any torn line, and return the kept losses."""
    if not path.is_file():
        return []
    kept = [(line, row) for line, row in _log_rows(path) if row["step"] <= upto]
    path.write_text("".join(f"{line}\n" for line, _ in kept), encoding="utf-8")
    return [float(row["loss"]) for _, row in kept]


def _append_log(path: Path, row: dict[str, Any]) -> None:
    with path.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(row) + "\n")


class _Progress:
    """A rich progress bar with loss, tokens/s and ETA; silent when disabled."""

    def __init__(self, *, enabled: bool, total: int, done: int) -> None:
        self.enabled = enabled
        self.total = total
        self.done = done

    def __enter__(self) -> _Progress:
        if self.enabled:
            self.progress = Progress(
                TextColumn("[bold]train"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("loss {task.fields[loss]:.4f}  {task.fields[tps]:.0f} tok/s"),
                TimeRemainingColumn(),
                transient=False,
            )
            self.progress.start()
            self.task = self.progress.add_task(
                "train", total=self.total, completed=self.done, loss=float("nan"), tps=0.0
            )
        return self

    def update(self, step: int, *, loss: float, tokens_per_s: float) -> None:
        if self.enabled:
            self.progress.update(self.task, completed=step, loss=loss, tps=tokens_per_s)

    def __exit__(self, *exc: object) -> None:
        if self.enabled:
            self.progress.stop()

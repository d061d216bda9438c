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

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch
from accelerate import Accelerator
from accelerate.utils import DataLoaderConfiguration

from forgetbench.device import model_device, precision
from forgetbench.errors import ConfigError, ForgetbenchError, PluginError
from forgetbench.modeling.packing import packing_collate, uses_padding_free
from forgetbench.train import train_log
from forgetbench.train.batches import (
    accumulation_steps,
    count_tokens,
    epoch_loader,
    fit_per_device,
    launched_processes,
)
from forgetbench.train.checkpoint import LoopPosition, load_checkpoint, save_checkpoint
from forgetbench.train.contracts import Examples, LossFn, StatefulLoss, StepHook
from forgetbench.train.kernels import apply_liger, compile_model, uses_liger
from forgetbench.train.loop_config import SCHEDULES, LoopConfig
from forgetbench.train.schedule import build_optimizer, lr_factor, warmup_steps
from forgetbench.train.sharding import (
    clip_sharded_gradients,
    shard_model,
    sharding_requested,
    two_gradient_refusal,
)
from forgetbench.train.step_numbers import StepNumbers


class NonFiniteLoss(ForgetbenchError):
    pass


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
    processes = accelerator.num_processes if accelerator else launched_processes()
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
    accumulation = accumulation_steps(config, processes)
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
    warmup = warmup_steps(config, n_examples, steps_per_epoch)
    offset = 1 if config.schedule == "linear" else 0

    settings = precision()
    if settings.gradient_checkpointing:
        enable_gradient_checkpointing(model)
    # Liger patches modules (before FSDP wraps them), compile wraps what is sharded, as FSDP2
    # recommends, and both come before DDP and the optimizer: the parameters stay the same.
    if uses_liger(model, accelerator.device, enabled=settings.liger_kernel):
        apply_liger(model)
    if uses_padding_free(model, accelerator.device, asked=settings.padding_free):
        collate_fn = packing_collate(collate_fn)
    if sharded:  # before the optimizer: it must hold the shards that replace the parameters
        shard_model(model)
    if settings.compile:
        compile_model(model)
    # FSDP's sharded parameters keep the multi-tensor AdamW they were tested with.
    optimizer = build_optimizer(model, config, device=None if sharded else accelerator.device)
    # Not given to accelerator.prepare: its wrapper steps the schedule once per process, and ours
    # is already counted in optimizer steps. A checkpoint keeps its state_dict in our JSON.
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: lr_factor(s, warmup, total_steps, offset=offset)
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

    log_path = out / train_log.TRAIN_LOG
    losses = []
    if accelerator.is_main_process:
        out.mkdir(parents=True, exist_ok=True)
        losses = train_log.resume_log(log_path, upto=position.step)

    started = time.perf_counter()
    step = position.step
    tokens_seen = 0
    # Nothing in a step reads a number off the device (step_numbers.py): the step's losses, named
    # terms, tokens and gradient norm are read in one copy once its optimizer step is queued.
    numbers = StepNumbers()
    with train_log.ProgressBar(
        enabled=progress and accelerator.is_main_process, total=total_steps, done=step
    ) as bar:
        for epoch in range(position.epoch, config.epochs):
            this_epoch = epoch_examples(epoch)
            if len(this_epoch) != n_examples:
                raise ValueError(
                    f"epoch {epoch + 1} has {len(this_epoch)} examples, epoch 1 had {n_examples}"
                )
            loader = accelerator.prepare_data_loader(
                epoch_loader(this_epoch, config, epoch, collate_fn, pin=pin)
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
                    numbers.add(loss, parts, count_tokens(batch))
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
                    train_log.append_log(
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
                # Not after the last step: the finished model is saved next and supersedes it (a
                # whole save of weights and optimizer state, deleted unread; a kill in between
                # retrains from the previous checkpoint to the same weights).
                if (
                    save_checkpoints
                    and step < total_steps
                    and (
                        (config.checkpoint_every and step % config.checkpoint_every == 0)
                        or end_of_epoch
                    )
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

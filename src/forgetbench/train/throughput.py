"""Training throughput: forgetbench's training loop and Hugging Face's `Trainer` run side by side on
the same model initialisation, examples, data order, optimizer, schedule and batching, one epoch
each (`forgetbench bench train` on a given model or a `model.size`).

Each run reports tokens/s, real (attention-mask) and padded (every position the model computes),
achieved FLOP/s and its share of the device's peak, peak memory, and the per-step losses; the
batches' padding share and the largest per-step loss difference between the two runs come with
them. Rates are the steady state: from the end of the first optimizer step (kernel selection,
allocator warm-up, lazy initialisation) to the end of the last.

FLOPs: 6 x parameters x padded tokens (forward 2, backward 4 multiply-adds per parameter and token;
padding costs what a real token costs), every parameter counted once (a tied embedding is the
output projection's matmul). Attention scores (QK^T and AV) are not counted: at TOFU's lengths
(~100-200 tokens) they add 12 x layers x hidden x length per token, under 1 % of 6 x parameters for
the 1B shape. The peak is measured on the device now (`matmul_peak_flop_per_s`) in the dtype the
matmuls run in (bf16 under bf16 weights or autocast, else float32)."""

from __future__ import annotations

import gc
import math
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

from forgetbench.device import (
    matmul_peak_flop_per_s,
    model_device,
    peak_memory_mib,
    peak_rss_mib,
    precision,
    reset_peak_memory,
    reset_peak_rss,
)
from forgetbench.errors import ConfigError, ForgetbenchError
from forgetbench.modeling.encoding import Encoded, collate
from forgetbench.modeling.packing import uses_padding_free
from forgetbench.profiling import StepProfiler
from forgetbench.train.batches import accumulation_steps
from forgetbench.train.loop import train_loop
from forgetbench.train.loop_config import LoopConfig
from forgetbench.train.order import epoch_order, example_lengths
from forgetbench.train.schedule import build_optimizer, lr_factor, warmup_steps
from forgetbench.train.stages import answer_nll

PROFILE_STEPS = 3  # profiled steps per trainer, after the first

# Largest per-step loss difference the two trainers may show. Both run the same kernels on the
# same batches in the same order (forward, backward of loss / accumulation steps, clipping to the
# same norm, torch's AdamW, the same LambdaLR), so in float32 they differ only by the order
# accumulate/clip sums in: measured 0 to ~1e-7 on the tiny model. 1e-5 leaves that a hundredfold
# margin and still catches any recipe difference (an lr off by one step moves the second loss by
# ~1e-3). Under bf16 (weights or autocast) rounding is ~4e-3 per operation: the target is 1e-3.
LOSS_TOLERANCE = {"float32": 1e-5, "bf16": 1e-3}


class TrainersDiffer(ForgetbenchError):
    """forgetbench's loop and HF's Trainer lose differently on the same recipe."""

    exit_code = 1


FLOP_CONVENTION = (
    "6 x parameters x padded tokens (forward + backward); attention scores not counted"
)


@dataclass
class Recorder:
    """What one run saw: (real, padded) tokens of each micro-batch as collated, in order; the
    clock at each optimizer step's end; each micro-batch's loss."""

    batches: list[tuple[int, int]] = field(default_factory=list)
    step_ends: list[float] = field(default_factory=list)
    micro_losses: list[torch.Tensor] = field(default_factory=list)

    def collate(self, pad_id: int) -> Callable[[list[Encoded]], dict[str, torch.Tensor]]:
        def counted(examples: list[Encoded]) -> dict[str, torch.Tensor]:
            batch = collate(examples, pad_id=pad_id)
            mask = batch["attention_mask"]
            self.batches.append((int(mask.sum()), int(mask.numel())))
            return batch

        return counted

    def step_end(self, device: torch.device, profiler: StepProfiler | None = None) -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        self.step_ends.append(time.perf_counter())
        if profiler is not None:
            profiler.step()


def train_throughput(
    build: Callable[[], Any],
    examples: Sequence[Encoded],
    *,
    config: LoopConfig,
    pad_id: int,
    out: Path,
    hf_trainer: bool = True,
    progress: bool = False,
    profile: bool | None = None,
) -> dict[str, Any]:
    """Train `build()` (a fresh model, placed, the same weights every call) one epoch on
    `examples` with forgetbench's loop, then a second `build()` with HF's Trainer; report both.
    `profile` (default: on a GPU) profiles steps 2-4 of each run (`forgetbench.profiling`); the
    rates then start after them, so the profiler's overhead never enters a rate."""
    config = replace(config, epochs=1)
    accumulation = accumulation_steps(config, 1)
    steps = math.ceil(math.ceil(len(examples) / config.per_device_batch_size) / accumulation)
    if steps < 2:
        raise ConfigError(
            f"bench train needs at least 2 optimizer steps, {len(examples)} examples make {steps}",
            "pass more --steps or a smaller train.batch_size",
        )
    model = build()
    n_params = sum(p.numel() for p in model.parameters())
    device = model_device(model)
    compute_dtype = _compute_dtype(model)
    # Whether our loop packs its batches (HF's Trainer is fed the padded ones): the same
    # batches either way, so the tokens counted and the rates compared stay the same.
    padding_free = uses_padding_free(model, device, asked=precision().padding_free)
    peak = matmul_peak_flop_per_s(device=device, dtype=compute_dtype)
    profile = device.type == "cuda" if profile is None else profile
    # Profiled steps after the first, leaving at least one unprofiled step to time.
    window = min(PROFILE_STEPS, steps - 2) if profile else 0
    ours = Recorder()
    profiler = StepProfiler(device, skip=1, steps=window) if window > 0 else None
    work = out / "forgetbench"
    shutil.rmtree(work, ignore_errors=True)  # a benchmark never resumes
    with _peak_memory() as memory:
        started = time.perf_counter()
        result = train_loop(
            model, examples, loss_fn=answer_nll, collate_fn=ours.collate(pad_id), config=config,
            out_dir=work, progress=progress, save_checkpoints=False,
            on_step=lambda _step, _model: ours.step_end(device, profiler),
        )  # fmt: skip
    report = {
        "forgetbench": _run_report(
            ours, result.losses, started, n_params, peak, memory, profiler=profiler
        )
    }
    del model, result
    _free(device)
    if hf_trainer:
        profiler = StepProfiler(device, skip=1, steps=window) if window > 0 else None
        theirs, losses, started, memory = _hf_run(
            build, examples, config, pad_id, out, progress, profiler
        )
        report["hf_trainer"] = _run_report(
            theirs, losses, started, n_params, peak, memory, profiler=profiler
        )
        if theirs.batches != ours.batches:
            raise RuntimeError("HF's Trainer saw other batches than forgetbench's loop")
    real = sum(r for r, _ in ours.batches)
    padded = sum(p for _, p in ours.batches)
    shares = [1 - r / p for r, p in ours.batches]
    mixed = precision().mixed_precision
    summary: dict[str, Any] = {
        "examples": len(examples),
        "steps": steps,
        "batch_size": config.batch_size,
        "per_device_batch_size": config.per_device_batch_size,
        "accumulation": accumulation,
        "group_by_length": config.group_by_length,
        "padding_free": padding_free,
        "n_params": n_params,
        "device": str(device),
        "compute_dtype": _dtype_name(compute_dtype),
        "mixed_precision": mixed,
        "flop_convention": FLOP_CONVENTION,
        "matmul_peak_flop_per_s": float(f"{peak:.4g}"),
        "tokens": {"real": real, "padded": padded},
        "padding": {
            "share": round(1 - real / padded, 4),
            "batch_mean": round(sum(shares) / len(shares), 4),
            "batch_max": round(max(shares), 4),
        },
    }
    if hf_trainer:
        a, b = report["forgetbench"]["losses"], report["hf_trainer"]["losses"]
        diffs = [abs(x - y) for x, y in zip(a, b, strict=True)]
        worst = max(range(len(diffs)), key=diffs.__getitem__)
        tolerance = LOSS_TOLERANCE["float32" if compute_dtype == torch.float32 else "bf16"]
        summary.update(
            speedup_vs_hf_trainer=round(
                report["forgetbench"]["tokens_per_s"]["padded"]
                / report["hf_trainer"]["tokens_per_s"]["padded"],
                3,
            ),
            max_loss_diff=diffs[worst],
            max_loss_diff_step=worst + 1,
            loss_tolerance=tolerance,
            losses_agree=diffs[worst] <= tolerance,
        )
    return {**summary, **report}


def _hf_run(
    build: Callable[[], Any],
    examples: Sequence[Encoded],
    config: LoopConfig,
    pad_id: int,
    out: Path,
    progress: bool,
    profiler: StepProfiler | None = None,
) -> tuple[Recorder, list[float], float, dict[str, Any]]:
    """HF's Trainer on forgetbench's recipe: the examples in the loop's epoch order, read
    sequentially; our loss (answer-token NLL), divided by the accumulation steps as the loop
    does; the loop's AdamW parameter groups and LambdaLR schedule; the same clipping norm."""
    from transformers import PrinterCallback, Trainer, TrainerCallback, TrainingArguments

    recorder = Recorder()
    model = build()
    device = model_device(model)
    # Our epoch's order, grouped by length too when asked: HF's own group_by_length sampler
    # draws its permutation from another generator, so it is fed ours, read sequentially.
    lengths = example_lengths(examples) if config.group_by_length else None
    ordered = [examples[i] for i in epoch_order(config, len(examples), 0, lengths=lengths)]
    accumulation = accumulation_steps(config, 1)
    steps_per_epoch = math.ceil(
        math.ceil(len(examples) / config.per_device_batch_size) / accumulation
    )
    warmup = warmup_steps(config, len(examples), steps_per_epoch)
    optimizer = build_optimizer(model, config, device=device)  # the loop's, fused on CUDA too
    offset = 1 if config.schedule == "linear" else 0
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: lr_factor(s, warmup, steps_per_epoch, offset=offset)
    )
    mixed = precision().mixed_precision
    args = TrainingArguments(
        output_dir=str(out / "hf_trainer"),
        per_device_train_batch_size=config.per_device_batch_size,
        gradient_accumulation_steps=accumulation,
        num_train_epochs=1,
        learning_rate=config.lr,
        weight_decay=config.weight_decay,
        max_grad_norm=config.max_grad_norm,
        train_sampling_strategy="sequential",
        remove_unused_columns=False,
        dataloader_num_workers=0,
        logging_strategy="no",
        save_strategy="no",
        report_to="none",
        disable_tqdm=not progress,
        use_cpu=device.type != "cuda",
        bf16=mixed == "bf16",
        fp16=mixed == "fp16",
        seed=config.seed,
    )

    class StepClock(TrainerCallback):
        def on_step_end(self, *_args: Any, **_kwargs: Any) -> None:
            recorder.step_end(device, profiler)

    class SameRecipe(Trainer):
        # Our loss is a per-batch mean, not normalised by the accumulated token count: HF must
        # divide it by the accumulation steps, as accelerate does in our loop.
        loss_is_scaled_for_ga = False

        def compute_loss(
            self, model: Any, inputs: dict, return_outputs: bool = False, **_: Any
        ) -> Any:
            loss = answer_nll(model, inputs)
            recorder.micro_losses.append(loss.detach())
            return loss

    trainer = SameRecipe(
        model=model,
        args=args,
        train_dataset=ordered,
        data_collator=recorder.collate(pad_id),
        optimizers=(optimizer, scheduler),
        callbacks=[StepClock()],
    )
    if not progress:  # with logging off it would still print its end-of-training summary
        trainer.remove_callback(PrinterCallback)
    with _peak_memory() as memory:
        started = time.perf_counter()
        trainer.train()
    # Each step's mean over its micro-batches, computed as the loop computes its own.
    micro = recorder.micro_losses
    losses = [
        torch.stack(micro[i : i + accumulation]).mean().item()
        for i in range(0, len(micro), accumulation)
    ]
    del trainer, model, optimizer, scheduler
    _free(device)
    return recorder, losses, started, memory


def _run_report(
    recorder: Recorder,
    losses: list[float],
    started: float,
    n_params: int,
    peak: float,
    memory: dict[str, Any],
    *,
    profiler: StepProfiler | None = None,
) -> dict[str, Any]:
    accumulation = len(recorder.batches) // len(recorder.step_ends) if recorder.step_ends else 1
    # Steady state: the micro-batches after the first optimizer step (and after the profiled
    # ones), over the time they took.
    skip = 1
    if profiler is not None:
        profiler.close()
        skip += profiler.recorded
    after = recorder.batches[skip * accumulation :]
    seconds = recorder.step_ends[-1] - recorder.step_ends[skip - 1]
    real = sum(r for r, _ in after)
    padded = sum(p for _, p in after)
    flop_per_s = 6 * n_params * padded / seconds
    return {
        "seconds": round(recorder.step_ends[-1] - started, 3),
        "first_step_seconds": round(recorder.step_ends[0] - started, 3),
        "steady_seconds": round(seconds, 3),
        "tokens_per_s": {"real": round(real / seconds, 1), "padded": round(padded / seconds, 1)},
        "flop_per_s": float(f"{flop_per_s:.4g}"),
        "share_of_peak": round(flop_per_s / peak, 4),
        **memory,
        "losses": [round(x, 7) for x in losses],
        **({"profile": profiler.summary()} if profiler is not None else {}),
    }


class _peak_memory:  # noqa: N801 - used as a context manager, like a function
    """Peak GPU memory (allocated) and peak resident set of the run inside, into a dict."""

    def __enter__(self) -> dict[str, Any]:
        gc.collect()
        reset_peak_memory()
        self.per_run = reset_peak_rss()
        self.result: dict[str, Any] = {}
        return self.result

    def __exit__(self, *exc: object) -> None:
        self.result["peak_gpu_mib"] = peak_memory_mib()
        # Without a resettable high-water mark the process's peak so far (ours runs first).
        self.result["peak_rss_mib"] = peak_rss_mib()
        self.result["peak_rss_is_this_run"] = self.per_run


def _free(device: torch.device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def _compute_dtype(model: Any) -> torch.dtype:
    mixed = precision().mixed_precision
    if mixed == "bf16":
        return torch.bfloat16
    if mixed == "fp16":
        return torch.float16
    return next(model.parameters()).dtype


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")

"""Where the built-in miniature's study runs on a machine with a GPU: worker processes on the GPU,
on the CPU cores, or both, chosen by a short measurement.

A 3M-parameter model leaves a large GPU nearly idle: each training step is hundreds of small
kernels, launched one by one by the host, so one process on the GPU is bound by its one core's
launch rate, several processes share the GPU until its kernels fill it, and the remaining cores
can still train models of their own. `measure_steps` times a few training steps of the
miniature's model shape on one core and on the GPU (with the GPU's own busy time, from the
profiler); `choose_placement`, a pure function of those numbers, estimates the steps per second
of every split of the cores between GPU workers (each needs a core to launch from) and CPU
workers (one thread each), and takes the fastest. On a machine without a GPU nothing is measured:
one CPU worker per core, as always.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

# GPU worker processes tried at most: each holds its own CUDA context (about 500 MiB).
MAX_GPU_WORKERS = 8
MEASURED_STEPS = 3  # timed after one warm-up step
MEASURE_BATCH = 16  # the miniature's per-device batch
MEASURE_TOKENS = 64  # about a miniature question and answer
NOISE = 0.02  # estimates this close to the best are taken as equal


@dataclass(frozen=True)
class Placement:
    """How many worker processes run on the GPU and on the CPU cores, and why."""

    gpu_workers: int
    cpu_workers: int
    measured: dict[str, float] = field(default_factory=dict)  # seconds per step
    estimates: dict[str, float] = field(default_factory=dict)  # steps/s of each option tried

    @property
    def kind(self) -> str:
        if self.gpu_workers and self.cpu_workers:
            return "both"
        return "gpu" if self.gpu_workers else "cpu"

    @property
    def workers(self) -> int:
        return self.gpu_workers + self.cpu_workers

    def devices(self) -> list[str]:
        """Each worker's device, in the order the pool starts them."""
        return ["cuda"] * self.gpu_workers + ["cpu"] * self.cpu_workers

    def record(self) -> dict[str, Any]:
        return {"kind": self.kind, **asdict(self)}

    def line(self) -> str:
        step = ", ".join(f"{k} {v * 1000:.1f} ms" for k, v in self.measured.items())
        best = max(self.estimates.values(), default=0.0)
        return (
            f"placement: {self.gpu_workers} GPU and {self.cpu_workers} CPU worker processes "
            f"(estimated {best:.1f} training steps/s; measured a step: {step})"
        )


def _option(gpu: int, cpu: int) -> str:
    return f"{gpu} gpu + {cpu} cpu"


def choose_placement(
    cores: int,
    *,
    cpu_step_s: float,
    gpu_step_s: float | None = None,
    gpu_busy_s: float | None = None,
    max_gpu_workers: int = MAX_GPU_WORKERS,
) -> Placement:
    """The fastest split of `cores` between GPU and CPU workers, from one step's measured
    seconds: on one CPU thread (`cpu_step_s`), on the GPU from one process (`gpu_step_s`, wall)
    and the GPU's busy time in it (`gpu_busy_s`). g GPU workers are estimated at
    min(g / gpu_step_s, 1 / gpu_busy_s) steps/s (each launches at its own pace until the GPU's
    kernels fill it), c CPU workers at c / cpu_step_s; g + c <= cores. Without GPU figures, every
    core a CPU worker. Among estimates within `NOISE` of the best, the fewest processes."""
    cores = max(1, cores)
    measured = {"cpu": cpu_step_s}
    estimates = {_option(0, cores): cores / cpu_step_s}
    if gpu_step_s is not None:
        measured["gpu"] = gpu_step_s
        busy = gpu_busy_s if gpu_busy_s else gpu_step_s  # no profile: as if the GPU were full
        measured["gpu_busy"] = busy
        for gpu in range(1, min(cores, max_gpu_workers) + 1):
            on_gpu = min(gpu / gpu_step_s, 1 / busy)
            for cpu in sorted({0, cores - gpu}):
                estimates[_option(gpu, cpu)] = on_gpu + cpu / cpu_step_s
    best = max(estimates.values())
    # Options within the measurement's noise of the best: the fewest processes, then the fewest
    # on the GPU (each holds a CUDA context), so a CPU worker adding 0.1 % is not started.
    close = [k for k, v in estimates.items() if v >= best * (1 - NOISE)]
    splits = [tuple(int(part.split()[0]) for part in k.split(" + ")) for k in close]
    gpu, cpu = min(splits, key=lambda s: (s[0] + s[1], s[0]))
    return Placement(
        gpu,
        cpu,
        {k: round(v, 6) for k, v in measured.items()},
        {k: round(v, 3) for k, v in estimates.items()},
    )


class _Vocabulary:
    """A tokenizer's size and special ids, all `build_tiny_model` reads: the measurement needs
    the model's shape, not the miniature's trained tokenizer."""

    bos_token_id, eos_token_id, pad_token_id = 1, 2, 0

    def __init__(self, size: int) -> None:
        self.size = size

    def __len__(self) -> int:
        return self.size


def _seconds_per_step(model: Any, device: torch.device) -> tuple[float, float | None]:
    """Wall seconds of one training step (forward, backward, AdamW) on `device` over
    `MEASURED_STEPS` steps after a warm-up, and on a GPU the GPU's busy seconds per step, from
    as many steps again under the profiler (whose overhead stays out of the wall time)."""
    from forgetbench.profiling import StepProfiler

    model.to(device).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    vocab = model.get_input_embeddings().weight.shape[0]
    ids = torch.randint(3, vocab, (MEASURE_BATCH, MEASURE_TOKENS)).to(device)

    def step() -> None:
        model(input_ids=ids, labels=ids).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    step()  # warm-up: kernel selection, allocation
    started = time.perf_counter()
    for _ in range(MEASURED_STEPS):
        step()
    seconds = (time.perf_counter() - started) / MEASURED_STEPS
    if device.type != "cuda":
        return seconds, None
    profiler = StepProfiler(device, skip=1, steps=MEASURED_STEPS)
    profiler.step()  # opens the window
    for _ in range(MEASURED_STEPS):
        step()
        profiler.step()
    profiler.close()
    return seconds, profiler.summary().get("device_seconds_per_step")


def measure_steps(scale: str) -> dict[str, float | None]:
    """One training step of the miniature's model shape at `scale`, timed on one CPU thread and
    on the GPU (a few seconds in all, the GPU's first use included)."""
    from forgetbench.benchmarks.mini.scales import SCALES
    from forgetbench.modeling.builtin import build_tiny_model

    vocabulary = _Vocabulary(SCALES[scale].model.vocab)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as a CPU worker runs
    try:
        cpu_step, _ = _seconds_per_step(
            build_tiny_model(vocabulary, scale=scale), torch.device("cpu")
        )
    finally:
        torch.set_num_threads(threads)
    model = build_tiny_model(vocabulary, scale=scale)
    gpu_step, gpu_busy = _seconds_per_step(model, torch.device("cuda"))
    del model
    torch.cuda.empty_cache()
    return {"cpu_step_s": cpu_step, "gpu_step_s": gpu_step, "gpu_busy_s": gpu_busy}


def study_placement(
    cores: int | None = None, *, scale: str, gpu: bool, measure: Any = None
) -> Placement:
    """The built-in study's placement: without a GPU, one CPU worker per core (nothing measured);
    with one, `choose_placement` on `measure(scale)` (`measure_steps` unless given)."""
    cores = cores or os.cpu_count() or 1
    if not gpu:
        return Placement(0, cores)
    return choose_placement(cores, **(measure or measure_steps)(scale))


def miniature_placement(config: Any, model: str | None) -> Placement | None:
    """The measured placement of the built-in miniature's study on a machine with a GPU, where
    `study.workers` is unset and one process runs it (no `torchrun`); None elsewhere, where
    `study_workers` decides as before (one worker per core on a CPU-only machine)."""
    from forgetbench.device import default_device
    from forgetbench.eval.distributed import process_layout

    if config.study.workers or model is not None or process_layout()[1] > 1:
        return None
    if default_device().type != "cuda":
        return None
    return study_placement(scale=config.scale, gpu=True)


@contextmanager
def placed(placement: Placement | None) -> Iterator[None]:
    """The study's process on the CPU while it runs, where the placement put every worker there
    (its own jobs, and the workers it starts, then see the CPU as their device)."""
    from forgetbench.device import DEVICE_ENV

    if placement is None or placement.kind != "cpu":
        yield
        return
    before = os.environ.get(DEVICE_ENV)
    os.environ[DEVICE_ENV] = "cpu"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(DEVICE_ENV, None)
        else:
            os.environ[DEVICE_ENV] = before
